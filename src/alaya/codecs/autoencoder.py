"""The full RGB autoencoder: 8x spatial downsampling (128x128x3 -> 16x16xC), bounded latents.

Images are float (B, 3, H, W) in [0, 1] (``to_images`` makes them of uint8 frames); latents
are (B, C, H/8, W/8), softly bounded to (-4, 4). The teacher works in this latent space;
G-buffer modalities are encoded with it too (``gbuffer.py``).

Each side has a linear path beside the convolutional one: an 8x8 block transform (pixel
unshuffle, 1x1 convolution) that ``init_linear_path`` sets to the principal components of the
training data's 8x8 blocks, scaled to unit variance. The convolutional branches start at zero,
so training starts from the PCA codec (docs/codecs.md has its quality) and only has to learn
what a block transform cannot.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from alaya.nn.blocks import Downsample, ResBlock, Upsample, bounded, check_image, conv
from alaya.nn.pretrained import from_pretrained, save_pretrained


def to_images(rgb: np.ndarray) -> torch.Tensor:
    """uint8 (..., H, W, 3) -> float (N, 3, H, W) in [0, 1]."""
    t = torch.from_numpy(np.ascontiguousarray(rgb)).reshape(-1, *rgb.shape[-3:])
    return t.permute(0, 3, 1, 2).float() / 255.0


@dataclass
class AutoencoderConfig:
    latent_channels: int = 32
    channels: tuple[int, ...] = (64, 96, 128)        # widths at 1/2, 1/4, 1/8 resolution
    image_channels: int = 3


class Autoencoder(nn.Module):
    downsample = 8

    def __init__(self, config: AutoencoderConfig | None = None):
        super().__init__()
        self.config = c = config or AutoencoderConfig()
        if len(c.channels) != 3:
            raise ValueError("AutoencoderConfig.channels needs 3 widths (x1/2, x1/4, x1/8)")
        w1, w2, w3 = c.channels
        block = 64 * c.image_channels
        self.encode_linear = nn.Sequential(nn.PixelUnshuffle(8), nn.Conv2d(block, c.latent_channels, 1))
        self.decode_linear = nn.Sequential(nn.Conv2d(c.latent_channels, block, 1), nn.PixelShuffle(8))
        # no convolution runs at full resolution: pixel (un)shuffle moves 2x2 blocks to channels
        self.encoder = nn.Sequential(
            nn.PixelUnshuffle(2), conv(4 * c.image_channels, w1), nn.ReLU(inplace=True),
            ResBlock(w1),
            Downsample(w1, w2), ResBlock(w2),
            Downsample(w2, w3), ResBlock(w3), ResBlock(w3),
            conv(w3, c.latent_channels),
        )
        self.decoder = nn.Sequential(
            conv(c.latent_channels, w3), nn.ReLU(inplace=True), ResBlock(w3), ResBlock(w3),
            Upsample(w3, w2), ResBlock(w2),
            Upsample(w2, w1), ResBlock(w1),
            conv(w1, 4 * c.image_channels), nn.PixelShuffle(2),
        )
        for last in (self.encoder[-1], self.decoder[-2]):      # residual branches start at zero
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)

    @torch.no_grad()
    def init_linear_path(self, images: torch.Tensor) -> float:
        """Set the block transforms to PCA of ``images`` (N, 3, H, W) in [0, 1], whitened.
        Returns the fraction of block variance the kept components explain."""
        C = self.config.latent_channels
        blocks = self.encode_linear[0](images * 2 - 1)                      # (N, 192, h, w)
        X = blocks.permute(0, 2, 3, 1).reshape(-1, blocks.shape[1]).double()
        mean = X.mean(0)
        cov = torch.cov((X - mean).T)
        evals, evecs = torch.linalg.eigh(cov)
        evals, evecs = evals.flip(0)[:C].clamp(min=1e-8), evecs.flip(1)[:, :C]
        std = evals.sqrt()
        enc = (evecs / std).T                                                # (C, 192)
        self.encode_linear[1].weight.copy_(enc[:, :, None, None].float())
        self.encode_linear[1].bias.copy_((-enc @ mean).float())
        dec = evecs * std                                                    # (192, C)
        self.decode_linear[0].weight.copy_(dec[:, :, None, None].float())
        self.decode_linear[0].bias.copy_(mean.float())
        return float(evals.sum() / torch.linalg.eigvalsh(cov).sum())

    @property
    def latent_channels(self) -> int:
        return self.config.latent_channels

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) in [0, 1] -> (B, C, H/8, W/8) bounded latents."""
        check_image(x, self.config.image_channels, self.downsample, "autoencoder input")
        x = x * 2 - 1
        return bounded(self.encode_linear(x) + self.encoder(x), 4.0)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """(B, C, h, w) latents -> (B, 3, 8h, 8w) images, clamped to [0, 1] outside training."""
        check_image(z, self.config.latent_channels, 1, "autoencoder latent")
        x = (self.decode_linear(z) + self.decoder(z)) * 0.5 + 0.5
        return x if self.training else x.clamp(0, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))

    def save_pretrained(self, folder, **metadata) -> None:
        save_pretrained(self, folder, **metadata)

    @classmethod
    def from_pretrained(cls, folder) -> "Autoencoder":
        return from_pretrained(cls, AutoencoderConfig, folder)

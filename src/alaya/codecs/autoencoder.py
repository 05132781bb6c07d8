"""The full RGB autoencoder: 8x spatial downsampling (128x128x3 -> 16x16xC), bounded latents.

Images are float (B, 3, H, W) in [0, 1]; latents are (B, C, H/8, W/8) in (-3, 3). The teacher
works in this latent space; G-buffer modalities are encoded with it too (``gbuffer.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from alaya.nn.blocks import Downsample, ResBlock, Upsample, bounded, check_image, conv
from alaya.nn.pretrained import from_pretrained, save_pretrained


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

    @property
    def latent_channels(self) -> int:
        return self.config.latent_channels

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) in [0, 1] -> (B, C, H/8, W/8) bounded latents."""
        check_image(x, self.config.image_channels, self.downsample, "autoencoder input")
        return bounded(self.encoder(x * 2 - 1))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """(B, C, h, w) latents -> (B, 3, 8h, 8w) images, clamped to [0, 1] outside training."""
        check_image(z, self.config.latent_channels, 1, "autoencoder latent")
        x = self.decoder(z) * 0.5 + 0.5
        return x if self.training else x.clamp(0, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))

    def save_pretrained(self, folder, **metadata) -> None:
        save_pretrained(self, folder, **metadata)

    @classmethod
    def from_pretrained(cls, folder) -> "Autoencoder":
        return from_pretrained(cls, AutoencoderConfig, folder)

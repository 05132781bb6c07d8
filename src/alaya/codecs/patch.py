"""``PatchCodec``: a lossless latent space — space-to-depth over f x f pixel patches.

``encode`` maps an image (B, 3, H, W) in [0, 1] to (B, 3 f^2, H/f, W/f) in [-1, 1] (pixel
unshuffle of 2x - 1); ``decode`` inverts it exactly. Unlike the RGB autoencoder's latents it is
linear, so an average of latents decodes to the average image (a blur, never the "mush" a
nonlinear decoder makes of averaged latents), and it costs nothing. The world model works in it
(``docs/world.md`` has the measurement that made us switch). ``forward(z, previous)`` follows
the streaming decoders' protocol (``alaya.codecs.tiny.StreamingDecoder``): it has no memory and
hands ``previous`` back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class PatchCodecConfig:
    factor: int = 4
    image_channels: int = 3


class PatchCodec(nn.Module):
    state_channels = 1          # the (unused) streaming state, so exported graphs keep its input

    def __init__(self, config: PatchCodecConfig | None = None):
        super().__init__()
        self.config = config or PatchCodecConfig()

    @property
    def latent_channels(self) -> int:
        return self.config.image_channels * self.config.factor ** 2

    @property
    def downsample(self) -> int:
        return self.config.factor

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        f = self.config.factor
        if x.ndim != 4 or x.shape[1] != self.config.image_channels or x.shape[2] % f or x.shape[3] % f:
            raise ValueError(f"patch codec input: expected (B, {self.config.image_channels}, H, W) with H, W "
                             f"multiples of {f}, got {tuple(x.shape)}")
        return F.pixel_unshuffle(x * 2 - 1, f)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        if z.ndim != 4 or z.shape[1] != self.latent_channels:
            raise ValueError(f"patch codec latent: expected (B, {self.latent_channels}, h, w), got {tuple(z.shape)}")
        x = F.pixel_shuffle(z, self.config.factor) * 0.5 + 0.5
        return x if self.training else x.clamp(0, 1)

    def forward(self, z: torch.Tensor, previous: torch.Tensor | None = None):
        return self.decode(z), previous


def stabilize_patch_latent(z: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
    """Two projections that keep a long rollout in the patch space (``PatchCodec``, 4x4) from
    drifting: the frame-to-frame change loses its frame-wide 4-periodic part (the mean change of
    each sub-pixel position differs from its colour's mean change only through error: natural
    motion is not aligned to the patch grid, while a small per-channel bias, added every frame,
    grows into a grid pattern), and values stay in the codec's range [-1, 1]."""
    B, C, h, w = z.shape
    change = (z - previous).reshape(B, 3, C // 3, h, w)
    offset = change.mean((3, 4), keepdim=True)
    change = change - (offset - offset.mean(2, keepdim=True))
    return (previous + change.reshape(B, C, h, w)).clamp(-1.0, 1.0)

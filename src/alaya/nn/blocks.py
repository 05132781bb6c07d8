"""Small convolutional building blocks shared by the codecs and the models (TAESD-style)."""

from __future__ import annotations

import torch
from torch import nn


def conv(cin: int, cout: int, kernel: int = 3, stride: int = 1, groups: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups)


class ResBlock(nn.Module):
    """x + conv(relu(conv(x))), with a 1x1 projection when the width changes."""

    def __init__(self, cin: int, cout: int | None = None, groups: int = 1):
        super().__init__()
        cout = cout or cin
        self.body = nn.Sequential(conv(cin, cout, groups=groups), nn.ReLU(inplace=True),
                                  conv(cout, cout, groups=groups))
        self.skip = nn.Identity() if cin == cout else nn.Conv2d(cin, cout, 1, groups=groups)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.body(x) + self.skip(x))


class Upsample(nn.Sequential):
    """Nearest-neighbour x2 then a 3x3 convolution (no checkerboard artefacts)."""

    def __init__(self, cin: int, cout: int):
        super().__init__(nn.Upsample(scale_factor=2, mode="nearest"), conv(cin, cout),
                         nn.ReLU(inplace=True))


class Downsample(nn.Sequential):
    """Strided 3x3 convolution, x1/2."""

    def __init__(self, cin: int, cout: int, groups: int = 1):
        super().__init__(conv(cin, cout, stride=2, groups=groups), nn.ReLU(inplace=True))


def bounded(x: torch.Tensor, limit: float = 3.0) -> torch.Tensor:
    """Soft clamp to (-limit, limit), as TAESD does for its latents."""
    return limit * torch.tanh(x / limit)


def check_image(x: torch.Tensor, channels: int, multiple: int, name: str = "input") -> None:
    """Raise ValueError naming the problem when ``x`` is not a finite (B, C, H, W) batch."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if x.ndim != 4 or x.shape[1] != channels:
        raise ValueError(f"{name}: expected shape (B, {channels}, H, W), got {tuple(x.shape)}")
    if x.shape[2] % multiple or x.shape[3] % multiple:
        raise ValueError(f"{name}: height and width must be multiples of {multiple}, "
                         f"got {tuple(x.shape[2:])}")
    if not torch.isfinite(x.sum()):      # NaN and inf propagate into the sum (cheap check)
        raise ValueError(f"{name}: contains NaN or infinite values")

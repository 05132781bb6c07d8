"""Conditioning layers: sinusoidal time embedding, adaptive group norm, temporal mixing."""

from __future__ import annotations

import contextlib
import math
import threading

import torch
from torch import nn

_band = threading.local()


@contextlib.contextmanager
def smooth_time_derivative(max_frequency: float | None):
    """Within this block (on this thread), derivatives in ``t`` of ``timestep_embedding`` leave out
    its features of angular frequency above ``max_frequency`` (radians per unit of t): those
    features keep their values, but their phase counts as constant. The embedding's frequencies
    reach 1000, so a network's exact ``du/dt`` is mostly the wiggle those features put in it at
    periods of a few thousandths of t (measured: docs/flash.md, "MeanFlow: the derivative").
    This is a smoothed, biased derivative, not the exact one: whatever t-dependence the fast
    features carry is left unconstrained by an identity built on it. Values and gradients in the
    parameters are unchanged; ``None`` keeps the exact derivative. Forward-mode derivatives only
    (``torch.func.jvp``); a finite difference sees values and is unaffected."""
    if max_frequency is not None and not max_frequency > 0:
        raise ValueError(f"max_frequency must be > 0 or None, got {max_frequency}")
    before = getattr(_band, "max_frequency", None)
    _band.max_frequency = max_frequency
    try:
        yield
    finally:
        _band.max_frequency = before


def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """(B,) times in [0, 1] -> (B, dim) sinusoidal features (Vaswani et al. 2017; DDPM), at angular
    frequencies 1000 * max_period ** (-k / half) per unit of t, k = 0 .. half - 1."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=t.device) / half)
    args = (t.float() * 1000)[:, None] * freqs[None]
    cutoff = getattr(_band, "max_frequency", None)
    if cutoff is not None:                    # fast features: value kept, derivative in t dropped
        args = torch.where(1000 * freqs[None] > cutoff, args.detach(), args)
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class AdaGroupNorm(nn.Module):
    """GroupNorm whose scale and shift come from a conditioning vector (FiLM / AdaGN)."""

    def __init__(self, channels: int, cond_dim: int, groups: int = 8):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels, affine=False)
        self.proj = nn.Linear(cond_dim, 2 * channels)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def modulation(self, cond: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, cond_dim) -> gain ``1 + scale`` and shift, each (B, channels, 1, 1)."""
        scale, shift = self.proj(cond)[:, :, None, None].chunk(2, dim=1)
        return 1 + scale, shift

    def forward(self, x: torch.Tensor, cond: torch.Tensor | dict) -> torch.Tensor:
        """``cond``: the conditioning vector, or a precomputed ``{norm: modulation(cond)}`` of
        every norm of a network (what a sampler computes once per prompt, not per step)."""
        gain, shift = cond[self] if isinstance(cond, dict) else self.modulation(cond)
        return self.norm(x) * gain + shift


class TemporalConv(nn.Module):
    """Mixes features across frames with a 1D convolution over time at every pixel.
    ``causal=False`` looks both ways (the teacher); ``causal=True`` only at the past."""

    def __init__(self, channels: int, kernel: int = 3, causal: bool = False):
        super().__init__()
        self.kernel, self.causal = kernel, causal
        self.conv = nn.Conv1d(channels, channels, kernel)
        nn.init.zeros_(self.conv.weight)
        nn.init.zeros_(self.conv.bias)

    def forward(self, x: torch.Tensor, frames: int) -> torch.Tensor:
        bt, c, h, w = x.shape
        if frames == 1:     # replicate padding of one frame: every tap sees it, a 1x1 convolution
            return x + nn.functional.conv2d(x, self.conv.weight.sum(-1)[:, :, None, None], self.conv.bias)
        seq = x.reshape(bt // frames, frames, c, h * w).permute(0, 3, 2, 1).reshape(-1, c, frames)
        pad = (self.kernel - 1, 0) if self.causal else ((self.kernel - 1) // 2, self.kernel // 2)
        y = self.conv(nn.functional.pad(seq, pad, mode="replicate"))
        y = y.reshape(bt // frames, h * w, c, frames).permute(0, 3, 2, 1).reshape(bt, c, h, w)
        return x + y

"""A loss on how much detail a frame has, not where: patch amplitude spectra.

A regression's answer where the content is uncertain is the mean of what could be there, and a
mean has lost the high frequencies (a world model's one-step frame in the memory's holes: soft
streaks where the game shows checkers and bricks). Comparing the amplitude of each patch's
Fourier transform with the true frame's asks for the same energy at each frequency and
orientation while leaving the phase, that is where each stripe or checker falls, free (the
amplitude-spectrum losses of texture synthesis; Liu et al. 2016, "Texture synthesis through
convolutional neural networks and spectrum constraints"; Jiang et al. 2021, "Focal frequency
loss"). Unlike a critic it also penalizes detail the true patch lacks, so it does not reward
confetti.

A world model applies it to luminance (``luminance``): per colour channel, amplitudes alone
let each channel's texture take its own phase, and the frames filled with saturated green and
magenta blotches (measured: docs/world.md); colour stays the regression's.

Per channel, each ``patch`` x ``patch`` tile (stride ``patch // 2``) has its mean removed, is
multiplied by a 2-D Hann window (a tile's edges are not a periodic jump), and its ``rfft2``
amplitude is compared on a log scale (``log1p``: the few strong frequencies of a checker do not
drown the rest). Tiles count by the share of ``where`` in them.
"""

from __future__ import annotations

import torch


def luminance(rgb: torch.Tensor) -> torch.Tensor:
    """(B, 1, H, W) Rec. 601 luma of frames (B, 3, H, W)."""
    if rgb.ndim != 4 or rgb.shape[1] != 3:
        raise ValueError(f"rgb: expected (B, 3, H, W), got {tuple(rgb.shape)}")
    return (rgb * rgb.new_tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)).sum(1, keepdim=True)


def _tiles(x: torch.Tensor, patch: int) -> torch.Tensor:
    """(B, C, n, patch, patch) overlapping tiles (stride patch // 2) of images (B, C, H, W)."""
    step = max(1, patch // 2)
    t = x.unfold(2, patch, step).unfold(3, patch, step)             # (B, C, nh, nw, p, p)
    return t.reshape(*t.shape[:2], -1, patch, patch)


def patch_spectra(images: torch.Tensor, patch: int = 16) -> torch.Tensor:
    """(B, C, n, patch, patch // 2 + 1) log amplitudes of the windowed, mean-free tiles."""
    tiles = _tiles(images.float(), patch)
    tiles = tiles - tiles.mean((-2, -1), keepdim=True)
    window = torch.hann_window(patch, periodic=False, dtype=tiles.dtype, device=tiles.device)
    f = torch.fft.rfft2(tiles * (window[:, None] * window[None]))
    return torch.log1p((f.real ** 2 + f.imag ** 2 + 1e-8).sqrt())


def patch_spectrum_loss(fake: torch.Tensor, real: torch.Tensor, where: torch.Tensor | None = None,
                        patch: int = 16) -> torch.Tensor:
    """Mean absolute difference of the tiles' log amplitude spectra (module docstring) between
    frames ``fake`` and ``real`` (B, C, H, W), each tile weighted by the share of ``where``
    (B, 1, H, W), 1 where it counts (None: everywhere) in it; 0 when nothing counts. Pure and
    differentiable in ``fake``."""
    if fake.shape != real.shape or fake.ndim != 4:
        raise ValueError(f"fake and real: expected two (B, C, H, W) tensors of one shape, got "
                         f"{tuple(fake.shape)} and {tuple(real.shape)}")
    B, _, H, W = fake.shape
    if patch < 2 or patch > min(H, W):
        raise ValueError(f"patch: must be in [2, {min(H, W)}] for {H}x{W} frames, got {patch}")
    if where is None:
        where = torch.ones(B, 1, H, W, dtype=fake.dtype, device=fake.device)
    if where.shape != (B, 1, H, W):
        raise ValueError(f"where: expected shape {(B, 1, H, W)}, got {tuple(where.shape)}")
    diff = (patch_spectra(fake, patch) - patch_spectra(real, patch)).abs().mean((1, -2, -1))   # (B, n)
    share = _tiles(where.float(), patch).mean((1, -2, -1))                                      # (B, n)
    return (diff * share).sum() / share.sum().clamp(min=1e-6)

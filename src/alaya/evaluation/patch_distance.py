"""How far two frame sets' local structure lies apart: the sliced Wasserstein distance between
their Laplacian-pyramid patch distributions (Karras et al. 2018, "Progressive growing of GANs",
whose SWD this follows; Rabin et al. 2011 for the sliced distance).

Per pyramid level, 7x7 RGB patches of the band-pass image are drawn at random places of every
frame; each of the 147 descriptor dimensions is scaled by the real set's spread, both sets are
projected onto random unit directions, and the sorted projections are compared (the
1-D Wasserstein distance, exact for equal sample counts). The result is the mean over directions
and levels. It is 0 for the same distribution, and grows for frames whose patches are not the
real ones' kind: a blur (band-pass patches near zero), streaks (one direction only), a patchwork
of squares, grain. Unlike a sharpness ratio it cannot be passed by detail in the wrong form, and
unlike PSNR it does not ask new content to be the game's exact content, only content of its kind.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

PATCH = 7             # patch side (pixels of the level)
LEVELS = 3            # band-pass levels: full, half and quarter size
PER_FRAME = 64        # patches drawn per frame and level
PROJECTIONS = 256     # random directions of the sliced distance


def laplacian_bands(x: torch.Tensor, levels: int = LEVELS) -> list[torch.Tensor]:
    """The band-pass levels (finest first) of frames (T, 3, H, W) in [0, 1]: each level minus its
    2x-downsampled-and-upsampled copy (a 2x2 average, bilinear back), the coarse image halved;
    fewer than ``levels`` where a level would be under two patches across."""
    if x.ndim != 4 or x.shape[1] != 3:
        raise ValueError(f"expected (T, 3, H, W) frames, got {tuple(x.shape)}")
    if min(x.shape[-2:]) < 2 * PATCH:
        raise ValueError(f"frames of {tuple(x.shape[-2:])} are too small for {PATCH}px patches (at least {2 * PATCH}px)")
    bands, level = [], x.float()
    for _ in range(levels):
        if min(level.shape[-2:]) < 2 * PATCH:
            break
        coarse = F.avg_pool2d(level, 2)
        bands.append(level - F.interpolate(coarse, size=level.shape[-2:], mode="bilinear", align_corners=False))
        level = coarse
    return bands


def patch_descriptors(band: torch.Tensor, per_frame: int, generator: torch.Generator) -> torch.Tensor:
    """(T * per_frame, 3 * PATCH²) patches of a band (T, 3, h, w) at random places of each frame."""
    T, C, h, w = band.shape
    y = torch.randint(h - PATCH + 1, (T, per_frame, 1, 1), generator=generator) + torch.arange(PATCH).view(1, 1, PATCH, 1)
    x = torch.randint(w - PATCH + 1, (T, per_frame, 1, 1), generator=generator) + torch.arange(PATCH).view(1, 1, 1, PATCH)
    t = torch.arange(T).view(T, 1, 1, 1)
    patches = band.permute(0, 2, 3, 1)[t, y, x]              # (T, per_frame, PATCH, PATCH, C)
    return patches.permute(0, 1, 4, 2, 3).reshape(T * per_frame, C * PATCH * PATCH)


def sliced_wasserstein(a: torch.Tensor, b: torch.Tensor, projections: int, generator: torch.Generator) -> float:
    """The sliced 1-Wasserstein distance between sample sets (N, D) and (M, D) (the larger one
    subsampled to the smaller's size), each dimension first scaled by ``b``'s standard deviation."""
    n = min(len(a), len(b))
    if n < 2:
        raise ValueError(f"sliced_wasserstein needs at least 2 samples per set, got {len(a)} and {len(b)}")
    a = a[torch.randperm(len(a), generator=generator)[:n]]
    b = b[torch.randperm(len(b), generator=generator)[:n]]
    scale = b.std(0).clamp(min=1e-4)
    directions = torch.randn(a.shape[1], projections, generator=generator, dtype=a.dtype)
    directions = directions / directions.norm(dim=0, keepdim=True)
    pa, pb = (a / scale) @ directions, (b / scale) @ directions
    return float((pa.sort(0).values - pb.sort(0).values).abs().mean())


def structure_distance(gen: torch.Tensor, real: torch.Tensor, seed: int = 0, per_frame: int = PER_FRAME,
                       projections: int = PROJECTIONS) -> float:
    """The module's distance between generated and real frames (T, 3, H, W) in [0, 1] (the two
    sets may differ in length): the sliced Wasserstein distance of their band-pass patches,
    averaged over the pyramid's levels. Deterministic for a seed."""
    if gen.shape[1:] != real.shape[1:]:
        raise ValueError(f"generated {tuple(gen.shape)} and real {tuple(real.shape)} frames differ in size")
    g = torch.Generator().manual_seed(seed)
    out = [sliced_wasserstein(patch_descriptors(bg, per_frame, g), patch_descriptors(br, per_frame, g), projections, g)
           for bg, br in zip(laplacian_bands(gen), laplacian_bands(real))]
    return float(np.mean(out))

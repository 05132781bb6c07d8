"""Walls' materials: recorded close-up tiles of a wall's whole look (``material_pattern``), made
to repeat in phase (``periodic_in_phase``), and looked up over a wall without a visible repeat
(``scattered_tile``).

A tile spans 0.64 m (32 texels of 2 cm). Repeated as it is, a material whose look has no period
of its own (marble's streaks, a plaster's blotches) shows the tile's largest features, a light and
a dark patch, as a grid of soft bumps every 0.64 m, which no game wall shows. ``repeating_axes``
tells which of a material's axes repeat (brick courses repeat up the wall and their joints along
it; marble's streaks along neither), and ``scattered_tile`` lays the tile over 4 x 4 cells, each
moved by a random whole number of texels along each axis that does not repeat, neighbouring cells
cross-faded (smoothstep weights about the cells' centres, the blend divided by its expected
spread given how alike the moved copies are, so that the pattern keeps its strength where they
meet). The cells wrap, so the 2.56 m result repeats without a seam, at four times the distance,
and is looked up as cheaply as the tile. Courses and a checker keep their order; a streaked
material no longer shows a grid.
"""

from __future__ import annotations

import numpy as np
import torch

MAX_PATTERN = 0.9                        # |material pattern| clip: a factor between 0.1 and 1.9
PERIOD_RISE = 0.3                        # an axis repeats where its autocorrelation rises this much to a peak,
SELF_MATCH = 0.9                         # ... or reaches this (a pattern the same all along an axis)
SCATTER_CELLS = 4                        # a scattered material repeats every 4 x 4 tiles (2.56 m)


def periodic_in_phase(tiles: torch.Tensor) -> torch.Tensor:
    """(N, T, T) patterns made to repeat without seams and without fading: along each axis in turn,
    a tile is cross-faded with itself moved by the shift (a quarter to half its size; a circular
    shift by s matches as well as one by T - s) at which the moved copy best matches it, so that
    courses or a checker whose period does not fit the tile are blended in phase and not cancelled
    (the moved copy meets itself continuously at the borders; the weight rises from 0 there to 1
    where the copy's own seam lies). The blend is divided by its expected spread,
    ``sqrt(w^2 + (1-w)^2 + 2 w (1-w) rho)`` with ``rho`` the match (at least 0), so a pattern keeps
    its strength whether the two copies agree or not."""
    n = tiles.shape[-1]
    shifts = torch.arange(n // 4, n // 2 + 1)
    x = torch.arange(n, dtype=tiles.dtype)
    for dim in (-1, -2):
        moved = torch.stack([tiles.roll(int(s), dim) for s in shifts])                 # (S, N, T, T)
        a = tiles - tiles.mean((-2, -1), keepdim=True)
        b = moved - moved.mean((-2, -1), keepdim=True)
        rho = (a * b).mean((-2, -1)) / (a.pow(2).mean((-2, -1)) * b.pow(2).mean((-2, -1))).sqrt().clamp_min(1e-12)
        best = rho.argmax(0)                                                             # (N,)
        shift, rho = shifts[best].to(tiles.dtype)[:, None], rho.gather(0, best[None])[0].clamp_min(0)[:, None]
        w = torch.where(x <= shift, x / shift, (n - x) / (n - shift))                    # (N, T)
        spread = (w ** 2 + (1 - w) ** 2 + 2 * w * (1 - w) * rho).sqrt()
        w, spread = (w[:, None, :], spread[:, None, :]) if dim == -1 else (w[:, :, None], spread[:, :, None])
        copy = moved[best, torch.arange(len(tiles))]
        tiles = (w * tiles + (1 - w) * copy) / spread
    return tiles


def relative_luma(luma: torch.Tensor) -> torch.Tensor:
    """(N, T, T) float64: luminance tiles over each tile's mean, less 1."""
    luma = luma.double()
    return luma / luma.mean((1, 2), keepdim=True).clamp_min(1e-3) - 1


def material_pattern(luma: torch.Tensor) -> torch.Tensor:
    """(N, T, T) luminance tiles' pattern: ``relative_luma`` made periodic in phase
    (``periodic_in_phase``) and clipped."""
    return periodic_in_phase(relative_luma(luma)).clamp(-MAX_PATTERN, MAX_PATTERN).float()


def repeating_axes(patterns: torch.Tensor) -> np.ndarray:
    """(N, 2) bool, [along, up]: whether each pattern (N, T, T) (row 0 lowest) repeats along the wall
    and up it, its circular autocorrelation along the axis rising by at least ``PERIOD_RISE`` from
    its lowest (at shifts 1 .. the peak) to its peak at a shift of T/4 to T/2 (a smooth streak's
    falls and stays low; courses' rise again at their period), or the peak at least ``SELF_MATCH``
    (a pattern that is the same all along the axis, as level courses are along the wall)."""
    t = patterns.double()
    t = t - t.mean((-2, -1), keepdim=True)
    power = t.pow(2).mean((-2, -1)).clamp_min(1e-12)
    n = t.shape[-1]
    out = np.zeros((len(t), 2), bool)
    for k, dim in enumerate((-1, -2)):
        rho = torch.stack([(t * t.roll(s, dim)).mean((-2, -1)) / power for s in range(1, n // 2 + 1)], 1)   # (N, n/2)
        window = rho[:, n // 4 - 1:]
        peak, at = window.max(1)
        lowest = torch.stack([rho[i, :n // 4 + int(a)].min() for i, a in enumerate(at)])
        out[:, k] = ((peak - lowest >= PERIOD_RISE) | (peak >= SELF_MATCH)).numpy()
    return out


def bilinear_tiled(tiles: np.ndarray, level: np.ndarray, fu: np.ndarray, fz: np.ndarray) -> np.ndarray:
    """(n,) ``tiles`` (L, S, S) (row 0 lowest, repeating), each point's ``level`` (n,), at texel
    coordinates ``fu``, ``fz`` (n,) (texel (i, j) spans [j, j + 1) x [i, i + 1)), interpolated
    bilinearly between texel centres."""
    S = tiles.shape[-1]
    fu, fz = fu - 0.5, fz - 0.5
    u0, z0 = np.floor(fu), np.floor(fz)
    wu, wz = fu - u0, fz - z0
    iu, iz = u0.astype(np.int64) % S, z0.astype(np.int64) % S
    ju, jz = (iu + 1) % S, (iz + 1) % S
    return ((1 - wz) * ((1 - wu) * tiles[level, iz, iu] + wu * tiles[level, iz, ju])
            + wz * ((1 - wu) * tiles[level, jz, iu] + wu * tiles[level, jz, ju]))


def cell_offsets(key: int, cu: np.ndarray, cz: np.ndarray, T: int) -> tuple[np.ndarray, np.ndarray]:
    """Whole-texel offsets (0 .. T - 1) along and up of the cells ``cu``, ``cz`` (int64 arrays), a
    hash of the cell and ``key``."""
    h = (cu * 73856093) ^ (cz * 19349663) ^ np.int64(key * 83492791 + 1)
    h = (h ^ (h >> 13)) * 1274126177
    h = h ^ (h >> 16)
    return h % T, (h >> 8) % T


def smoothstep(x: np.ndarray) -> np.ndarray:
    return x * x * (3 - 2 * x)


def scattered_tile(tile: np.ndarray, repeats: np.ndarray, key: int, cells: int = SCATTER_CELLS) -> np.ndarray:
    """(cells * T, cells * T) the zero-mean pattern ``tile`` (T, T) (row 0 lowest) laid over
    ``cells`` x ``cells`` cells of T x T texels, each moved by ``cell_offsets`` along the axes
    that do not repeat (``repeats`` (2,) bool, [along, up]), neighbouring cells cross-faded
    (smoothstep weights about the cells' centres; the blend divided by its expected spread,
    ``sqrt(sum_ij w_i w_j rho(o_i - o_j))`` with ``rho`` the tile's circular autocorrelation at
    the cells' offsets' difference, so that it keeps its strength whether the copies agree or not);
    the cells wrap, so the result repeats without a seam. ``tile`` itself where it repeats both ways
    (or is flat)."""
    power = float((tile * tile).mean())
    if repeats.all() or power <= 0:
        return tile
    T = tile.shape[-1]
    fz, fu = np.meshgrid(np.arange(cells * T) + 0.5, np.arange(cells * T) + 0.5, indexing="ij")
    cu, cz = fu / T - 0.5, fz / T - 0.5                  # cell centres at whole numbers
    i0, j0 = np.floor(cu).astype(np.int64), np.floor(cz).astype(np.int64)
    a, b = smoothstep(cu - i0), smoothstep(cz - j0)
    match = np.fft.ifft2(np.abs(np.fft.fft2(tile)) ** 2).real / tile.size / power     # (T, T) the tile against itself moved
    zero = np.zeros(fu.shape, np.int64)
    total, cells_at = np.zeros_like(fu), []
    for di in (0, 1):
        for dj in (0, 1):
            w = (a if di else 1 - a) * (b if dj else 1 - b)
            ou, oz = cell_offsets(key, (i0 + di) % cells, (j0 + dj) % cells, T)
            ou, oz = (zero if repeats[0] else ou), (zero if repeats[1] else oz)
            total += w * bilinear_tiled(tile[None], zero, fu + ou, fz + oz)
            cells_at.append((w, ou, oz))
    spread = sum(wi * wj * match[(zi - zj) % T, (ui - uj) % T] for wi, ui, zi in cells_at for wj, uj, zj in cells_at)
    return (total / np.sqrt(np.maximum(spread, 1e-6))).astype(tile.dtype)

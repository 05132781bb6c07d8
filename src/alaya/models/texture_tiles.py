"""Textures from scattered samples of a surface: the period a repeating texture has along an
axis (``find_period``), texels no sample fell in filled from their neighbours (``fill_empty``),
and what distance adds to a colour as a camera sees it (``DistanceHaze``, ``learn_haze``). Used
by the region's floor and walls (``region_floor``, ``region_walls``).

``find_period`` bins the samples into a fine grid (a cell no sample fell in, between samples
spaced wider than a cell, takes the nearest sample's value: left empty, such cells form a
pattern of their own, and the texture moved by a part of its period would meet itself only where
that pattern lines up) and compares it with itself moved along by a trial period (and by two to
four of it, where the samples reach: a small error in the period then shows): a texture of that
period (or a multiple of it) matches itself after differing at shorter shifts. The shortest such
dip is taken, then refined: the period within 5% of it that folds the samples tightest (phase
dispersion: every sample of every period counts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PERIODS = (0.2, 3.0, 0.01)   # the periods searched, metres: from, to, step
LUMA = np.array([0.299, 0.587, 0.114], np.float32)   # luminance of rgb
PERIODIC = 0.5               # a period whose mismatch (``_mismatch``) is below this
RISE = 0.3                   # ... after it differed by this much more at a shorter shift (a smooth grain
                             # matches itself at short shifts, but never comes back after differing)
NARROW = 0.1                 # a dip's mismatch at this share of the period either side ...
WALLS = 0.25                 # ... is this much higher (a grain's broad, shallow dips are not periods)
TREND = 2.0                  # metres: the box whose mean is taken out of the grid (a drift of colour with distance)
GRID = 0.02                  # metres: the texels along the searched axis
MIN_PAIRS = 200              # texels that must meet a moved one for a mismatch to count
SHIFTS = 4                   # the texture is compared with itself moved by 1 ... SHIFTS periods
HAZE_BAND = 1.0              # metres: the distance bands of a haze
HAZE_SAMPLES = 40            # samples a band needs (fewer: interpolated from its neighbours)
HAZE_BANDS = 40              # bands: 0 to 40 m (the memory's reach); farther takes the last


def _spacing(along: np.ndarray, across: np.ndarray, texel: float) -> float:
    """Metres between neighbouring samples along the axis (the median gap between the distinct
    positions of the samples in each ``texel``-metre band across it; 0 with none)."""
    band = np.floor((across - across.min()) / texel).astype(np.int64)
    order = np.lexsort((along, band))
    gaps = np.diff(along[order])[np.diff(band[order]) == 0]
    gaps = gaps[gaps > 1e-6]
    return float(np.median(gaps)) if gaps.size else 0.0


def _nearest_fill(grid: np.ndarray, seen: np.ndarray, reach: int) -> tuple[np.ndarray, np.ndarray]:
    """(grid, seen) with each unseen cell given its row's nearest seen cell's value, where that
    is at most ``reach`` cells away."""
    if reach < 1 or not seen.any():
        return grid, seen
    cols = grid.shape[1]
    flat = np.nonzero(seen.ravel())[0]                      # row-major: a row's seen cells in order
    cell = np.arange(grid.size)
    right = np.minimum(np.searchsorted(flat, cell), len(flat) - 1)
    left = np.maximum(right - 1, 0)
    gap = lambda j: np.where(flat[j] // cols == cell // cols, np.abs(flat[j] - cell), cols)   # noqa: E731
    to_left, to_right = gap(left), gap(right)
    near = np.where(to_left <= to_right, flat[left], flat[right])
    reached = np.minimum(to_left, to_right) <= reach
    filled = np.where(reached, grid.ravel()[near], 0.0).reshape(grid.shape)
    return filled, reached.reshape(grid.shape)


def _grid(along: np.ndarray, across: np.ndarray, lum: np.ndarray, texel: float) -> tuple[np.ndarray, np.ndarray]:
    """``lum`` binned into (across, along) texels of ``texel`` x ``GRID`` metres, the cells
    between samples spaced wider filled (``_nearest_fill``): (means less their ``TREND``-metre
    neighbourhood's, seen or filled)."""
    i = np.floor((along - along.min()) / GRID).astype(np.int64)
    j = np.floor((across - across.min()) / texel).astype(np.int64)
    shape = (int(j.max()) + 1, int(i.max()) + 1)
    flat = j * shape[1] + i
    count = np.bincount(flat, minlength=shape[0] * shape[1]).reshape(shape)
    total = np.bincount(flat, lum, minlength=shape[0] * shape[1]).reshape(shape)
    grid, seen = total / np.maximum(count, 1), count > 0
    grid, seen = _nearest_fill(grid, seen, int(round(0.5 * _spacing(along, across, texel) / GRID)))
    local = _box(grid * seen, (TREND / texel, TREND / GRID)) / np.maximum(_box(seen.astype(float), (TREND / texel, TREND / GRID)), 1e-9)
    return grid - local, seen                         # what changes over metres (fog, light) taken out


def _box(a: np.ndarray, size: tuple[float, float]) -> np.ndarray:
    """Sums of ``a`` (rows, cols) over a box of ``size`` cells (rows, cols) centred on each cell."""
    for axis, n in enumerate(size):
        h = max(1, int(n) // 2)
        c = np.cumsum(np.pad(a, [(h + 1, h) if k == axis else (0, 0) for k in range(2)]), axis)
        a = np.take(c, np.arange(2 * h + 1, c.shape[axis]), axis) - np.take(c, np.arange(0, c.shape[axis] - 2 * h - 1), axis)
    return a


def _mismatch(grid: np.ndarray, seen: np.ndarray, period: float, variance: float) -> float:
    """Mean squared difference between the texture and itself moved by 1 ... ``SHIFTS`` periods
    along, over twice its variance: ~0 for a texture of that period, ~1 for one unrelated to its
    shift, ~2 for one that turns over (a checker moved by half its period); inf when no texel
    meets a moved one."""
    sse, n = 0.0, 0
    for k in range(1, SHIFTS + 1):
        shift = int(round(k * period / GRID))
        if shift >= grid.shape[1]:
            break
        both = seen[:, shift:] & seen[:, :-shift]
        sse += float(((grid[:, shift:] - grid[:, :-shift])[both] ** 2).sum())
        n += int(both.sum())
    return sse / (2 * variance * n) if n >= MIN_PAIRS else np.inf


def find_period(along: np.ndarray, across: np.ndarray, lum: np.ndarray, texel: float) -> float | None:
    """The texture's period in metres along ``along`` (points' positions, with ``across`` the
    other axis, metres, and ``lum`` their luminance; binned ``texel`` metres across): the
    shortest in ``PERIODS`` that is a dip of ``_mismatch`` (a local minimum, at most ``PERIODIC``,
    after a shorter shift differed by ``RISE`` more, and ``WALLS`` below it ``NARROW`` of the
    period either side), refined by ``_dispersion`` to 0.002 m; None when there is none or the
    points span less than two periods."""
    span = np.percentile(along, 98) - np.percentile(along, 2)
    periods = np.arange(PERIODS[0], min(PERIODS[1], span / 2) + 1e-9, PERIODS[2])
    if len(periods) < 3 or not lum.var() > 0:
        return None
    grid, seen = _grid(along, across, lum, texel)
    variance = float(grid[seen].var())
    if not variance > 1e-10:                       # one colour (up to rounding): nothing repeats
        return None
    d = np.array([_mismatch(grid, seen, p, variance) for p in periods])
    rose = np.maximum.accumulate(np.where(np.isfinite(d), d, 0))          # the most it differed at a shorter shift
    lowest = (d <= np.roll(d, 1)) & (d <= np.roll(d, -1))                  # a local minimum ...
    dips = (d <= PERIODIC) & (rose >= d + RISE) & lowest                   # ... deep ...
    for k in np.nonzero(dips)[0]:                                          # ... and narrow
        around = min(_mismatch(grid, seen, periods[k] * (1 - NARROW), variance),
                     _mismatch(grid, seen, periods[k] * (1 + NARROW), variance))
        dips[k] = around >= d[k] + WALLS
    if not dips.any():
        return None
    coarse = float(periods[np.nonzero(dips)[0][0]])                       # the first: its multiples dip later
    fine = np.arange(coarse * (1 - NARROW / 2), coarse * (1 + NARROW / 2), PERIODS[2] / 5)   # a tile's phase holds for metres
    return float(fine[np.argmin([_dispersion(along, across, lum, p, texel) for p in fine])])


def _dispersion(along: np.ndarray, across: np.ndarray, lum: np.ndarray, period: float, texel: float) -> float:
    """Within-bin variance of ``lum``: the points folded modulo ``period`` and binned by (phase,
    ``GRID`` metres; ``across``, ``texel`` metres). Near a period, the smallest at the exact one:
    every point of every period counts, so a small error smears the folded texture."""
    n = max(1, int(round(period / GRID)))
    bins = (np.floor((across - across.min()) / texel).astype(np.int64) * n
            + np.floor(np.mod(along, period) / (period / n)).astype(np.int64) % n)
    count = np.bincount(bins)
    total = np.bincount(bins, lum)
    return float((np.bincount(bins, lum * lum) - total ** 2 / np.maximum(count, 1)).sum())


def fill_empty(texels: np.ndarray) -> np.ndarray:
    """NaN texels (rows, cols, 3) take their known neighbours' mean, pass by pass; any left, the median."""
    t = texels.copy()
    for _ in range(max(t.shape[:2])):
        missing = np.isnan(t[..., 0])
        if not missing.any():
            break
        p = np.pad(t, ((1, 1), (1, 1), (0, 0)), constant_values=np.nan)
        around = np.stack([p[:-2, 1:-1], p[2:, 1:-1], p[1:-1, :-2], p[1:-1, 2:]])
        known = ~np.isnan(around[..., :1])
        mean = np.where(known, around, 0).sum(0) / np.maximum(known.sum(0), 1)
        t = np.where(missing[..., None] & known.any(0), mean, t)
    return np.where(np.isnan(t), np.nanmedian(t.reshape(-1, 3), 0), t).astype(np.float32)


@dataclass(frozen=True)
class DistanceHaze:
    """What distance adds to a surface's colour as a camera sees it: the game's fog (a share of
    its fog colour, growing with distance) and, on a floor, its sheen at a grazing angle.
    ``offsets`` (HAZE_BANDS, 3): per ``HAZE_BAND``-metre band of distance, the mean colour seen
    there less the mean seen near (the samples a texture is made from)."""
    offsets: np.ndarray

    def at(self, distance) -> np.ndarray:
        """(n, 3) offsets at ``distance`` (n,) metres from the camera (linear between the bands'
        centres; nearer than the first centre its offset, farther than the last the last's)."""
        d = np.nan_to_num(np.asarray(distance, np.float64), nan=0.0, posinf=HAZE_BANDS * HAZE_BAND)
        centres = (np.arange(HAZE_BANDS) + 0.5) * HAZE_BAND
        return np.stack([np.interp(d, centres, self.offsets[:, k]) for k in range(3)], 1)

    def clear(self, colours: np.ndarray, distance) -> np.ndarray:
        """Colours (n, 3) in [0, 1] seen ``distance`` (n,) metres away, as seen near at hand."""
        return np.clip(colours - self.at(distance), 0, 1).astype(np.float32)

    def apply(self, colours: np.ndarray, distance) -> np.ndarray:
        """Colours (n, 3) in [0, 1] near at hand, as seen ``distance`` (n,) metres away."""
        return np.clip(colours + self.at(distance), 0, 1).astype(np.float32)


def learn_haze(distance: np.ndarray, colours: np.ndarray, near: np.ndarray) -> DistanceHaze | None:
    """The haze of one surface's samples: their distances (N,) metres from the camera that saw
    them, colours (N, 3) in [0, 1], and ``near`` (N,) bool, the samples its texture is made from
    (the reference: offset 0); bands with fewer than ``HAZE_SAMPLES`` take their neighbours'
    (linear, the ends held). None when fewer than ``HAZE_SAMPLES`` samples are near or no band
    has enough."""
    distance, colours, near = np.asarray(distance, np.float64), np.asarray(colours, np.float64), np.asarray(near, bool)
    if near.sum() < HAZE_SAMPLES:
        return None
    band = np.minimum((distance / HAZE_BAND).astype(np.int64), HAZE_BANDS - 1)
    count = np.bincount(band, minlength=HAZE_BANDS)
    known = np.nonzero(count >= HAZE_SAMPLES)[0]
    if not len(known):
        return None
    mean = np.stack([np.bincount(band, colours[:, k], minlength=HAZE_BANDS) for k in range(3)], 1) / np.maximum(count, 1)[:, None]
    offsets = mean[known] - colours[near].mean(0)
    every = np.arange(HAZE_BANDS)
    return DistanceHaze(np.stack([np.interp(every, known, offsets[:, k]) for k in range(3)], 1).astype(np.float32))

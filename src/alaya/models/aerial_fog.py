"""What a game's distance fog does to a colour, learnt from one frame: ``AerialFog`` blends a
surface's colour towards the fog's with distance, ``mix(colour, fog, 1 - exp(-density d))``,
in linear light, as a game's fog (and the air's) does; ``learn_fog`` finds the density from the
floor of a start frame, given the fog's colour (the sky just above the horizon, where the fog
meets it); ``learn_fog_from_pairs`` learns density and colour together from surface points each
seen at two distances (a recording's frames, depth and cameras: ``alaya.train.fog_pairs``), as a
style's fog (``WallDetail.fog_for``).

Why not an offset per distance (``texture_tiles.DistanceHaze``): fog moves a colour towards
the fog's by a share of the distance between them, so what the floor gains at a distance is
what a surface of the floor's colour gains there, and no other. Taken off a red brick wall
beyond a green lawn, the lawn's haze turned the wall olive, and taken off a dark wall beyond
bright sand it left the wall too light (docs/world_journal.md, thirty-third section).

::

    fog = learn_fog(distance, colours, horizon)     # floor samples (n,), (n, 3) in [0, 1]; horizon (3,)
    near = fog.clear(colours, distance)             # as seen near at hand
    far = fog.apply(near, distance)                 # as seen that far again (clear's inverse)
    fog, report = learn_fog_from_pairs(first, second, first_distance, second_distance)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BAND = 1.0                    # metres: the floor's distance bands
BAND_SAMPLES = 20             # samples a band needs to count
MIN_BANDS = 3                 # bands a density needs
MAX_WEIGHT = 200              # a band counts at most this many samples (the near ones would drown the far)
DENSITIES = np.arange(0.0, 0.1501, 0.0025)   # per metre: the densities tried
MAX_FOG = 0.9                 # clear never divides by less than 1 - this
MIN_PAIRS = 100               # points seen twice a fog needs (``learn_fog_from_pairs``) ...
KEPT_PAIRS = 0.8              # ... and the share of them its second fit keeps (a texture's edge, a thing moved: not fog)


def to_linear(srgb: np.ndarray) -> np.ndarray:
    """sRGB in [0, 1] to linear light; above 1 the curve goes on (a fog brighter than white
    before the game's tone curve: ``learn_fog_from_pairs``)."""
    c = np.maximum(np.asarray(srgb, np.float64), 0.0)
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def to_srgb(linear: np.ndarray, clip: bool = True) -> np.ndarray:
    """Linear light to sRGB in [0, 1] (clipped; with ``clip`` False, above 1 the curve goes on)."""
    c = np.clip(np.asarray(linear, np.float64), 0.0, 1.0 if clip else None)
    return np.where(c <= 0.0031308, c * 12.92, 1.055 * np.maximum(c, 0.0031308) ** (1 / 2.4) - 0.055)


@dataclass
class AerialFog:
    """Fog of ``density`` per metre and ``colour`` (3,) sRGB, in [0, 1] or, learnt from
    pairs, above (the game's fog is lit and blended before its tone curve)."""
    density: float
    colour: np.ndarray

    def share(self, distance) -> np.ndarray:
        """(n, 1) the fog's share of what is seen ``distance`` (n,) metres away."""
        d = np.nan_to_num(np.asarray(distance, np.float64), nan=0.0, posinf=1e3)
        return (1.0 - np.exp(-self.density * np.maximum(d, 0.0)))[:, None]

    def clear(self, colours: np.ndarray, distance) -> np.ndarray:
        """Colours (n, 3) in [0, 1] seen ``distance`` (n,) metres away, as seen near at hand."""
        f = np.minimum(self.share(distance), MAX_FOG)
        return to_srgb((to_linear(colours) - to_linear(self.colour) * f) / (1.0 - f)).astype(np.float32)

    def apply(self, colours: np.ndarray, distance) -> np.ndarray:
        """Colours (n, 3) in [0, 1] near at hand, as seen ``distance`` (n,) metres away."""
        f = self.share(distance)
        return to_srgb(to_linear(colours) * (1.0 - f) + to_linear(self.colour) * f).astype(np.float32)


def learn_fog(distance: np.ndarray, colours: np.ndarray, colour) -> AerialFog | None:
    """The fog of the fog colour ``colour`` (3,) sRGB that best explains a floor's samples, their
    distances (n,) metres and colours (n, 3) in [0, 1]: per ``BAND`` of distance the mean colour
    in linear light, fitted as one floor colour fogged by ``1 - exp(-density d)`` (weighted
    least squares; the floor's colour solved for each density tried). None when fewer than
    ``MIN_BANDS`` bands have ``BAND_SAMPLES`` samples."""
    d = np.asarray(distance, np.float64)
    c = to_linear(colours)
    if d.ndim != 1 or c.shape != (len(d), 3):
        raise ValueError(f"distance, colours: expected (n,) and (n, 3), got {d.shape} and {c.shape}")
    colour = np.asarray(colour, np.float64).reshape(3)
    g = to_linear(colour)
    band = np.floor(np.nan_to_num(d, nan=-1.0, posinf=-1.0) / BAND).astype(np.int64)
    ok = band >= 0
    band, c = band[ok], c[ok]
    count = np.bincount(band, minlength=1)
    bands = np.nonzero(count >= BAND_SAMPLES)[0]
    if len(bands) < MIN_BANDS:
        return None
    mean = np.stack([np.bincount(band, c[:, k]) for k in range(3)], 1)[bands] / count[bands, None]
    centre, weight = (bands + 0.5) * BAND, np.minimum(count[bands], MAX_WEIGHT).astype(np.float64)
    best, best_err = 0.0, np.inf
    for density in DENSITIES:
        keep = np.exp(-density * centre)                      # 1 - the fog's share
        target = mean - g * (1.0 - keep)[:, None]             # = floor * keep
        floor = (weight * keep) @ target / (weight * keep * keep).sum()
        err = float((weight[:, None] * (target - keep[:, None] * floor) ** 2).sum())
        if err < best_err:
            best, best_err = float(density), err
    return AerialFog(best, colour.copy())


def learn_fog_from_pairs(first, second, first_distance, second_distance) -> tuple[AerialFog, dict]:
    """The fog that best explains surface points seen twice: their colours ``first``, ``second``
    (n, 3) sRGB in [0, 1] at ``first_distance``, ``second_distance`` (n,) metres. A point's
    linear colour seen at d is ``s e^(-k d) + g (1 - e^(-k d))``, so ``second = e first + g (1 -
    e)`` with ``e = e^(-k (second_distance - first_distance))``, whatever the surface's own
    colour ``s``: per density ``k`` in ``DENSITIES`` the fog's linear colour ``g`` is solved by
    least squares, and the density kept is the one whose predicted ``second`` is nearest the
    seen, in sRGB; then fitted again on the ``KEPT_PAIRS`` it explains best (a pair across a
    texture's edge, or of a thing that moved, is no fog's doing). The report: pairs, those kept,
    and their mean squared error with the fog and without (``second`` taken as ``first``)."""
    a, b = np.asarray(first, np.float64), np.asarray(second, np.float64)
    da, db = np.asarray(first_distance, np.float64), np.asarray(second_distance, np.float64)
    if a.ndim != 2 or a.shape[1:] != (3,) or b.shape != a.shape or da.shape != (len(a),) or db.shape != da.shape:
        raise ValueError(f"first, second, first_distance, second_distance: expected (n, 3), (n, 3), (n,), (n,), got "
                         f"{a.shape}, {b.shape}, {da.shape}, {db.shape}")
    ok = np.isfinite(a).all(1) & np.isfinite(b).all(1) & np.isfinite(da) & np.isfinite(db) & (da >= 0) & (db >= 0)
    a, b, step = a[ok], b[ok], (db - da)[ok]
    if len(a) < MIN_PAIRS or np.abs(step).max() <= 0:
        raise ValueError(f"pairs: {len(a)} finite pairs at different distances, {MIN_PAIRS} needed")
    la, lb = to_linear(a), to_linear(b)
    keep = np.ones(len(a), bool)
    for _ in range(2):                    # fitted, then again without the pairs it explains worst
        best = None
        for density in DENSITIES[1:]:
            e = np.exp(-density * step)[:, None]
            w = 1.0 - e
            colour = (w * (lb - e * la))[keep].sum(0) / max(float((w * w)[keep].sum()), 1e-12)
            miss = ((to_srgb(e * la + w * colour) - b) ** 2).mean(1)
            if best is None or miss[keep].mean() < best[0]:
                best = float(miss[keep].mean()), float(density), colour, miss
        err, density, colour, miss = best
        used, keep = keep, miss <= np.quantile(miss, KEPT_PAIRS)
    report = {"pairs": int(len(a)), "kept": int(used.sum()), "mse": err,
              "mse_no_fog": float(((b - a)[used] ** 2).mean())}
    return AerialFog(density, to_srgb(colour, clip=False)), report

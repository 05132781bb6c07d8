"""What a game's distance fog does to a colour, learnt from one frame: ``AerialFog`` blends a
surface's colour towards the fog's with distance, ``mix(colour, fog, 1 - exp(-density d))``,
in linear light, as a game's fog (and the air's) does; ``learn_fog`` finds the density from the
floor of a start frame, given the fog's colour (the sky just above the horizon, where the fog
meets it).

Why not an offset per distance (``texture_tiles.DistanceHaze``): fog moves a colour towards
the fog's by a share of the distance between them, so what the floor gains at a distance is
what a surface of the floor's colour gains there, and no other. Taken off a red brick wall
beyond a green lawn, the lawn's haze turned the wall olive, and taken off a dark wall beyond
bright sand it left the wall too light (docs/world_journal.md, thirty-third section).

::

    fog = learn_fog(distance, colours, horizon)     # floor samples (n,), (n, 3) in [0, 1]; horizon (3,)
    near = fog.clear(colours, distance)             # as seen near at hand
    far = fog.apply(near, distance)                 # as seen that far again (clear's inverse)
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


def to_linear(srgb: np.ndarray) -> np.ndarray:
    """sRGB in [0, 1] to linear light."""
    c = np.clip(np.asarray(srgb, np.float64), 0.0, 1.0)
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def to_srgb(linear: np.ndarray) -> np.ndarray:
    """Linear light to sRGB in [0, 1] (clipped)."""
    c = np.clip(np.asarray(linear, np.float64), 0.0, 1.0)
    return np.where(c <= 0.0031308, c * 12.92, 1.055 * np.maximum(c, 0.0031308) ** (1 / 2.4) - 0.055)


@dataclass
class AerialFog:
    """Fog of ``density`` per metre and ``colour`` (3,) sRGB in [0, 1]."""
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

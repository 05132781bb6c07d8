"""The walkable region's floor, tiled with the texture the start frame shows: what a walk into
ground the memory never saw shows.

::

    floor = RegionFloor(region, margin=0.6)               # region: WalkableRegion
    floor.learn(memory_xyz, memory_rgb, eye)              # the start frame's points and camera centre, region world
    rgb, coverage, depth = floor.draw(rgb, coverage, depth, K, world_to_camera)   # over a memory render
    depth = floor.depth_at(K, world_to_camera, H, W)      # (H, W) where a view sees it, 0 elsewhere

A game's arena floor is one material, and its texture repeats (a tiled checker) or has the same
grain everywhere (noise). A session's memory holds the floor only where its frames showed it; a
walk or a turn into ground no frame showed leaves a hole, and the one-step network fills it with
blotches of the scene's colours, which then go into the memory.

``learn`` takes the start frame's floor points (below ``eye`` by more than ``eye_height`` - 0.3
m, within ``reach`` metres of it: near enough that a pixel spans a few centimetres; and near
their cell's lowest points: not the tops of what lies on the floor) and looks for the texture's
period along each world axis (``texture_tiles.find_period``). A periodic axis is folded modulo
its period over every floor point within reach, which fills and denoises the tile; an axis with
no period takes a ``window``-metre stretch of the best-seen ground and wraps it (a grain floor
without the points off its median chromaticity: a ramp lying on the sand). The tile is binned
into ``texel``-metre texels (empty ones from their neighbours), with six box-filtered mip
levels (the tile, then halved five times). The floor's colour against distance, at any
distance, less its mean within reach, is the start frame's haze (``texture_tiles.DistanceHaze``:
fog, a grazing floor's sheen), which the walls take out of their far-seen texture and put back
at the distance they are drawn at.

``draw``: where a pixel's ray meets the floor plane (``eye_height`` under the start camera: a
jump does not lift it) inside the walls (``margin`` beyond the region's edges), and the render
has no point there or one more than 0.5 m behind the floor, the pixel shows the tile's texel at
that point (the mip level from the pixel's footprint along the view, its longer side, as a
GPU picks it: a far floor is its texture's mean, not a moire), at the floor's depth, as covered.
The floor is drawn every frame, so a session keeps generated frames' pixels that lie on it out of
its memory (``depth_at``; ``memory_conditioning.generated_insert``): a point stored there would
hide it from then on, and the next view would show that frame's blotches stretched over it.
"""

from __future__ import annotations

import numpy as np
import torch

from alaya.data.walkable_region import WalkableRegion
from alaya.models.aerial_fog import AerialFog, learn_fog
from alaya.models.region_walls import camera_key, camera_rays, drawn_over, painted
from alaya.models.texture_tiles import LUMA, DistanceHaze, fill_empty, find_period, learn_haze

ABOVE_FLOOR = 0.3            # metres above the camera's foot a floor point may be (a bump, a slope)
BELOW_FLOOR = 0.8            # ... and below it
MIN_POINTS = 200             # floor points that make a floor seen
CELL = 0.5                   # metres: the cells whose lowest points are the ground (``_on_ground``)
ON_GROUND = 0.1              # metres above a cell's ground a point may be
OFF_COLOUR = 0.04            # a grain floor's points further than this (and 3x their median) from its median chromaticity are not floor
LEVELS = 6                   # mip levels: the tile, then halved five times


def _on_ground(xyz: np.ndarray) -> np.ndarray:
    """(N,) bool: the points (3, N) within ``ON_GROUND`` metres above their ``CELL``-metre cell's
    lowest fifth: the ground, not the tops and sides of what stands or lies on it."""
    cell = np.floor(xyz[:2] / CELL).astype(np.int64)
    _, key = np.unique(cell, axis=1, return_inverse=True)
    key = key.reshape(-1)
    order = np.lexsort((xyz[2], key))
    starts = np.searchsorted(key[order], np.arange(key.max() + 1))
    counts = np.bincount(key)
    low = xyz[2, order][starts + (counts * 0.2).astype(np.int64)]          # each cell's 20th percentile
    return xyz[2] <= low[key] + ON_GROUND


class RegionFloor:
    """The floor inside the walls ``margin`` beyond a ``WalkableRegion``; see the module docstring."""

    def __init__(self, region: WalkableRegion, margin: float = 0.6, texel: float = 0.05, eye_height: float = 1.4,
                 reach: float = 6.0, window: float = 2.0) -> None:
        for name, value in (("margin", margin), ("texel", texel), ("eye_height", eye_height), ("reach", reach),
                            ("window", window)):
            if not (np.isfinite(value) and value >= 0 and (value > 0 or name == "margin")):
                raise ValueError(f"{name}: metres {'>= 0' if name == 'margin' else '> 0'}, got {value!r}")
        self.texel, self.eye_height, self.reach, self.window = float(texel), float(eye_height), float(reach), float(window)
        a = np.asarray(region.hull, np.float64)
        e = np.roll(a, -1, 0) - a
        along = e / np.linalg.norm(e, axis=1, keepdims=True)
        self.out = np.stack([along[:, 1], -along[:, 0]], 1)                   # (M, 2) outward normals
        self.offset = np.einsum("mk,mk->m", self.out, a) + float(margin)
        self.mips: list[np.ndarray] | None = None                           # (rows, cols, 3) per level
        self.origin = np.zeros(2)                                           # world x, y of texel (0, 0)
        self.size = np.ones(2)                                              # metres the tile spans along x, y
        self.periods: tuple[float | None, float | None] = (None, None)
        self.height = 0.0                                                   # the floor plane's z, metres
        self.haze: DistanceHaze | AerialFog | None = None                   # the start frame's, from its floor
        self._last_rays = None                                              # (camera, _rays of it)

    def learn(self, xyz, rgb, eye, fog_colour=None, fog: AerialFog | None = None) -> bool:
        """The tile from points ``xyz`` (3, N) in the region's world (metres, z up) with colours
        ``rgb`` (N, 3) uint8, seen from ``eye`` (3,); False (``draw`` draws nothing) when fewer
        than 200 of them are floor within reach. The haze: a learnt ``fog`` as it is; else the
        floor at every distance gives it: with ``fog_colour`` (3,) sRGB, an ``AerialFog`` of that
        colour (its density fitted to the floor; ``DistanceHaze`` where too little floor is seen),
        else a ``DistanceHaze``."""
        xyz, rgb, eye = np.asarray(xyz, np.float64), np.asarray(rgb), np.asarray(eye, np.float64).reshape(-1)
        if xyz.ndim != 2 or xyz.shape[0] != 3 or rgb.shape != (xyz.shape[1], 3) or eye.shape != (3,):
            raise ValueError(f"xyz, rgb, eye: expected (3, N), (N, 3) and (3,), got {xyz.shape}, {rgb.shape}, {eye.shape}")
        foot = eye[2] - self.eye_height
        self.height = foot                                 # the floor plane: a jump, a bump do not move it
        self._last_rays = None
        near = np.hypot(*(xyz[:2] - eye[:2, None])) <= self.reach
        ground = (xyz[2] < foot + ABOVE_FLOOR) & (xyz[2] > foot - BELOW_FLOOR)
        floor = near & ground
        self.mips, self.haze = None, None
        if fog is not None:
            self.haze = fog
        elif ground.any():                                 # the floor at any distance: the haze
            ground[ground] = _on_ground(xyz[:, ground])
            distance = np.linalg.norm(xyz[:, ground] - eye[:, None], axis=0)
            colours = rgb[ground].astype(np.float32) / 255
            if fog_colour is not None:
                self.haze = learn_fog(distance, colours, fog_colour)
            if self.haze is None:
                self.haze = learn_haze(distance, colours, near[ground])
        if floor.sum() < MIN_POINTS:
            return False
        floor[floor] = _on_ground(xyz[:, floor])
        if floor.sum() < MIN_POINTS:
            return False
        x, y, colours = xyz[0, floor], xyz[1, floor], rgb[floor].astype(np.float32) / 255
        lum = colours @ LUMA
        px, py = find_period(x, y, lum, self.texel), find_period(y, x, lum, self.texel)
        self.periods = (px, py)
        keep = np.ones(len(x), bool)
        if px is None and py is None:                      # grain, not a pattern: what lies on it is off its colour
            hue = colours / np.maximum(colours.sum(1, keepdims=True), 1e-3)   # chromaticity: shading leaves it
            off = np.linalg.norm(hue - np.median(hue, 0), axis=1)
            keep = off <= max(OFF_COLOUR, 3.0 * np.median(off))
        sizes = []
        for value, period in ((x, px), (y, py)):           # an axis with no period: the best-seen window
            if period is None:
                start = np.percentile(value, 50) - self.window / 2
                keep &= (value >= start) & (value < start + self.window)
                sizes.append((start, self.window))
            else:
                sizes.append((0.0, period))
        if keep.sum() < MIN_POINTS:                        # the window shows too little floor
            return False
        (x0, wx), (y0, wy) = sizes
        cols, rows = max(1, int(round(wx / self.texel))), max(1, int(round(wy / self.texel)))
        self.origin, self.size = np.array([x0, y0]), np.array([wx, wy])
        i = np.floor(np.mod(x[keep] - x0, wx) / wx * cols).astype(int) % cols
        j = np.floor(np.mod(y[keep] - y0, wy) / wy * rows).astype(int) % rows
        total, count = np.zeros((rows, cols, 3)), np.zeros((rows, cols))
        np.add.at(total, (j, i), colours[keep])
        np.add.at(count, (j, i), 1)
        tile = fill_empty(np.where(count[..., None] > 0, total / np.maximum(count, 1)[..., None], np.nan))
        self.mips = [tile]
        for _ in range(LEVELS - 1):                        # 2x2 box, wrapping (the tile repeats)
            t = self.mips[-1]
            t = np.concatenate([t, t[:1]], 0)[: len(t) + len(t) % 2]
            t = np.concatenate([t, t[:, :1]], 1)[:, : t.shape[1] + t.shape[1] % 2]
            self.mips.append(0.25 * (t[0::2, 0::2] + t[1::2, 0::2] + t[0::2, 1::2] + t[1::2, 1::2]))
        return True

    def _rays(self, K, world_to_camera, H: int, W: int):
        """(K, world_to_camera, the pixels' unit world rays (3, H * W), the ray lengths to the
        floor plane (inf where a ray does not meet it), where they meet it (2, H * W), and whether
        that is inside the walls (H * W,)) from a camera in the region's world; the last camera's
        are kept (a session draws a view, then inserts its frame from the same view)."""
        key = camera_key(K, world_to_camera, H, W)
        if self._last_rays is not None and self._last_rays[0] == key:
            return self._last_rays[1]
        K, w2c, d, eye = camera_rays(K, world_to_camera, H, W)
        down = d[2] < -1e-3
        down &= eye[2] > self.height                                       # (a camera below the floor sees none)
        t = np.where(down, (self.height - eye[2]) / np.where(down, d[2], -1.0), np.inf)   # ray length to the floor
        hit = eye[:2, None] + np.where(down, t, 0.0) * d[:2]
        inside = down & (self.out @ hit <= self.offset[:, None]).all(0)
        self._last_rays = key, (K, w2c, d, t, hit, inside)
        return self._last_rays[1]

    def depth_at(self, K, world_to_camera, H: int, W: int) -> np.ndarray:
        """(H, W) metres along the view axis at which a camera (``K``, ``world_to_camera`` in the
        region's world) sees the floor ``draw`` draws, 0 where its rays do not meet it (or none
        was learnt)."""
        if self.mips is None:
            return np.zeros((H, W))
        _, w2c, d, t, _, inside = self._rays(K, world_to_camera, H, W)
        return np.where(inside, t * (-w2c[2, :3].numpy() @ d), 0.0).reshape(H, W)

    def draw(self, rgb: torch.Tensor, coverage: torch.Tensor, depth: torch.Tensor, K, world_to_camera,
             coarse: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A render (rgb (1, 3, H, W), coverage (1, 1, H, W), depth (1, 1, H, W) metres) from the
        camera ``K`` (3, 3), ``world_to_camera`` (4, 4) in the region's world, with the floor drawn
        where its rays meet it inside the walls and it has no nearer point, and where ``coarse``
        over the points on it (``region_walls.drawn_over``; new tensors; the same ones when nothing
        is drawn)."""
        if self.mips is None:
            return rgb, coverage, depth
        K, w2c, d, t, hit, inside = self._rays(K, world_to_camera, *rgb.shape[-2:])
        along_view = t * (-w2c[2, :3].numpy() @ d)
        take = inside & drawn_over(coverage, depth, along_view, coarse)
        if not take.any():
            return rgb, coverage, depth
        i = np.nonzero(take)[0]
        pixel = 1.0 / float(K[1, 1])                                        # radians a pixel spans
        footprint = t[i] * pixel / np.abs(d[2, i])                          # metres: its longer side, along the view
        level = np.clip(np.round(np.log2(np.maximum(footprint / self.texel, 1.0))), 0, LEVELS - 1).astype(int)
        colours = np.zeros((len(i), 3), np.float32)
        u = np.mod(hit[:, i] - self.origin[:, None], self.size[:, None]) / self.size[:, None]   # (2, n) in [0, 1)
        for lv in np.unique(level):
            on = level == lv
            tile = self.mips[lv]
            rows, cols = tile.shape[:2]
            colours[on] = tile[np.minimum((u[1, on] * rows).astype(int), rows - 1),
                               np.minimum((u[0, on] * cols).astype(int), cols - 1)]
        return painted(rgb, coverage, depth, i, colours, along_view[i])

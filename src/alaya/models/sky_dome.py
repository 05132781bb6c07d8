"""The sky as seen from anywhere: colours kept by world direction, not position.

::

    dome = SkyDome(cells_per_degree=3.0)
    dome.insert(rgb, sky, K, world_to_camera)             # the frame's sky pixels (H, W) bool
    rgb, coverage = dome.render(K, new_world_to_camera, H, W)

The sky is infinitely far: walking does not move it, only turning does. Kept as points at a
finite backdrop distance (what ``SceneMemory`` did before), it grows and slides as the player
walks towards it (9 m of walking magnifies a 25 m backdrop 1.6 times), and its splats turn
into streaks and blocks. Here each sky pixel's ray direction (world z up) lands in an
equirectangular panorama (``cells_per_degree`` cells a degree of azimuth and of elevation): a
frame fills the cells in its view by sampling its sky pixels at their centres' directions, and a
render samples the panorama bilinearly along each pixel's ray, over the cells seen so far.

A cell keeps its first sight: a session's start
frame, an observation, is inserted first, and a generated frame only fills the sky it did not
see, as ``SceneMemory`` keeps points. Fixed size (``cells_per_degree`` 3: 540 x 1080 cells,
2.3 MB; finer than a 128² frame's pixels, so a view it saw renders back nearly exactly), so it needs no eviction.

``extend``: the sky a frame never showed is drawn too, as its elevation's median over the cells
seen (rows above the highest seen elevation take that row's; rows below the lowest seen take that
row's down to the horizon, where the sky a start frame shows over far walls' tops leaves off and a
lower wall walked up to shows more of it; below the horizon, nothing, unless ``reach_down_to``
says how far: a session that draws the floor and walls over the sky takes it 10 degrees further,
where only a low wall's top leaves it, and a game draws its sky's haze on down). The
sky of these worlds changes with elevation and hardly with azimuth, and the median leaves out a
sun; so a turn shows the sky the start frame implies instead of sky the model must invent. A
session that extends the dome keeps generated frames' sky out of it (``SceneMemory.insert``'s
``observed``).
"""

from __future__ import annotations

import math

import numpy as np

import torch
import torch.nn.functional as F

from alaya.models.memory_checks import check_camera, check_frame, check_size
from alaya.models.memory_geometry import camera_points

def pixel_directions(K: torch.Tensor, world_to_camera: torch.Tensor, H: int, W: int) -> torch.Tensor:
    """(3, H * W) unit world directions of the rays through the pixel centres."""
    rays = camera_points(torch.ones(H, W), K).reshape(3, -1).float()      # at unit depth along the view axis
    world = world_to_camera[:3, :3].float().T @ rays
    return world / (world * world).sum(0, keepdim=True).sqrt()      # (not .norm(dim=0): 40x slower)


class SkyDome:
    """An equirectangular panorama of the sky by world direction; see the module docstring."""

    def __init__(self, cells_per_degree: float = 3.0, extend: bool = False) -> None:
        if not cells_per_degree > 0:
            raise ValueError(f"cells_per_degree: must be > 0, got {cells_per_degree!r}")
        self.cells_per_degree = float(cells_per_degree)
        self.extend = bool(extend)
        self.extend_to = 0.0               # degrees of elevation the extension reaches down to (``reach_down_to``)
        self.rows, self.cols = math.ceil(180 * self.cells_per_degree), math.ceil(360 * self.cells_per_degree)
        self.clear()

    def clear(self) -> None:
        self.rgb = torch.zeros(self.rows * self.cols, 3, dtype=torch.uint8)
        self.seen = torch.zeros(self.rows * self.cols, dtype=torch.bool)
        self._extended = None              # (rgb, seen) of the extended panorama, until the next insert

    @property
    def nbytes(self) -> int:
        return self.rgb.numel() + self.seen.numel()

    def _coordinates(self, directions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Continuous (row, col) panorama coordinates of unit directions (3, n): row 0 straight
        up, col 0 at azimuth -180 degrees; cell (i, j) spans [i, i + 1) x [j, j + 1)."""
        x, y, z = directions
        elevation = torch.rad2deg(torch.asin(z.clamp(-1, 1)))
        azimuth = torch.rad2deg(torch.atan2(y, x))
        row = ((90 - elevation) * self.cells_per_degree).clamp(0, self.rows - 1e-3)
        col = ((azimuth + 180) * self.cells_per_degree) % self.cols
        return row, col

    def insert(self, rgb, sky, K, world_to_camera) -> int:
        """The ``sky`` (H, W) bool pixels of a frame ``rgb`` (H, W, 3) or (3, H, W) (uint8 or
        floats in [0, 1]) seen with ``K`` (3, 3) and ``world_to_camera`` (4, 4) into the cells not
        seen yet; returns how many cells were filled. Each cell in view takes the pixel its
        centre's direction falls in, where that pixel is sky: every cell the sky covers is
        filled, however coarse the frame (cells finer than the pixels keep them nearly exactly)."""
        rgb = torch.as_tensor(rgb)
        size = tuple(rgb.shape[:2]) if rgb.ndim == 3 and rgb.shape[-1] == 3 else tuple(rgb.shape[-2:])
        rgb, _ = check_frame(rgb, torch.zeros(size))
        sky = torch.as_tensor(sky)
        if tuple(sky.shape) != size:
            raise ValueError(f"sky: expected an (H, W) = {size} mask like rgb's, got shape {tuple(sky.shape)}")
        sky = sky.bool()
        K, w2c = check_camera(K, world_to_camera)
        H, W = size
        if not sky.any():
            return 0
        # the sky's inner pixels (its edge's cells may stay empty: their centres fall off the sky)
        inner = -F.max_pool2d(-sky[None, None].float(), 3, 1, 1)[0, 0] > 0
        directions = pixel_directions(K, w2c, H, W).index_select(1, inner.reshape(-1).nonzero().squeeze(1))
        row, col = self._coordinates(directions)
        fresh = ~self.seen.index_select(0, row.long() * self.cols + col.long().clamp(max=self.cols - 1))
        if not fresh.any():                    # all the sky it shows is known: nothing to sample
            return 0
        pixel_cells = math.degrees(1 / min(K[0, 0].item(), K[1, 1].item())) * self.cells_per_degree
        cell = self._cells_in_view(directions[:, fresh], margin=math.ceil(1.5 * pixel_cells) + 1)
        cell = cell[~self.seen.index_select(0, cell)]
        p = w2c[:3, :3].float() @ self._directions(cell)                      # camera space
        ahead = -p[2] > 1e-6
        cell, p = cell[ahead], p[:, ahead]
        u = K[0, 0].item() * p[0] / -p[2] + K[0, 2].item()
        v = -K[1, 1].item() * p[1] / -p[2] + K[1, 2].item()
        inside = (u >= 0) & (u < W) & (v >= 0) & (v < H)
        cell = cell[inside]
        pixel = v[inside].long().clamp(max=H - 1) * W + u[inside].long().clamp(max=W - 1)
        on_sky = sky.reshape(-1).index_select(0, pixel)
        cell, pixel = cell[on_sky], pixel[on_sky]
        self.rgb[cell] = rgb.reshape(-1, 3).index_select(0, pixel)
        self.seen[cell] = True
        self._extended = None
        return len(cell)

    def reach_down_to(self, elevation_degrees: float) -> None:
        """Extend the sky no frame showed down to ``elevation_degrees`` (-90 to 0; 0, the default:
        the horizon) where the lowest seen elevation is higher: those rows take its colour."""
        if not -90.0 <= float(elevation_degrees) <= 0.0:
            raise ValueError(f"elevation_degrees: expected -90 .. 0, got {elevation_degrees!r}")
        self.extend_to, self._extended = float(elevation_degrees), None

    def horizon_colour(self, min_columns: int = 10) -> np.ndarray | None:
        """(3,) sRGB in [0, 1]: the median over the seen columns of each one's lowest seen cell,
        the sky where the frames showed it nearest the horizon (a game's distance fog meets its
        sky there: ``aerial_fog``); None with fewer than ``min_columns`` columns seen."""
        seen = self.seen.reshape(self.rows, self.cols)
        columns = seen.any(0).nonzero().squeeze(1)
        if len(columns) < min_columns:
            return None
        lowest = self.rows - 1 - seen[:, columns].flip(0).int().argmax(0)     # the largest seen row per column
        rgb = self.rgb.reshape(self.rows, self.cols, 3)[lowest, columns]
        return rgb.float().median(0).values.numpy().astype(np.float64) / 255.0

    def panorama(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(rgb (rows * cols, 3) uint8, known (rows * cols,) bool): the cells seen, and with
        ``extend`` every cell from straight up down to the lowest seen elevation or ``extend_to``
        (the horizon unless ``reach_down_to`` says otherwise), whichever is lower, the unseen ones
        their row's median seen colour (a row with none seen: the nearest seen row above it, the
        highest seen row for the rows above it)."""
        if not self.extend or not self.seen.any():
            return self.rgb, self.seen
        if self._extended is None:
            seen = self.seen.reshape(self.rows, self.cols)
            rgb = self.rgb.reshape(self.rows, self.cols, 3)
            values = rgb.float().masked_fill(~seen[..., None], float("nan"))
            median = values.nanmedian(dim=1).values                               # (rows, 3), NaN where none seen
            has = seen.any(1)
            r = torch.arange(self.rows)
            seen_rows = has.nonzero().squeeze(1)
            top, bottom = int(seen_rows[0]), int(seen_rows[-1])
            source = torch.where(has, r, torch.zeros_like(r)).cummax(0).values  # the nearest seen row at or above
            source = torch.where(r < top, torch.full_like(r, top), source)
            fill = median.index_select(0, source).round().clamp(0, 255).to(torch.uint8)
            lowest = math.ceil((90 - self.extend_to) * self.cells_per_degree) - 1    # the last row at or above extend_to
            unseen = ~seen & (r <= max(bottom, min(lowest, self.rows - 1)))[:, None]
            rgb = torch.where(unseen[..., None], fill[:, None, :], rgb)
            self._extended = rgb.reshape(-1, 3), (seen | unseen).reshape(-1)
        return self._extended

    def _cells_in_view(self, directions: torch.Tensor, margin: int) -> torch.Tensor:
        """(n,) flat indices of the cells in the box of rows and (wrapped) columns that the unit
        directions (3, m) span, ``margin`` cells around."""
        row, col = self._coordinates(directions)
        r0 = max(int(row.min().floor()) - margin, 0)
        r1 = min(int(row.max().ceil()) + margin, self.rows)
        centre = float(col[len(col) // 2])
        rel = (col - centre + self.cols / 2) % self.cols                      # the view's middle column at cols / 2
        c0, c1 = int(rel.min().floor()) - margin, int(rel.max().ceil()) + margin
        cols = (torch.arange(c0, c1) + round(centre - self.cols / 2)) % self.cols
        if c1 - c0 >= self.cols:
            cols = torch.arange(self.cols)
        return (torch.arange(r0, r1)[:, None] * self.cols + cols[None, :]).reshape(-1)

    def _directions(self, cell: torch.Tensor) -> torch.Tensor:
        """(3, n) unit world directions of the cells' centres."""
        elevation = torch.deg2rad(90 - (cell // self.cols + 0.5) / self.cells_per_degree)
        azimuth = torch.deg2rad((cell % self.cols + 0.5) / self.cells_per_degree - 180)
        return torch.stack([elevation.cos() * azimuth.cos(), elevation.cos() * azimuth.sin(), elevation.sin()])

    def render(self, K, world_to_camera, H: int, W: int, min_weight: float = 0.25,
               pixels: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(rgb (3, H, W) float32 in [0, 1], coverage (1, H, W)): the panorama sampled bilinearly
        along each pixel's ray over the seen cells (with ``extend``, the known ones); covered where
        the seen cells around the ray weigh at least ``min_weight`` (a cell missed between seen ones is filled, the edge of the
        seen sky not smeared outwards). 0 where not covered, and with ``pixels`` (n,) flat indices,
        everywhere but those (only they are sampled: a memory render asks for its holes)."""
        K, w2c = check_camera(K, world_to_camera)
        H, W = check_size(H, W)
        directions = pixel_directions(K, w2c, H, W)
        if pixels is not None:
            pixels = torch.as_tensor(pixels)
            if (pixels.ndim != 1 or pixels.dtype != torch.int64
                    or (len(pixels) and not 0 <= int(pixels.min()) <= int(pixels.max()) < H * W)):
                raise ValueError(f"pixels: expected (n,) int64 flat indices in [0, {H * W}), "
                                 f"got {pixels.dtype} {tuple(pixels.shape)}")
            directions = directions.index_select(1, pixels)
        row, col = self._coordinates(directions)
        r, c = row - 0.5, col - 0.5                         # cell centres at +0.5
        r0, c0 = r.floor(), c.floor()
        fr, fc = r - r0, c - c0
        n = row.shape[0]
        total, weight = torch.zeros(n, 3), torch.zeros(n)
        colours, known = self.panorama()
        for dr, dc in ((0, 0), (0, 1), (1, 0), (1, 1)):
            rr = (r0 + dr).clamp(0, self.rows - 1).long()
            cc = ((c0 + dc).long()) % self.cols
            cell = rr * self.cols + cc
            w = (fr if dr else 1 - fr) * (fc if dc else 1 - fc) * known.index_select(0, cell).float()
            total += w[:, None] * colours.index_select(0, cell).float()
            weight += w
        covered = weight >= min_weight
        rgb = torch.where(covered[:, None], total / (255 * weight.clamp(min=1e-6))[:, None], torch.zeros(()))
        if pixels is not None:
            rgb = torch.zeros(H * W, 3).index_copy_(0, pixels, rgb)
            covered = torch.zeros(H * W, dtype=torch.bool).index_copy_(0, pixels, covered)
        return rgb.T.reshape(3, H, W), covered.float().reshape(1, H, W)

"""The walkable region's border as walls: what a turn towards a border the memory never saw shows.

::

    walls = RegionWalls(region, margin=0.6)               # region: WalkableRegion, its world's floor z = 0
    walls.learn(memory_xyz, memory_rgb)                   # the start frame's points, region world
    rgb, coverage, depth = walls.draw(rgb, coverage, depth, K, world_to_camera)   # over a memory render
    drawn = walls.depth_at(K, world_to_camera, H, W)      # (H, W) where a view sees them, 0 elsewhere

The recordings say where players can stand (``WalkableRegion``), and a game keeps its players a
little way from its border walls; so the border stands ``margin`` metres beyond the region's
edges. A session's memory holds only what its frames showed: a turn towards a border the start
frame did not show is a hole, and the one-step network draws open ground there, which the camera
then faces for the rest of the minute while the game shows the wall close up.

``learn`` makes each edge's wall texture from the points near its plane (``margin`` - 0.3 m to
``margin`` + 1 m out, above the floor; a point near two, at a corner, goes to the nearer):
binned over (metres along the edge, height) into ``texel``-metre texels, each the mean colour of
its points, empty texels filled from their neighbours, then sharpened (``sharpen``: an unsharp mask
restores the contrast a far pixel's footprint averaged away); the wall's top is the points' 95th
height percentile. A wall no points show (fewer than 30, or over less than 0.5 m) borrows the
best-seen wall's texture with ``borrow`` (a border's material is unknown there; the seen one's
grain is the best guess) and a top (``unseen_top``: with a wall detail that recorded the borders'
heights, ``WallDetail.unseen_top``, else the seen walls' median), else it is not drawn; with a ``facing``
(``WallDetail.facing_for``: the recorded style's walls' mean colour against the way they face),
the borrowed texture is recoloured to that colour for the way the wall faces (the seen wall's
colour is one material's, the mean of the recorded walls' a better guess of another's), and with
``materials`` and a wall detail that has them, drawn as one of the recorded walls' materials
(``WallDetail.material_at``), picked at random per wall from ``seed``, in that colour. A wall
seen 10-15 m away carries that far's fog: given the start frame's haze (``RegionFloor.haze``,
the floor's colour against distance), each point's haze is taken out and ``draw`` puts back the
haze at the distance it draws. ``draw``: where a pixel's ray leaves the grown region between
the floor and that wall's top, and the render has no point there or one more than 0.5 m beyond
the wall, the pixel shows the texel the ray meets (tiled along the edge; nearest texel, so the
texture's edges stay crisp, but interpolated where a texel is seen over ``MAGNIFIED`` pixels
wide, so a wall walked up to is not a grid of flat blocks, and there, with a ``WallDetail``,
times 1 + the close-up detail of walls of its colour, ``alaya.models.wall_detail``; with
``detail_among`` > 1 the median detail of that many tiles nearest its colour), at the
wall's depth, as covered. The network then refines a wall where it would have invented a field.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from alaya.data.walkable_region import WalkableRegion
from alaya.models.aerial_fog import AerialFog
from alaya.models.camera_constraints import camera_centre
from alaya.models.memory_checks import check_camera
from alaya.models.sky_dome import pixel_directions
from alaya.models.texture_tiles import LUMA, DistanceHaze, fill_empty, find_period
from alaya.models.wall_detail import FacingColour, WallDetail

NEAR_WALL = (-0.3, 1.0)     # metres beyond the wall plane (the grown edge) whose points make its texture
BEYOND = 0.5                # metres: a memory point this far behind the wall is hidden by it
MIN_POINTS = 30             # points that make a wall seen ...
MIN_SPAN = 0.5              # ... over at least this many metres along it
FOLDED = 0.04               # metres: a repeating texture's texels, its points folded into one period
SHARPEN = 1.0               # unsharp mask on a wall's texels: a far pixel's footprint blurred them
MAGNIFIED = 1.5             # pixels: a texel seen wider is drawn interpolated (``texel_colours``)


_last_rays = None           # (camera, camera_rays of it): the walls and the floor draw the same view each frame


def camera_key(K, world_to_camera, H: int, W: int) -> tuple:
    """A camera's identity (its matrices' shapes and float64 values, the image size): what the
    last-camera caches of the rays, the walls' and the floor's hits are keyed by."""
    return tuple((a.shape, a.tobytes()) for a in (np.asarray(K, np.float64), np.asarray(world_to_camera, np.float64))) + (H, W)


def camera_rays(K, world_to_camera, H: int, W: int) -> tuple[torch.Tensor, torch.Tensor, np.ndarray, np.ndarray]:
    """(K, world_to_camera as float64, the unit world directions (3, H * W) of the pixels' rays
    and the camera's centre (3,), numpy; shared, not to be written), or ValueError naming a bad
    camera. The last camera's are kept: a view's walls and floor cast the same rays."""
    global _last_rays
    key = camera_key(K, world_to_camera, H, W)
    last = _last_rays
    if last is not None and last[0] == key:
        return last[1]
    K, w2c = check_camera(K, world_to_camera)
    rays = K, w2c, pixel_directions(K, w2c, H, W).double().numpy(), camera_centre(w2c).numpy()
    _last_rays = key, rays
    return rays


def drawn_over(coverage: torch.Tensor, depth: torch.Tensor, along_view: np.ndarray,
               coarse: torch.Tensor | None) -> np.ndarray:
    """(H * W,) bool: the pixels of a render (coverage, depth (1, 1, H, W)) where a surface seen
    ``along_view`` (H * W,) metres away is drawn: no point there, one more than ``BEYOND`` behind
    it, or, where ``coarse`` (1, 1, H, W) bool (the memory's points magnified,
    ``region_shell.coarse_points``), one on it (within ``BEYOND``): a wall or floor the start frame
    showed far away and hazy, walked up to, shows its texture (dehazed, with its detail) instead
    of that frame's points blown up into blocks."""
    covered = coverage.reshape(-1).numpy() > 0.5
    d = depth.reshape(-1).numpy()
    take = ~covered | (d > along_view + BEYOND)
    if coarse is not None:
        take |= coarse.reshape(-1).numpy() & (np.abs(d - along_view) <= BEYOND)
    return take


def painted(rgb: torch.Tensor, coverage: torch.Tensor, depth: torch.Tensor, pixels: np.ndarray, colours: np.ndarray,
            depths: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Copies of a render (rgb (1, 3, H, W), coverage, depth (1, 1, H, W)) with the flat
    ``pixels`` (n,) showing ``colours`` (n, 3) at ``depths`` (n,) metres, covered."""
    at = torch.from_numpy(pixels)
    rgb, coverage, depth = rgb.clone(), coverage.clone(), depth.clone()
    rgb.view(3, -1)[:, at] = torch.from_numpy(colours.T).to(rgb.dtype)
    coverage.view(-1)[at] = 1.0
    depth.view(-1)[at] = torch.from_numpy(depths).to(depth.dtype)
    return rgb, coverage, depth


def texel_colours(wall: WallTexture, su: np.ndarray, sz: np.ndarray, smooth: np.ndarray) -> np.ndarray:
    """(n, 3) a wall's colours at texel coordinates ``su``, ``sz`` (n,) (texel (i, j) spans [j, j + 1)
    x [i, i + 1); columns tiled, rows tiled with ``wrap_z``, else the edge row goes on): the texel
    hit, or where ``smooth`` (n,) bool, the four around interpolated bilinearly. A texel seen many
    pixels wide (``MAGNIFIED``: a wall walked up to) is then a smooth gradient, not a flat block
    with hard edges; one seen about a pixel wide keeps its own colour (interpolating would average
    away the contrast ``sharpened`` restored)."""
    rows, cols = wall.texels.shape[:2]
    row = (lambda k: k % rows) if wall.wrap_z else (lambda k: np.clip(k, 0, rows - 1))   # noqa: E731
    shift = np.where(smooth, 0.5, 0.0)                   # bilinear weights are about the texel centres
    fu, fz = su - shift, sz - shift
    u0, z0 = np.floor(fu), np.floor(fz)
    wu, wz = np.where(smooth, fu - u0, 0.0)[:, None], np.where(smooth, fz - z0, 0.0)[:, None]
    u0, z0 = u0.astype(int), z0.astype(int)
    at = lambda dz, du: wall.texels[row(z0 + dz), (u0 + du) % cols]                     # noqa: E731
    return ((1 - wz) * ((1 - wu) * at(0, 0) + wu * at(0, 1)) + wz * ((1 - wu) * at(1, 0) + wu * at(1, 1))
            ).astype(np.float32)


def sharpened(texels: np.ndarray, wrap_z: bool, amount: float) -> np.ndarray:
    """``texels`` (rows, cols, 3) plus ``amount`` times their difference from their 3 x 3 mean
    (columns tiled, rows tiled with ``wrap_z``, else the edge row repeated), clipped to [0, 1]."""
    if amount <= 0:
        return texels
    p = np.pad(texels, ((1, 1), (0, 0), (0, 0)), mode="wrap" if wrap_z else "edge")
    p = np.pad(p, ((0, 0), (1, 1), (0, 0)), mode="wrap")
    rows, cols = texels.shape[:2]
    mean = sum(p[a:a + rows, b:b + cols] for a in range(3) for b in range(3)) / 9
    return np.clip(texels + amount * (texels - mean), 0, 1).astype(np.float32)


@dataclass(frozen=True)
class WallTexture:
    texels: np.ndarray      # (rows, cols, 3) float32 in [0, 1]; row 0 at the floor
    u0: float               # metres along the edge (from its first vertex) where column 0 starts
    top: float              # metres above the floor
    points: int             # the points it was made from (0: borrowed from the best-seen wall)
    texel_u: float          # metres a column spans (the texture's period over the columns when it repeats)
    texel_z: float          # metres a row spans
    wrap_z: bool            # the rows repeat up the wall (a period found), else the top row goes on
    detail: int = -1        # its ``WallDetail`` tile (-1: none)
    material: int = -1      # its ``WallDetail`` material, times its texels' colour (-1: none)


class RegionWalls:
    """Walls ``margin`` metres beyond a ``WalkableRegion``'s edges; see the module docstring."""

    def __init__(self, region: WalkableRegion, margin: float = 0.6, texel: float = 0.12,
                 borrow: bool = True, fold: bool = True, sharpen: float = SHARPEN,
                 detail: WallDetail | None = None, facing: FacingColour | None = None, materials: bool = False,
                 seed: int = 0, detail_among: int = 1) -> None:
        if not (np.isfinite(margin) and margin >= 0):
            raise ValueError(f"margin: metres >= 0, got {margin!r}")
        if detail_among < 1:
            raise ValueError(f"detail_among: tiles >= 1, got {detail_among!r}")
        if not (np.isfinite(texel) and texel > 0):
            raise ValueError(f"texel: metres > 0, got {texel!r}")
        if not (np.isfinite(sharpen) and sharpen >= 0):
            raise ValueError(f"sharpen: >= 0, got {sharpen!r}")
        self.margin, self.texel, self.borrow, self.fold = float(margin), float(texel), bool(borrow), bool(fold)
        self.sharpen, self.detail, self.facing, self.detail_among = float(sharpen), detail, facing, int(detail_among)
        self.draw_materials = bool(materials) and detail is not None and detail.config.materials > 0
        self.seed = int(seed) % 2 ** 63                 # (any int: a session seed may be negative)
        a = np.asarray(region.hull, np.float64)
        e = np.roll(a, -1, 0) - a
        self.start = a                                                     # (M, 2) each edge's first vertex
        self.along = e / np.linalg.norm(e, axis=1, keepdims=True)          # (M, 2) unit, counter-clockwise
        self.out = np.stack([self.along[:, 1], -self.along[:, 0]], 1)      # (M, 2) outward normals
        self.offset = np.einsum("mk,mk->m", self.out, a) + self.margin     # wall plane: out . p = offset
        self.walls: list[WallTexture] | None = None
        self.haze: DistanceHaze | AerialFog | None = None
        self._last_hits = None                                             # (camera, _hits of it)

    def learn(self, xyz, rgb, eye=None, haze: DistanceHaze | AerialFog | None = None) -> int:
        """Each wall's texture from points ``xyz`` (3, N) in the region's world (metres, z up from
        its floor) with colours ``rgb`` (N, 3) uint8; returns how many walls the points show (0:
        ``draw`` draws nothing). With the camera centre ``eye`` (3,) that saw them and its
        ``haze`` (``RegionFloor.haze``), the texture is the walls' colour near at hand: each
        point's haze at its distance taken out (``draw`` puts it back at the distance drawn)."""
        xyz = np.asarray(xyz, np.float64)
        rgb = np.asarray(rgb)
        if xyz.ndim != 2 or xyz.shape[0] != 3 or rgb.shape != (xyz.shape[1], 3):
            raise ValueError(f"xyz, rgb: expected (3, N) and (N, 3), got {xyz.shape} and {rgb.shape}")
        colours = rgb.astype(np.float32) / 255
        self.haze, self._last_hits = None, None
        if haze is not None and eye is not None:
            eye = np.asarray(eye, np.float64).reshape(-1)
            if eye.shape != (3,):
                raise ValueError(f"eye: expected (3,), got {eye.shape}")
            self.haze = haze
            colours = haze.clear(colours, np.linalg.norm(xyz - eye[:, None], axis=0))
        seen: list[WallTexture | None] = []
        for m, near in enumerate(self.wall_points(xyz)):
            if near is None:
                seen.append(None)
                continue
            u = self.along[m] @ (xyz[:2, near] - self.start[m][:, None])
            z = xyz[2, near]
            top = float(np.percentile(z, 95))
            u0, u1 = np.percentile(u, [1, 99])
            lum = colours[near] @ LUMA
            pu = find_period(u, z, lum, FOLDED) if self.fold else None
            pz = find_period(z, u, lum, FOLDED) if self.fold else None
            if pu is None:
                cols, texel_u = int((u1 - u0) / self.texel) + 1, self.texel
                iu = np.clip(((u - u0) / texel_u).astype(int), 0, cols - 1)
            else:                                  # a repeating texture: every point folded into one period
                u0, cols = 0.0, max(1, int(round(pu / FOLDED)))
                texel_u = pu / cols
                iu = np.floor(np.mod(u, pu) / texel_u).astype(int) % cols
            if pz is None:
                rows, texel_z = int(top / self.texel) + 1, self.texel
                iz = np.clip((z / texel_z).astype(int), 0, rows - 1)
            else:
                rows = max(1, int(round(pz / FOLDED)))
                texel_z = pz / rows
                iz = np.floor(np.mod(z, pz) / texel_z).astype(int) % rows
            total, count = np.zeros((rows, cols, 3)), np.zeros((rows, cols))
            np.add.at(total, (iz, iu), colours[near])
            np.add.at(count, (iz, iu), 1)
            texels = np.where(count[..., None] > 0, total / np.maximum(count, 1)[..., None], np.nan)
            texels = sharpened(fill_empty(texels), pz is not None, self.sharpen)
            colour = texels.reshape(-1, 3).mean(0)
            tile = self.detail.nearest(colour, self.detail_among) if self.detail is not None else -1
            seen.append(WallTexture(texels, float(u0), top, int(near.sum()), texel_u, texel_z, pz is not None, tile))
        known = [w for w in seen if w is not None]
        if not known:
            self.walls = None
            return 0
        best = max(known, key=lambda w: w.points)
        top = self.unseen_top([w.top for w in known]) if self.borrow else -1.0   # (-1: below the floor, not drawn)
        self.walls = [w if w is not None else self._borrowed(best, top, m) for m, w in enumerate(seen)]
        return len(known)

    def wall_points(self, xyz: np.ndarray) -> list[np.ndarray | None]:
        """Per wall, the mask (N,) of the points ``xyz`` (3, N) (region world) that show it (near its
        plane, above the floor; a point near two, at a corner, goes to the nearer), or None where
        they are too few (``MIN_POINTS``) or span too little of it (``MIN_SPAN``): no point shows it."""
        beyond = self.out @ xyz[:2] - self.offset[:, None]                 # (M, N) metres beyond each wall
        nearest = np.abs(beyond).argmin(0)
        masks: list[np.ndarray | None] = []
        for m in range(len(self.start)):
            near = (nearest == m) & (beyond[m] > NEAR_WALL[0]) & (beyond[m] < NEAR_WALL[1]) \
                & (xyz[2] > 0.05) & (xyz[2] < 6.0)
            if near.sum() >= MIN_POINTS:
                u0, u1 = np.percentile(self.along[m] @ (xyz[:2, near] - self.start[m][:, None]), [1, 99])
                near = near if u1 - u0 >= MIN_SPAN else None
            else:
                near = None
            masks.append(near)
        return masks

    def seen_tops(self, xyz) -> list[float | None]:
        """Per wall, its top (metres above the floor: the 95th height percentile of the points
        ``xyz`` (3, N), region world, that show it), None where no point shows it."""
        xyz = np.asarray(xyz, np.float64)
        return [None if near is None else float(np.percentile(xyz[2, near], 95)) for near in self.wall_points(xyz)]

    def unseen_top(self, seen: list[float]) -> float:
        """The top a wall no point shows is drawn at, given the seen walls' ``seen``: with a wall
        detail that has the recorded borders' heights, ``WallDetail.unseen_top`` (a game that draws
        each wall's height at random says little of one wall by the others); else their median."""
        if self.detail is not None and self.detail.config.top_mean > 0:
            return self.detail.unseen_top(seen)
        return float(np.median(seen))

    def _borrowed(self, best: WallTexture, top: float, m: int) -> WallTexture:
        """Wall ``m``, which no point shows: ``best``'s texture at height ``top``, recoloured by
        ``facing`` (each channel scaled so that its mean is the facing colour of the way the wall's
        face looks: into the region) when given."""
        wall = dataclasses.replace(best, top=top, points=0)
        if self.facing is None:
            return wall
        colour = self.facing(-self.out[m])
        if self.draw_materials:            # one of the recorded walls' materials, in that colour
            material = int(np.random.default_rng([self.seed, m]).integers(self.detail.config.materials))
            texel = self.detail.config.texel
            return dataclasses.replace(wall, texels=colour.astype(np.float32)[None, None], u0=0.0, texel_u=texel,
                                       texel_z=texel, wrap_z=True, detail=-1, material=material)
        mean = best.texels.reshape(-1, 3).mean(0)
        texels = np.clip(best.texels * (colour / np.maximum(mean, 1e-3)), 0, 1).astype(np.float32)
        tile = self.detail.nearest(colour) if self.detail is not None else -1
        return dataclasses.replace(wall, texels=texels, detail=tile)

    def _hits(self, K, world_to_camera, H: int, W: int):
        """(each pixel's ray: the wall it meets first (H * W,), the ray's length to it (inf: none),
        the height it meets it at, its depth along the view axis, whether that is on the wall
        (between the floor and its top), the camera's rays and centre) from a camera in the region's
        world; the last camera's are kept (a session draws a view, then inserts its frame from it)."""
        key = camera_key(K, world_to_camera, H, W)
        if self._last_hits is not None and self._last_hits[0] == key:
            return self._last_hits[1]
        K, w2c, d, eye = camera_rays(K, world_to_camera, H, W)
        toward = self.out @ d[:2]                                          # (M, HW)
        gap = (self.offset - self.out @ eye[:2])[:, None]
        t = np.where(toward > 1e-6, gap / np.maximum(toward, 1e-6), np.inf)   # ray length to each wall plane
        edge, t = t.argmin(0), t.min(0)
        z = eye[2] + t * d[2]
        tops = np.array([w.top for w in self.walls])[edge]
        along_view = t * (-w2c[2, :3].numpy() @ d)                          # depth along the view axis
        self._last_hits = key, (edge, t, z, along_view, np.isfinite(t) & (z >= 0) & (z <= tops), d, eye)
        return self._last_hits[1]

    def depth_at(self, K, world_to_camera, H: int, W: int) -> np.ndarray:
        """(H, W) metres along the view axis at which a camera (``K``, ``world_to_camera`` in the
        region's world) sees the walls ``draw`` draws, 0 where its rays meet none (or none was learnt)."""
        if self.walls is None:
            return np.zeros((H, W))
        _, _, _, along_view, on_wall, _, _ = self._hits(K, world_to_camera, H, W)
        return np.where(on_wall, along_view, 0.0).reshape(H, W)

    def draw(self, rgb: torch.Tensor, coverage: torch.Tensor, depth: torch.Tensor, K, world_to_camera,
             coarse: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A render (rgb (1, 3, H, W), coverage (1, 1, H, W), depth (1, 1, H, W) metres) from the
        camera ``K`` (3, 3), ``world_to_camera`` (4, 4) in the region's world, with the walls drawn
        where its rays meet them and it has no nearer point, nor, where ``coarse``, one on a wall
        whose texture the start frame's points made (``drawn_over``; a borrowed wall's texture is a
        guess, and the points an observation; new tensors; the same ones when nothing is drawn)."""
        if self.walls is None:
            return rgb, coverage, depth
        edge, t, z, along_view, on_wall, d, eye = self._hits(K, world_to_camera, *rgb.shape[-2:])
        if coarse is not None:                         # a borrowed wall's texture is a guess: the points stay
            seen = np.array([w.points > 0 for w in self.walls])[edge]
            coarse = coarse & torch.from_numpy(seen).reshape(coarse.shape)
        take = on_wall & drawn_over(coverage, depth, along_view, coarse)
        if not take.any():
            return rgb, coverage, depth
        i = np.nonzero(take)[0]
        hit = eye[:2, None] + t[i] * d[:2, i]
        colours = np.zeros((len(i), 3), np.float32)
        focal = float(np.asarray(K, np.float64)[0, 0])
        for m in np.unique(edge[i]):
            on = edge[i] == m
            wall = self.walls[m]
            u = self.along[m] @ (hit[:, on] - self.start[m][:, None])
            pixels = min(wall.texel_u, wall.texel_z) * focal / along_view[i][on]   # a texel's size on screen
            near = pixels > MAGNIFIED
            colours[on] = texel_colours(wall, (u - wall.u0) / wall.texel_u, z[i][on] / wall.texel_z, near)
            if wall.detail >= 0 and near.any():        # finer than the texels: the detail of walls like it
                k = np.nonzero(on)[0][near]
                fine = self.detail.at(wall.detail, u[near], z[i][on][near], along_view[i][on][near] / focal)
                colours[k] = np.clip(colours[k] * (1 + fine[:, None]), 0, 1).astype(np.float32)
            if wall.material >= 0:                     # a recorded wall's material, at every distance
                pattern = self.detail.material_at(wall.material, u, z[i][on], along_view[i][on] / focal)
                colours[on] = np.clip(colours[on] * (1 + pattern[:, None]), 0, 1).astype(np.float32)
        if self.haze is not None:
            colours = self.haze.apply(colours, t[i])
        return painted(rgb, coverage, depth, i, colours, along_view[i])

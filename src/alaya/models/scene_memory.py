"""An explicit 3D scene memory: coloured points lifted from frames with their depth, re-projected
into any new view with a z-buffer (GEN3C's 3D cache, Ren et al. 2025, arXiv 2503.03751).

::

    memory = SceneMemory(SceneMemoryConfig(max_points=200_000))
    memory.insert(rgb, depth, K, world_to_camera, time=t)      # a frame the player saw
    view = memory.render(K, new_world_to_camera, H, W)         # what of it the new view shows
    view.rgb (3, H, W), view.coverage (1, H, W), view.depth (1, H, W)   # 0 where nothing is known

Conventions are the clip contract's (docs/dataset.md, ``alaya.data.geometry``): OpenGL camera
space (x right, y up, the camera looks down -z), ``depth`` in metres along the view axis with 0
on background (sky: not stored), ``K`` with its origin at the top-left pixel's corner (pixel
centres at +0.5), ``world_to_camera`` a 4x4 view matrix.

Points are surface elements: each keeps the two world-space steps to its pixel's right and lower
neighbours on the same surface (``tangents``), so its footprint in any view is the projection of
that little parallelogram: one pixel at the view that inserted it, taller when a floor seen at a
grazing angle is walked up to. Render: each point covers a rectangle of ``2 * footprint`` times
its projected extent (so a view has no pinholes and, at the inserting view, no point spills
onto its neighbours). Visibility is two scatters: the nearest covering depth per pixel, then,
among the points within ``depth_tolerance`` of it (one surface), the one whose centre is nearest
the pixel's. The colour is that surface's points tent-weighted by their distance over ``tent``
times their extent: at the inserting view each pixel's own point alone; where a view magnifies
the points, a smaller ``tent`` blends fewer of them (crisper edges), 0 the winner's colour alone.
Points behind the camera or nearer than ``near`` are not drawn.

Insert: the memory is first projected into the new view (or the render just made there is
reused: play renders, then inserts). A covering point at the depth the frame measures (within
``depth_tolerance`` and a slope's worth of slack) matches the pixel; the memory knows the pixel
if such a point, at no coarser than 1.5 pixels, lies in the pixel's own area. Known pixels are
not added again: their points are marked seen now and, by default, keep the colour of their
first sight (``replace=False``: re-sampling every surface from every view, or from generated
frames, would blur the memory a little each time). With ``replace``, a pixel's matching points
that are not finer than the new sample give way to it, so the memory shows the newest frame
exactly where it was seen. Coarser matching points always give way to new, finer ones. A point
in front of what the frame sees all around its pixel (3x3) is gone (a body that moved) and is
removed. Every other pixel with depth > ``near`` becomes a point if the memory matched it, or
(``confirm``) if the previous inserted frame saw the same surface there, within its pixel's
patch: a body in motion, the swung blade, a flying spell are not baked into the memory, and a
wall coming into view joins it one frame later. (The first frame goes in whole.) So standing
still adds nothing, and walking adds what came into view.

The sky (``sky_dome`` > 0: depths at or beyond it) is not points: it is infinitely far, so a
``SkyDome`` keeps it by direction, and a render shows it, that far away, where no point covers
(``sky_extend``: also where no frame showed the sky, by its elevation's seen colour).

Bounded: after each insert, points older than ``max_age`` or farther than ``max_distance`` from
the inserting camera are dropped, and beyond ``max_points`` those with the largest
``age / max_age + distance / max_distance`` go first (the oldest and farthest).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from alaya.models.memory_checks import check_camera, check_frame, check_size, check_view
from alaya.models.memory_geometry import depth_slope, depth_surface
from alaya.models.memory_splats import front_surface, splat_candidates
from alaya.models.sky_dome import SkyDome


@dataclass
class SceneMemoryConfig:
    max_points: int = 200_000      # capacity; 31 bytes a point (docs/world.md, "Scene memory")
    max_distance: float = 40.0     # metres from the inserting camera beyond which points go
    max_age: float = 1800.0        # in the caller's time unit (frames: 1 minute at 30 FPS)
    footprint: float = 0.75        # splat half-width in pixels at the inserting view's scale
    max_footprint: int = 8         # the widest splat, in pixels either side
    depth_tolerance: float = 0.05  # relative depth within which two samples are one surface
    near: float = 0.05             # metres; nearer (or behind the camera) is not drawn
    stride: int = 1                # insert every stride-th pixel each way (points grow to match)
    replace: bool = False          # a surface seen again takes the newest samples (else: first sight)
    confirm: bool = True           # add a pixel only once two frames saw it in place (not moving)
    see_through: bool = True       # remove a point the frame sees past all around its pixel (a body
                                   # that moved); off for generated frames, whose depth is a guess
    tent: float = 1.0              # the colour blend's reach, times a point's projected extent
                                   # (0: the z-buffer winner's colour alone, crisp where magnified)
    tent_min_radius: float = 1.0   # the blend's smallest half-width, pixels: 1 blends a view's sub-pixel
                                   # shift like bilinear resampling (softer), 0.5 keeps each pixel's own
                                   # points (as sharp as the frame; the magnified still blend over tent)
    sky_dome: float = 0.0          # > 0: depths at or beyond this many metres are sky, kept by direction
                                   # in a SkyDome and drawn this far away where no point covers
    sky_cells_per_degree: float = 3.0   # the dome's panorama resolution
    sky_extend: bool = False       # the dome draws the sky no frame showed too, by elevation (SkyDome.extend)

    def __post_init__(self) -> None:
        for name in ("max_points", "max_footprint", "stride"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)!r}")
        for name in ("max_distance", "max_age", "footprint", "depth_tolerance", "near", "sky_cells_per_degree"):
            if not float(getattr(self, name)) > 0:
                raise ValueError(f"{name}: must be > 0, got {getattr(self, name)!r}")
        if not 0.5 <= float(self.tent_min_radius) <= 1.0:
            raise ValueError(f"tent_min_radius: must be in [0.5, 1] pixels, got {self.tent_min_radius!r}")
        if not float(self.tent) >= 0:
            raise ValueError(f"tent: must be >= 0 (0: the winner's colour alone), got {self.tent!r}")
        if not float(self.sky_dome) >= 0:
            raise ValueError(f"sky_dome: must be >= 0 (0: no dome), got {self.sky_dome!r}")


class MemoryView(NamedTuple):
    rgb: torch.Tensor        # (3, H, W) float32 in [0, 1], 0 where not covered
    coverage: torch.Tensor   # (1, H, W) float32, 1 where a memory point is drawn
    depth: torch.Tensor      # (1, H, W) float32 metres along the view axis, 0 where not covered
    extent: torch.Tensor     # (1, H, W) float32 the drawn point's larger side now, pixels (about 1
    #                          at the view that inserted it; 0 where no point)


# -- the memory -------------------------------------------------------------------------------

class SceneMemory:
    """A bounded cloud of coloured points in world space; see the module docstring."""

    def __init__(self, config: SceneMemoryConfig | None = None) -> None:
        self.config = config or SceneMemoryConfig()
        self.clear()

    def clear(self) -> None:
        self._version = 0                                  # bumped whenever points come or go
        self._last: tuple = ((None, None, 0, 0, -1), None)   # the last render's projection
        self._previous: tuple | None = None                # the last inserted frame's surface and camera
        self.xyz = torch.zeros(3, 0)                       # (3, N) world positions, metres
        self.rgb = torch.zeros(0, 3, dtype=torch.uint8)    # (N, 3)
        self.time = torch.zeros(0)                         # (N,) when last seen
        self.tangents = torch.zeros(0, 6, dtype=torch.float16)   # (N, 6) steps to the right and
                                                                 # lower neighbour, world metres
        c = self.config
        self.dome = SkyDome(c.sky_cells_per_degree, c.sky_extend) if c.sky_dome > 0 else None   # the sky, by direction

    def __len__(self) -> int:
        return self.xyz.shape[1]

    @property
    def nbytes(self) -> int:
        """Bytes the points hold (31 a point), and the sky dome's fixed panorama."""
        points = sum(t.numel() * t.element_size() for t in (self.xyz, self.rgb, self.time, self.tangents))
        return points + (self.dome.nbytes if self.dome is not None else 0)

    # -- render -------------------------------------------------------------------------------
    def render(self, K, world_to_camera, H: int, W: int) -> MemoryView:
        """What the memory shows from this camera: ``MemoryView(rgb (3, H, W) float32 in [0, 1],
        coverage (1, H, W), depth (1, H, W), extent (1, H, W))``, all 0 where no point lands. A
        pixel's depth is its z-buffer winner's, and so is its extent (how many pixels that point
        spans now: a surface walked up to from far shows its points magnified); its colour, the
        front surface's points tent-weighted: at the view that inserted them, the pixel's own point
        alone."""
        K, w2c = check_camera(K, world_to_camera)
        H, W = check_size(H, W)
        n = H * W
        rgb, depth, coverage, extent = torch.zeros(n, 3), torch.zeros(n), torch.zeros(n), torch.zeros(n)
        cand = splat_candidates(self.xyz, self.tangents, self.config, K, w2c, H, W, blend=True) if len(self) else None
        self._last = ((K, w2c, H, W, self._version), cand)
        if cand is not None:
            front = front_surface(cand, n, self.config.depth_tolerance)
            self._last = (self._last[0], cand, front)
            hit = front.index >= 0
            tent = self.config.tent
            if tent == 0:                   # the winner's colour alone
                won = front.index.clamp(min=0)
                rgb = torch.where(hit[:, None], self.rgb.index_select(0, won).float() / 255, torch.zeros(()))
            else:
                b = front.band.nonzero().squeeze(1)
                on = lambda x: x.index_select(0, b)                             # noqa: E731
                # (radius at least tent_min_radius: the sub-pixel points in a pixel are averaged; less
                # 5%: a neighbour one pixel away at the inserting view weighs nothing, though a
                # one-sided step on a slanted surface projects to a little more than one pixel)
                r0 = self.config.tent_min_radius
                rx, ry = (on(cand.rx) * tent).clamp(min=r0), (on(cand.ry) * tent).clamp(min=r0)
                w = (0.95 - on(cand.ex) / rx).clamp(min=0) * (0.95 - on(cand.ey) / ry).clamp(min=0)
                w = torch.where(on(cand.covers) & (w == 0), torch.full_like(w, 1e-6), w)
                pix = on(cand.pix)
                total = torch.zeros(n).index_add_(0, pix, w)
                rgb.index_add_(0, pix, w[:, None] * self.rgb.index_select(0, on(cand.point)).float())
                rgb = torch.where(hit[:, None], rgb / (255 * total.clamp(min=1e-30))[:, None], torch.zeros(()))
            depth, coverage, extent = front.depth, hit.float(), front.extent
        holes = (coverage == 0).nonzero().squeeze(1) if self.dome is not None else None
        if holes is not None and len(holes):          # the sky where no point covers, this far away
            sky_rgb, sky_covered = self.dome.render(K, w2c, H, W, pixels=holes)     # (0 off the holes)
            fill = sky_covered.reshape(-1) > 0
            rgb = torch.where(fill[:, None], sky_rgb.reshape(3, -1).T, rgb)
            depth = torch.where(fill, torch.full_like(depth, self.config.sky_dome), depth)
            coverage = torch.where(fill, torch.ones_like(coverage), coverage)
        return MemoryView(rgb.T.reshape(3, H, W), coverage.reshape(1, H, W), depth.reshape(1, H, W),
                          extent.reshape(1, H, W))

    # -- insert and evict ---------------------------------------------------------------------
    def insert(self, rgb, depth, K, world_to_camera, time: float, see_through: torch.Tensor | None = None,
               observed: bool = True) -> int:
        """Add a frame: ``rgb`` (H, W, 3) or (3, H, W), uint8 or floats in [0, 1]; ``depth`` (H, W)
        metres along the view axis (0 = background, not stored); ``K`` (3, 3); ``world_to_camera``
        (4, 4); ``time`` when it was seen (frames or seconds: ``max_age``'s unit). ``see_through``
        (H, W) bool: the pixels whose view may remove points (default: all if the config's
        ``see_through``, else none). With ``sky_dome``, depths at or beyond it are sky: they go
        into the dome (its cells not seen yet; with ``sky_extend``, only from an ``observed``
        frame: a generated frame's sky is a guess where the dome already extends what was
        seen), not into points. Returns how many points were
        added (module docstring: what is not added again, what is removed)."""
        rgb, depth = check_frame(rgb, depth)
        K, w2c = check_camera(K, world_to_camera)
        if self.dome is not None:
            beyond = depth >= self.config.sky_dome
            if observed or not self.config.sky_extend:
                self.dome.insert(rgb, beyond, K, w2c)
            depth = torch.where(beyond, torch.zeros_like(depth), depth)
        time = float(torch.as_tensor(time, dtype=torch.float64))
        if not torch.isfinite(torch.tensor(time)):
            raise ValueError(f"time: must be finite, got {time!r}")
        c = self.config
        H, W = depth.shape
        d, colours = depth.reshape(-1), rgb.reshape(-1, 3)
        new = d > c.near
        trusted = torch.zeros(H * W, dtype=torch.bool)    # added without a second view
        slope = depth_slope(depth)
        last = self._last
        if last[0][2:] == (H, W, self._version) and torch.equal(last[0][0], K) and torch.equal(last[0][1], w2c):
            cand, front = last[1], last[-1]         # rendered here just now (play renders, then inserts)
        else:
            cand = splat_candidates(self.xyz, self.tangents, self.config, K, w2c, H, W, blend=False) if len(self) else None
            front = front_surface(cand, H * W, self.config.depth_tolerance) if cand is not None else None
        if cand is not None:
            # a covering point at the pixel's depth (a slope's worth of slack) matches it; the
            # memory knows the pixel if one lies in its own area (a neighbour's splat reaching
            # in is not knowledge of it: that leaves cracks between frames' strips)
            at_pix = lambda x: x.index_select(0, cand.pix)                     # noqa: E731
            chosen = lambda mask, x: x.index_select(0, mask.nonzero().squeeze(1))  # noqa: E731
            slack = at_pix(c.depth_tolerance * d + slope.reshape(-1))
            dc = at_pix(d)
            match = cand.covers & ((cand.z - dc).abs() <= slack) & (dc > c.near)
            fine = match & (cand.extent <= 1.5 * c.stride)                # ... finely enough
            inside = torch.maximum(cand.ex, cand.ey) <= 0.5 * cand.extent.clamp(min=1.0)
            known = torch.zeros(H * W, dtype=torch.bool).index_fill_(0, chosen(fine & inside, cand.pix), True)
            coarse = match & ~fine & ~at_pix(known)                       # replaced by finer points
            trusted.index_fill_(0, chosen(coarse | (fine & ~inside), cand.pix), True)   # (the memory confirms them)
            self.time.index_fill_(0, chosen(fine, cand.point), time)
            gone = [chosen(coarse, cand.point)]
            if c.replace:       # the new sample replaces the matching points not finer than itself
                finer = torch.zeros(H * W, dtype=torch.bool).index_fill_(0, cand.pix[fine & (cand.extent < 0.7)], True)
                swap = fine & ~finer[cand.pix]
                gone.append(cand.point[swap])
                refreshed = torch.zeros(H * W, dtype=torch.bool).index_fill_(0, cand.pix[swap], True)
                known &= ~refreshed
                trusted |= refreshed
            # seen through: a point in front of what this view sees all around its pixel is gone
            far = torch.where(depth > 0, depth, torch.full_like(depth, float("inf")))
            around = -torch.nn.functional.max_pool2d(-far[None, None], 3, 1, 1).reshape(-1)
            hit = front.index >= 0
            past = hit & front.own & (front.depth < around * (1 - c.depth_tolerance))
            if see_through is not None:
                mask = torch.as_tensor(see_through, dtype=torch.bool)
                if mask.shape != (H, W):
                    raise ValueError(f"see_through: expected a ({H}, {W}) mask, got {tuple(mask.shape)}")
                gone.append(chosen(past & mask.reshape(-1), front.index))
            elif c.see_through:
                gone.append(chosen(past, front.index))
            gone = torch.cat(gone)
            new &= ~known
        else:
            gone = torch.zeros(0, dtype=torch.long)
        if c.stride > 1:
            grid = torch.zeros(H, W, dtype=torch.bool)
            grid[::c.stride, ::c.stride] = True
            new &= grid.reshape(-1)
        n = len(self)
        surface = depth_surface(depth, K)
        added = self._add(colours, surface, new, trusted, w2c, time) if new.any() else 0
        self._previous = (surface, K, w2c)
        self._evict(w2c, time, torch.ones(n + added, dtype=torch.bool).index_fill_(0, gone, False))
        return added

    def _add(self, colours, surface, new, trusted, w2c, time) -> int:
        """Lift the ``new`` pixels (flat mask over H * W) of ``surface`` (``depth_surface``) to
        world points with their steps; with ``confirm``, only those ``trusted`` or the previous
        frame saw in the same place. Returns how many were added."""
        cam, right, down = (x.reshape(3, -1) for x in surface)
        i = new.nonzero().squeeze(1)
        R, t = w2c[:3, :3], w2c[:3, 3:]
        world = R.T @ (cam.index_select(1, i) - t)
        if self.config.confirm and self._previous is not None:
            ok = (trusted.index_select(0, i) | self._confirmed(world)).nonzero().squeeze(1)
            i, world = i.index_select(0, ok), world.index_select(1, ok)
        if len(i) == 0:
            return 0
        steps = torch.cat([R.T @ right.index_select(1, i), R.T @ down.index_select(1, i)]) * self.config.stride
        self._version += 1
        self.xyz = torch.cat([self.xyz, world.float()], 1)
        self.rgb = torch.cat([self.rgb, colours.index_select(0, i)])
        self.time = torch.cat([self.time, torch.full((len(i),), time)])
        self.tangents = torch.cat([self.tangents, steps.T.to(torch.float16)])
        return len(i)

    def _confirmed(self, world: torch.Tensor) -> torch.Tensor:
        """(n,) bool: the world points (3, n) lie on what the previous frame saw: inside its view,
        within its pixel's patch (the two steps' length) of the point it saw there. A body that
        moved more than a pixel or two since is not."""
        (cam, right, down), K, w2c = self._previous
        H, W = cam.shape[1:]
        p = w2c[:3, :3] @ world + w2c[:3, 3:]
        z = -p[2]
        inv = 1 / z.clamp(min=self.config.near)
        x = (K[0, 0] * p[0] * inv + K[0, 2]).floor()
        y = (-K[1, 1] * p[1] * inv + K[1, 2]).floor()
        inside = (z > self.config.near) & (x >= 0) & (x < W) & (y >= 0) & (y < H)
        at = (y.clamp(0, H - 1) * W + x.clamp(0, W - 1)).long()
        seen = cam.reshape(3, -1)[:, at]
        reach = ((right.reshape(3, -1)[:, at] ** 2).sum(0).sqrt() + (down.reshape(3, -1)[:, at] ** 2).sum(0).sqrt())
        return inside & (-seen[2] > self.config.near) & (((p - seen) ** 2).sum(0) <= reach ** 2)

    def evict(self, world_to_camera, time: float) -> int:
        """Drop points older than ``max_age`` or farther than ``max_distance`` from this camera,
        then the oldest-and-farthest beyond ``max_points``; returns how many went."""
        return self._evict(check_view(world_to_camera), time, torch.ones(len(self), dtype=torch.bool))

    def _evict(self, w2c: torch.Tensor, time: float, keep: torch.Tensor) -> int:
        """``evict``, with the points ``keep`` (N,) bool does not hold dropped too: one compaction."""
        n, c = len(self), self.config
        if n == 0:
            return 0
        eye = (-w2c[:3, :3].T @ w2c[:3, 3]).float()
        d = self.xyz - eye[:, None]
        distance = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt()       # (not .norm(dim=0): 60x slower)
        age = float(time) - self.time
        keep &= (age <= c.max_age) & (distance <= c.max_distance)
        if int(keep.sum()) > c.max_points:
            score = torch.where(keep, age / c.max_age + distance / c.max_distance, torch.full_like(age, float("inf")))
            keep = torch.zeros(n, dtype=torch.bool)
            keep[torch.topk(score, c.max_points, largest=False, sorted=False).indices] = True
        if not keep.all():
            i = keep.nonzero().squeeze(1)
            self._version += 1
            self.xyz, self.tangents = self.xyz.index_select(1, i), self.tangents.index_select(0, i)
            self.rgb, self.time = self.rgb.index_select(0, i), self.time.index_select(0, i)
        return n - len(self)

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

Render: every point is splatted as a square of half-width ``footprint * rho`` pixels, ``rho``
its size now over its size when inserted (1 at the inserting view, > 1 when walked up to), so the
same view has no pinholes and no point spills onto its neighbours. Visibility is two scatters:
the nearest depth per pixel, then, among the splats within ``depth_tolerance`` of it (one
surface), the one whose centre is nearest the pixel's centre. Points behind the camera or nearer
than ``near`` are not drawn.

Insert: the memory is first rendered at the new view. A pixel whose surface the memory already
shows (depth within tolerance, at no coarser scale than 1.5 pixels) is not added again: its point
takes the new colour and time if the point lies in that pixel. A memory point seen in front of
where the new frame sees its whole 3x3 neighbourhood is gone (a body that moved) and is removed.
Every other pixel with depth > 0 becomes a point. So standing still adds nothing, and walking
adds what came into view.

Bounded: after each insert, points older than ``max_age`` or farther than ``max_distance`` from
the inserting camera are dropped, and beyond ``max_points`` those with the largest
``age / max_age + distance / max_distance`` go first (the oldest and farthest).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch


@dataclass
class SceneMemoryConfig:
    max_points: int = 200_000      # capacity; 23 bytes a point (docs/world.md, "Scene memory")
    max_distance: float = 40.0     # metres from the inserting camera beyond which points go
    max_age: float = 1800.0        # in the caller's time unit (frames: 1 minute at 30 FPS)
    footprint: float = 0.75        # splat half-width in pixels at the inserting view's scale
    max_footprint: int = 4         # the widest splat, in pixels either side
    depth_tolerance: float = 0.05  # relative depth within which two samples are one surface
    near: float = 0.05             # metres; nearer (or behind the camera) is not drawn
    stride: int = 1                # insert every stride-th pixel each way (points grow to match)
    recolour: float = 0.2          # a point seen again takes the new colour only if it differs by more

    def __post_init__(self) -> None:
        for name in ("max_points", "max_footprint", "stride"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)!r}")
        if not 0 <= self.recolour <= 1:
            raise ValueError(f"recolour: must be in [0, 1], got {self.recolour!r}")
        for name in ("max_distance", "max_age", "footprint", "depth_tolerance", "near"):
            if not float(getattr(self, name)) > 0:
                raise ValueError(f"{name}: must be > 0, got {getattr(self, name)!r}")


class MemoryView(NamedTuple):
    rgb: torch.Tensor        # (3, H, W) float32 in [0, 1], 0 where not covered
    coverage: torch.Tensor   # (1, H, W) float32, 1 where a memory point is drawn
    depth: torch.Tensor      # (1, H, W) float32 metres along the view axis, 0 where not covered


class _Splats(NamedTuple):
    """The winning point of every pixel of one view."""
    index: torch.Tensor      # (H * W,) int64 point index, -1 where none
    depth: torch.Tensor      # (H * W,) float32, 0 where none
    own: torch.Tensor        # (H * W,) bool: the winner's centre lies in this pixel
    rho: torch.Tensor        # (H * W,) float32: the winner's size now over when inserted
    colour: torch.Tensor     # (H * W, 3) float32 in [0, 1] (``blend`` only), 0 where none


# -- checking the arguments -------------------------------------------------------------------

def _tensor(value, name: str, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    try:
        t = torch.as_tensor(value.copy() if hasattr(value, "flags") and not value.flags.writeable else value)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{name}: not an array ({err})") from None
    if shape is not None and tuple(t.shape) != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {tuple(t.shape)}")
    if t.dtype == torch.bool or t.is_complex():
        raise ValueError(f"{name}: expected real numbers, got {t.dtype}")
    if t.is_floating_point() and not torch.isfinite(t).all():
        raise ValueError(f"{name}: NaN or inf")
    return t


def check_camera(K, world_to_camera) -> tuple[torch.Tensor, torch.Tensor]:
    """(K, world_to_camera) as float64 tensors, or ValueError naming the bad one."""
    K = _tensor(K, "K", (3, 3)).double()
    if not (K[0, 0] > 0 and K[1, 1] > 0):
        raise ValueError(f"K: focal lengths fx, fy must be > 0, got {K[0, 0].item():g}, {K[1, 1].item():g}")
    if not torch.equal(K[2], K.new_tensor([0.0, 0.0, 1.0])):
        raise ValueError(f"K: last row must be (0, 0, 1), got {K[2].tolist()}")
    return K, check_view(world_to_camera)


def check_view(world_to_camera) -> torch.Tensor:
    """world_to_camera as a float64 tensor, or ValueError naming it."""
    m = _tensor(world_to_camera, "world_to_camera", (4, 4)).double()
    R = m[:3, :3]
    if ((m[3] - m.new_tensor([0.0, 0.0, 0.0, 1.0])).abs().max() > 1e-6
            or (R @ R.T - torch.eye(3, dtype=m.dtype)).abs().max() > 1e-3 or torch.det(R) <= 0):
        raise ValueError("world_to_camera: not a rigid view matrix (rotation orthonormal with "
                         "det > 0, last row 0 0 0 1)")
    return m


def _check_frame(rgb, depth) -> tuple[torch.Tensor, torch.Tensor]:
    """rgb -> (H, W, 3) uint8, depth -> (H, W) float32; ValueError naming the bad argument."""
    depth = _tensor(depth, "depth")
    if depth.ndim != 2 or depth.shape[0] < 1 or depth.shape[1] < 1:
        raise ValueError(f"depth: expected shape (H, W), got {tuple(depth.shape)}")
    if not depth.is_floating_point():
        depth = depth.float()
    if (depth < 0).any():
        raise ValueError("depth: negative values (0 marks background)")
    H, W = depth.shape
    rgb = _tensor(rgb, "rgb")
    if tuple(rgb.shape) == (H, W, 3):
        pass
    elif tuple(rgb.shape) == (3, H, W):
        rgb = rgb.permute(1, 2, 0)
    else:
        raise ValueError(f"rgb: expected (H, W, 3) or (3, H, W) with depth's (H, W) = ({H}, {W}), "
                         f"got {tuple(rgb.shape)}")
    if rgb.dtype != torch.uint8:
        if not rgb.is_floating_point():
            raise ValueError(f"rgb: expected uint8 or floats in [0, 1], got {rgb.dtype}")
        rgb = (rgb.float().clamp(0, 1) * 255).round().to(torch.uint8)
    return rgb.contiguous(), depth.float().contiguous()


def _size(H: int, W: int) -> tuple[int, int]:
    for name, v in (("H", H), ("W", W)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ValueError(f"{name}: expected a positive integer, got {v!r}")
    return int(H), int(W)


# -- the memory -------------------------------------------------------------------------------

class SceneMemory:
    """A bounded cloud of coloured points in world space; see the module docstring."""

    def __init__(self, config: SceneMemoryConfig | None = None) -> None:
        self.config = config or SceneMemoryConfig()
        self.clear()

    def clear(self) -> None:
        self.xyz = torch.zeros(3, 0)                       # (3, N) world positions, metres
        self.rgb = torch.zeros(0, 3, dtype=torch.uint8)    # (N, 3)
        self.time = torch.zeros(0)                         # (N,) when last seen
        self.size = torch.zeros(0)                         # (N,) metres a pixel spanned when inserted

    def __len__(self) -> int:
        return self.xyz.shape[1]

    @property
    def nbytes(self) -> int:
        """Bytes the points hold (23 a point)."""
        return sum(t.numel() * t.element_size() for t in (self.xyz, self.rgb, self.time, self.size))

    # -- render -------------------------------------------------------------------------------
    def _splat(self, K: torch.Tensor, w2c: torch.Tensor, H: int, W: int, blend: bool = False) -> _Splats:
        """Project every point and keep, per pixel, the z-buffer's winner; with ``blend`` also the
        colour and depth of the front surface's points nearby, tent-weighted (module docstring)."""
        c = self.config
        n_pix = H * W
        none = _Splats(torch.full((n_pix,), -1, dtype=torch.long), torch.zeros(n_pix),
                       torch.zeros(n_pix, dtype=torch.bool), torch.zeros(n_pix), torch.zeros(n_pix, 3))
        if len(self) == 0:
            return none
        p = w2c[:3, :3].float() @ self.xyz + w2c[:3, 3:].float()          # (3, N) camera space
        z = -p[2]
        fx, fy, cx, cy = (float(v) for v in (K[0, 0], K[1, 1], K[0, 2], K[1, 2]))
        ok = z > c.near
        zs = torch.where(ok, z, torch.ones_like(z))
        u, v = fx * p[0] / zs + cx, -fy * p[1] / zs + cy
        rho = self.size * (fx * fy) ** 0.5 / zs                          # pixels the point spans now
        h = (c.footprint * rho).clamp(max=c.max_footprint)               # covers: half-width, pixels
        r = rho.clamp(1.0, c.max_footprint) if blend else h              # blends: tent radius
        ok &= (u > -r) & (u < W + r) & (v > -r) & (v < H + r)
        idx = ok.nonzero().squeeze(1)
        if len(idx) == 0:
            return none
        u, v, z, h, r = u[idx], v[idx], z[idx], h[idx], r[idx]
        px, py = u.floor().long(), v.floor().long()
        found: list[list[torch.Tensor]] = [[] for _ in range(6)]         # pixel, point, z, ex, ey, covers
        for k in range(0, int(r.max().ceil().item()) + 1):                # rings of Chebyshev radius k
            sel = (r > k - 0.5).nonzero().squeeze(1) if k else torch.arange(len(idx))
            for dx, dy in [(dx, dy) for dx in range(-k, k + 1) for dy in range(-k, k + 1)
                           if max(abs(dx), abs(dy)) == k]:
                qx, qy = px[sel] + dx, py[sel] + dy
                ex, ey = (qx + 0.5 - u[sel]).abs(), (qy + 0.5 - v[sel]).abs()
                e = torch.maximum(ex, ey)
                m = (qx >= 0) & (qx < W) & (qy >= 0) & (qy < H) & ((e < r[sel]) | (e <= h[sel]) | (k == 0))
                for out, x in zip(found, ((qy * W + qx), sel, z[sel], ex, ey, (e <= h[sel]) | (k == 0))):
                    out.append(x[m])
        pix, pts, zz, ex, ey, covers = (torch.cat(x) for x in found)
        # the front surface: within depth_tolerance of the nearest covering point
        zmin = torch.full((n_pix,), float("inf")).scatter_reduce_(0, pix[covers], zz[covers], "amin")
        band = (zz - zmin[pix]).abs() <= zmin[pix] * c.depth_tolerance    # never where nothing covers
        pix, pts, zz, ex, ey, covers = pix[band], pts[band], zz[band], ex[band], ey[band], covers[band]
        # the winner: the covering point nearest the centre; key = (distance in 1/1024 px) << 32 | point
        key = ((torch.maximum(ex, ey) * 1024).long() << 32) | pts
        best = torch.full((n_pix,), torch.iinfo(torch.long).max).scatter_reduce_(
            0, pix[covers], key[covers], "amin")
        hit = best != torch.iinfo(torch.long).max
        win = best[hit] & 0xFFFFFFFF
        index, depth, own, rho_out, colour = none
        index[hit] = idx[win]
        depth[hit] = z[win]
        own[hit] = (best[hit] >> 32) < 512                               # centre within 0.5 px
        rho_out[hit] = rho[idx[win]]
        if blend:   # a tent of radius max(rho, 1): at the inserting view, each pixel's own point alone
            w = (1 - ex / r[pts]).clamp(min=0) * (1 - ey / r[pts]).clamp(min=0)
            w = torch.where(covers & (w == 0), torch.full_like(w, 1e-6), w)
            total = torch.zeros(n_pix).index_add_(0, pix, w)
            colour.index_add_(0, pix, w[:, None] * self.rgb[idx[pts]].float())
            colour[hit] /= 255 * total[hit, None]
            colour[~hit] = 0
            depth = torch.zeros(n_pix).index_add_(0, pix, w * zz)
            depth[hit] /= total[hit]
            depth[~hit] = 0
        return _Splats(index, depth, own, rho_out, colour)

    def render(self, K, world_to_camera, H: int, W: int) -> MemoryView:
        """What the memory shows from this camera: ``MemoryView(rgb (3, H, W) float32 in [0, 1],
        coverage (1, H, W), depth (1, H, W))``, all 0 where no point lands."""
        K, w2c = check_camera(K, world_to_camera)
        H, W = _size(H, W)
        s = self._splat(K, w2c, H, W, blend=True)
        return MemoryView(s.colour.T.reshape(3, H, W), (s.index >= 0).float().reshape(1, H, W),
                          s.depth.reshape(1, H, W))

    # -- insert and evict ---------------------------------------------------------------------
    def insert(self, rgb, depth, K, world_to_camera, time: float) -> int:
        """Add a frame: ``rgb`` (H, W, 3) or (3, H, W), uint8 or floats in [0, 1]; ``depth`` (H, W)
        metres along the view axis (0 = background, not stored); ``K`` (3, 3); ``world_to_camera``
        (4, 4); ``time`` when it was seen (frames or seconds: ``max_age``'s unit). Returns how
        many points were added (module docstring: what is not added again, what is removed)."""
        rgb, depth = _check_frame(rgb, depth)
        K, w2c = check_camera(K, world_to_camera)
        time = float(torch.as_tensor(time, dtype=torch.float64))
        if not torch.isfinite(torch.tensor(time)):
            raise ValueError(f"time: must be finite, got {time!r}")
        c = self.config
        H, W = depth.shape
        self.evict(w2c, time)
        d = depth.reshape(-1)
        new = d > c.near
        s = self._splat(K, w2c, H, W)
        hit = s.index >= 0
        if hit.any():
            slope = _slope(depth).reshape(-1)
            same = hit & new & ((s.depth - d).abs() <= c.depth_tolerance * d + slope) & (s.rho <= 1.5)
            refresh = same & s.own
            self.time[s.index[refresh]] = time
            seen_rgb, kept = rgb.reshape(-1, 3)[refresh], self.rgb[s.index[refresh]]
            changed = (seen_rgb.float() - kept.float()).abs().mean(1) > 255 * c.recolour
            self.rgb[s.index[refresh][changed]] = seen_rgb[changed]
            far = torch.where(depth > 0, depth, torch.full_like(depth, float("inf")))
            seen = -torch.nn.functional.max_pool2d(-far[None, None], 3, 1, 1).reshape(-1)
            stale = hit & s.own & (s.depth < seen * (1 - c.depth_tolerance))
            if stale.any():
                self._keep(torch.ones(len(self), dtype=torch.bool).index_fill_(0, s.index[stale], False))
            new &= ~same
        if c.stride > 1:
            grid = torch.zeros(H, W, dtype=torch.bool)
            grid[::c.stride, ::c.stride] = True
            new &= grid.reshape(-1)
        added = int(new.sum())
        if added:
            self._add(rgb.reshape(-1, 3)[new], d, new, K, w2c, H, W, time)
        self.evict(w2c, time)
        return added

    def _add(self, colours, d, new, K, w2c, H, W, time) -> None:
        """Lift the ``new`` pixels (flat mask over H * W) of depth ``d`` to world points."""
        i = new.nonzero().squeeze(1)
        u, v, d = (i % W).double() + 0.5, (i // W).double() + 0.5, d[i].double()
        cam = torch.stack([(u - K[0, 2]) / K[0, 0] * d, -(v - K[1, 2]) / K[1, 1] * d, -d])   # (3, n)
        R, t = w2c[:3, :3], w2c[:3, 3:]
        world = (R.T @ (cam - t)).float()
        size = (d * self.config.stride / (K[0, 0] * K[1, 1]).sqrt()).float()
        self.xyz = torch.cat([self.xyz, world], 1)
        self.rgb = torch.cat([self.rgb, colours])
        self.time = torch.cat([self.time, torch.full((len(i),), time)])
        self.size = torch.cat([self.size, size])

    def _keep(self, keep: torch.Tensor) -> None:
        self.xyz, self.rgb, self.time, self.size = (self.xyz[:, keep], self.rgb[keep], self.time[keep],
                                                    self.size[keep])

    def evict(self, world_to_camera, time: float) -> int:
        """Drop points older than ``max_age`` or farther than ``max_distance`` from this camera,
        then the oldest-and-farthest beyond ``max_points``; returns how many went."""
        w2c = check_view(world_to_camera)
        n, c = len(self), self.config
        if n == 0:
            return 0
        eye = (-w2c[:3, :3].T @ w2c[:3, 3]).float()
        distance = (self.xyz - eye[:, None]).norm(dim=0)
        age = float(time) - self.time
        keep = (age <= c.max_age) & (distance <= c.max_distance)
        if int(keep.sum()) > c.max_points:
            score = torch.where(keep, age / c.max_age + distance / c.max_distance, torch.full_like(age, float("inf")))
            keep = torch.zeros(n, dtype=torch.bool)
            keep[torch.topk(score, c.max_points, largest=False, sorted=False).indices] = True
        if not keep.all():
            self._keep(keep)
        return n - len(self)


def _slope(depth: torch.Tensor) -> torch.Tensor:
    """(H, W) depth change to the next pixel along the surface: per axis the smaller of the two
    neighbours' differences (a one-sided edge does not count), the larger axis."""
    p = torch.nn.functional.pad(depth[None, None], (1, 1, 1, 1), mode="replicate")[0, 0]
    dx = torch.minimum((p[1:-1, 2:] - depth).abs(), (p[1:-1, :-2] - depth).abs())
    dy = torch.minimum((p[2:, 1:-1] - depth).abs(), (p[:-2, 1:-1] - depth).abs())
    return torch.maximum(dx, dy)

"""The scene memory's splats (``alaya.models.scene_memory``): every point projected into a view
with the pixels its footprint covers and its colour tent reaches (``splat_candidates``), and the
z-buffer over them (``front_surface``). Pure functions of the points and the camera.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from alaya.models.memory_geometry import pixel_ring


class Candidates(NamedTuple):
    """Every (pixel, point) pair a splat reaches in one view, flat."""
    pix: torch.Tensor        # (C,) int64 pixel index y * W + x
    point: torch.Tensor      # (C,) int64 memory index
    z: torch.Tensor          # (C,) float32 the point's depth
    ex: torch.Tensor         # (C,) |pixel centre - point| along x, pixels
    ey: torch.Tensor         # (C,) ... along y
    covers: torch.Tensor     # (C,) bool: within the splat's footprint (else only blended from)
    extent: torch.Tensor     # (C,) float32 the point's larger projected side now, pixels
    rx: torch.Tensor         # (C,) float32 tent half-width along x, pixels
    ry: torch.Tensor         # (C,) ... along y


class Front(NamedTuple):
    """Per pixel, the z-buffer's winner: the covering point of the front surface nearest the centre."""
    index: torch.Tensor      # (H * W,) int64 point index, -1 where none
    depth: torch.Tensor      # (H * W,) float32, 0 where none
    own: torch.Tensor        # (H * W,) bool: the winner's centre lies in this pixel
    band: torch.Tensor       # (C,) bool: the candidate is on the front surface
    extent: torch.Tensor     # (H * W,) float32 the winner's larger projected side now, pixels; 0 where none


CORNERS = torch.tensor([[0., 0.], [1., 0.], [0., 1.], [1., 1.]])     # the 2x2 pixels around a sub-pixel point


def splat_candidates(xyz: torch.Tensor, tangents: torch.Tensor, c, K: torch.Tensor, w2c: torch.Tensor,
                     H: int, W: int, blend: bool) -> Candidates | None:
    """Project every point (``xyz`` (3, N) world, ``tangents`` (N, 6) its steps) with the memory's
    config ``c``; list the pixels each splat covers and, with ``blend``, those its tent reaches
    (``scene_memory``'s docstring). None if no point lands."""
    R, t = w2c[:3, :3].float(), w2c[:3, 3:].float()
    fx, fy, cx, cy = (float(v) for v in (K[0, 0], K[1, 1], K[0, 2], K[1, 2]))
    p = R @ xyz + t                                              # (3, N) camera space
    depth = -p[2]
    inv = 1 / depth.clamp(min=c.near)
    u, v = fx * p[0] * inv + cx, -fy * p[1] * inv + cy
    m = c.max_footprint
    idx = ((depth > c.near) & (u > -m) & (u < W + m) & (v > -m) & (v < H + m)).nonzero().squeeze(1)
    if len(idx) == 0:
        return None
    p = p.index_select(1, idx)
    depth, inv, u, v = (x.index_select(0, idx) for x in (depth, inv, u, v))
    # where the neighbours' steps land: the projected parallelogram's bounding box, pixels
    sx, sy = torch.zeros_like(u), torch.zeros_like(u)
    steps = tangents.index_select(0, idx).float().T             # (6, n) (rows: a fast gather)
    for step in (steps[:3], steps[3:]):
        q = p + R @ step
        iq = 1 / (-q[2]).clamp(min=c.near)
        sx += (fx * q[0] * iq + cx - u).abs()
        sy += (-fy * q[1] * iq + cy - v).abs()
    hx, hy = (c.footprint * sx).clamp(max=m), (c.footprint * sy).clamp(max=m)
    if blend:   # the tent reaches as far as the point spans; sub-pixel points (seen from
        # farther than they were inserted) reach their own pixel only
        rx, ry = torch.maximum(sx.clamp(max=m), hx), torch.maximum(sy.clamp(max=m), hy)
    else:
        rx, ry = hx, hy
    extent = torch.maximum(sx, sy)
    reach = torch.maximum(rx, ry)
    found: list[list[torch.Tensor]] = [[] for _ in range(5)]         # pixel, point, ex, ey, covers

    def take(sel: torch.Tensor, qx: torch.Tensor, qy: torch.Tensor, own: torch.Tensor | bool) -> None:
        """Keep the pixels (qx, qy) (n, R) (whole numbers as floats) that the points ``sel`` (n,) cover or reach."""
        at = lambda x: x.index_select(0, sel)[:, None]                  # noqa: E731
        ex, ey = (qx - at(u)).add_(0.5).abs_(), (qy - at(v)).add_(0.5).abs_()
        covers = (ex <= at(hx)) & (ey <= at(hy))
        if own is not False:
            covers = covers | own
        keep = (covers | ((ex < at(rx)) & (ey < at(ry)))).logical_and_(qx >= 0).logical_and_(qx < W)
        keep = keep.logical_and_(qy >= 0).logical_and_(qy < H)
        flat = keep.view(-1).nonzero().squeeze(1)                       # one nonzero, then takes
        n = qx.shape[1]
        found[0].append((qy.reshape(-1).index_select(0, flat) * W + qx.reshape(-1).index_select(0, flat)).long())
        found[1].append(sel.index_select(0, flat // n))
        for out, x in zip(found[2:], (ex, ey, covers)):
            out.append(x.reshape(-1).index_select(0, flat))

    # most points reach no farther than a pixel: the 2x2 pixels around them (their own one of them)
    is_small = reach <= 1
    small = is_small.nonzero().squeeze(1)
    us, vs = u.index_select(0, small), v.index_select(0, small)
    qx = (us - 0.5).floor()[:, None] + CORNERS[:, 0]
    qy = (vs - 0.5).floor()[:, None] + CORNERS[:, 1]
    take(small, qx, qy, (qx == us.floor()[:, None]) & (qy == vs.floor()[:, None]))
    # the others: square rings of Chebyshev radius k around their own pixel
    large = (~is_small).nonzero().squeeze(1)
    reach_large = reach.index_select(0, large)
    px, py = u.index_select(0, large).floor(), v.index_select(0, large).floor()
    for k in range(int(reach_large.max().ceil().item()) + 1 if len(large) else 0):
        sel = (reach_large > k - 0.5).nonzero().squeeze(1)
        o = pixel_ring(k)                                                # (R, 2)
        take(large.index_select(0, sel), px.index_select(0, sel)[:, None] + o[:, 0],
             py.index_select(0, sel)[:, None] + o[:, 1], k == 0)
    pix, at, ex, ey, covers = (torch.cat(x) for x in found)
    pick = lambda x: x.index_select(0, at)                              # noqa: E731
    return Candidates(pix, pick(idx), pick(depth), ex, ey, covers, pick(extent), pick(rx), pick(ry))


def front_surface(cand: Candidates, n_pix: int, depth_tolerance: float) -> Front:
    """The z-buffer: the nearest covering depth per pixel, the candidates within
    ``depth_tolerance`` of it (one surface), and among those the covering one nearest the centre."""
    covering = cand.covers.nonzero().squeeze(1)
    zmin = torch.full((n_pix,), float("inf")).scatter_reduce_(
        0, cand.pix.index_select(0, covering), cand.z.index_select(0, covering), "amin")
    zc = zmin.index_select(0, cand.pix)
    band = (cand.z - zc).abs() <= zc * depth_tolerance
    win_ok = (band & cand.covers).nonzero().squeeze(1)
    # key = (distance in 1/1024 px) << 32 | candidate number: the smallest is the winner
    key = ((torch.maximum(cand.ex, cand.ey).index_select(0, win_ok) * 1024).long() << 32) | win_ok
    best = torch.full((n_pix,), torch.iinfo(torch.long).max).scatter_reduce_(
        0, cand.pix.index_select(0, win_ok), key, "amin")
    hit = (best != torch.iinfo(torch.long).max).nonzero().squeeze(1)
    best_hit = best.index_select(0, hit)
    win = best_hit & 0xFFFFFFFF
    index, depth, own = torch.full((n_pix,), -1), torch.zeros(n_pix), torch.zeros(n_pix, dtype=torch.bool)
    index[hit], depth[hit] = cand.point.index_select(0, win), cand.z.index_select(0, win)
    own[hit] = (best_hit >> 32) < 512                                # centre within 0.5 px
    extent = torch.zeros(n_pix)
    extent[hit] = cand.extent.index_select(0, win)
    return Front(index, depth, own, band, extent)

"""What fills the memory's holes before the model refines them (``memory_conditioning.memory_base``'s
hole bases other than the context): the far side of a depth edge (``far_side_fill``), the view
beside a turn's side strip mirrored (``edge_strip_fill``), the memory pulled in smoothly
(``inpaint``); and the padded-window indexing the far fill and ``clean_depth`` share."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

FAR_RADIUS = 4          # far_side_fill's window: 9 x 9 pixels
FAR_EDGE = 1.5          # ... and the disparity ratio across it that makes a depth edge
FAR_BORDER = 8          # holes this near the view's edge are new view, not disocclusions: the context


def padded_windows(index: torch.Tensor, H: int, W: int, radius: int) -> torch.Tensor:
    """(N, (2 radius + 1)^2): for pixels ``index`` (N,) of a flattened (B, H, W) stack, the flat
    indices of their windows in that stack padded by ``radius`` on every side and flattened
    (``F.pad(x, (radius,) * 4).reshape(-1)``)."""
    k, Hp, Wp = 2 * radius + 1, H + 2 * radius, W + 2 * radius
    b, i = index // (H * W), index % (H * W)
    corner = b * Hp * Wp + (i // W) * Wp + i % W                              # each window's top-left, padded
    dy, dx = torch.meshgrid(torch.arange(k), torch.arange(k), indexing="ij")
    return corner[:, None] + (dy * Wp + dx).reshape(-1).to(index.device)


def far_side_fill(known: torch.Tensor, coverage: torch.Tensor, radius: int = FAR_RADIUS,
                  edge: float = FAR_EDGE, border: int = FAR_BORDER) -> tuple[torch.Tensor, torch.Tensor]:
    """For each uncovered pixel of a memory render (``known`` (B, 4, H, W): rgb | disparity,
    ``coverage`` (B, 1, H, W)), the covered pixel of lowest disparity (the farthest surface) in
    its (2 radius + 1)^2 window: (fill (B, 4, H, W), beside_edge (B, 1, H, W) bool), the second
    true on holes whose window holds a depth edge (largest disparity over ``edge`` x the
    smallest), away from the view's edge by ``border`` pixels. Those are the disocclusions: the
    camera moved past a near surface and uncovered what lies behind its edge, which the far side
    continues. Elsewhere there is no side to take: a hole in flat ground, or the strip a turn or
    a strafe brings in at the view's edge, where what comes into view may as well continue the
    near surface (a wall the view turns along). Covered pixels come back 0 / False."""
    B, C, H, W = known.shape
    k, r = 2 * radius + 1, radius
    covered = coverage[:, 0] > 0.5
    u = known[:, 3]
    ok = covered & (u > 0)
    # the window's minimum found separably, each row's over dx, then over dy: the first minimum in
    # the window's row-major order, as a flat search over the window finds it
    near_first = F.pad(torch.where(ok, u, math.inf), (r,) * 4, value=math.inf)      # (B, H + 2r, W + 2r)
    row_farthest, dx = near_first.unfold(2, k, 1).min(3)                             # (B, H + 2r, W)
    farthest, dy = row_farthest.unfold(1, k, 1).min(3)                               # (B, H, W)
    dx = dx.unfold(1, k, 1).gather(3, dy[..., None])[..., 0]
    far_first = F.pad(torch.where(ok, u, 0.0), (r,) * 4)
    nearest = far_first.unfold(2, k, 1).max(3).values.unfold(1, k, 1).max(3).values
    ys = torch.arange(H, device=known.device)[:, None] + dy - r
    xs = torch.arange(W, device=known.device) + dx - r
    inside = ((ys >= 0) & (ys < H) & (xs >= 0) & (xs < W))[:, None]     # a window all padding points outside
    at = (ys.clamp(0, H - 1) * W + xs.clamp(0, W - 1)).reshape(B, 1, H * W)
    fill = known.reshape(B, C, H * W).gather(2, at.expand(B, C, H * W)).reshape(B, C, H, W)
    inner = torch.zeros(H, W, dtype=torch.bool, device=known.device)
    inner[border:H - border, border:W - border] = True
    holes = ((~covered) & inner)[:, None]
    beside_edge = holes & (torch.isfinite(farthest) & (nearest > edge * farthest))[:, None]
    return torch.where(holes & inside, fill, torch.zeros((), dtype=fill.dtype)), beside_edge


def edge_strip_fill(known: torch.Tensor, coverage: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For a memory render (``known`` (B, C, H, W), ``coverage`` (B, 1, H, W)): (fill (B, C, H, W),
    strip (B, 1, H, W) bool). In each row, the uncovered run from the view's left edge up to the
    first covered pixel (the strip a turn or a strafe brings in), and the one from the right
    edge, take the row's covered pixels mirrored across the run's border: the hole pixel d
    columns out from the border takes the pixel d - 1 columns in. The view beside the strip
    continues into it with its texture (a checkered floor stays checkered, a wall a wall) where
    the context's pixel there is the edge's old column drawn out. ``strip`` is false where the
    mirrored pixel is uncovered or past the view (a strip wider than the covered run beside it), in rows
    with nothing covered, and on every covered pixel."""
    B, C, H, W = known.shape
    covered = coverage[:, 0] > 0.5
    col = torch.arange(W, device=known.device).expand(B, H, W)
    first = torch.where(covered, col, torch.full_like(col, W)).min(2, keepdim=True).values
    last = torch.where(covered, col, torch.full_like(col, -1)).max(2, keepdim=True).values
    left, right = (col < first) & (first < W), (col > last) & (last >= 0)
    source = torch.where(left, 2 * first - 1 - col, torch.where(right, 2 * last + 1 - col, col))
    inside = (source >= 0) & (source < W)
    source = source.clamp(0, W - 1)
    fill = known.gather(3, source[:, None].expand(B, C, H, W))
    strip = (left | right) & inside & covered.gather(2, source)
    return fill, strip[:, None]


def inpaint(image: torch.Tensor, coverage: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) with its uncovered pixels (``coverage`` (B, 1, H, W) 0) filled by push-pull:
    coverage-weighted means over a pyramid of 2x2 averages, the finest level that knows a pixel
    giving its value, upsampled bilinearly. Smooth, no stripes; covered pixels unchanged."""
    levels = [(image * coverage, coverage)]
    while min(levels[-1][1].shape[-2:]) > 1:
        v, w = levels[-1]
        levels.append((F.avg_pool2d(v, 2, ceil_mode=True), F.avg_pool2d(w, 2, ceil_mode=True)))
    v, w = levels[-1]
    filled = v / w.clamp(min=1e-8)
    for v, w in reversed(levels[:-1]):
        up = F.interpolate(filled, size=v.shape[-2:], mode="bilinear", align_corners=False)
        filled = torch.where(w > 1e-6, v / w.clamp(min=1e-8), up)
    return torch.where(coverage > 0.5, image, filled)

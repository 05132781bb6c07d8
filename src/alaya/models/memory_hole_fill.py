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
    near surface (a wall the view turns along). Only the holes are searched (a few percent of a
    play frame); covered pixels come back 0 / False."""
    B, C, H, W = known.shape
    r = radius
    covered = coverage[:, 0] > 0.5
    u = known[:, 3]
    ok = covered & (u > 0)
    near_first = F.pad(torch.where(ok, u, torch.full_like(u, math.inf)), (r,) * 4, value=math.inf).reshape(-1)
    far_first = F.pad(torch.where(ok, u, torch.zeros_like(u)), (r,) * 4).reshape(-1)
    values = F.pad(known, (r,) * 4).transpose(0, 1).reshape(C, -1)
    fill = known.new_zeros(C, B * H * W)
    beside_edge = torch.zeros(B * H * W, dtype=torch.bool, device=known.device)
    inner = torch.zeros(H, W, dtype=torch.bool, device=known.device)
    inner[border:H - border, border:W - border] = True
    holes = ((~covered) & inner).reshape(-1).nonzero().squeeze(1)
    if holes.numel():
        window = padded_windows(holes, H, W, r)
        farthest, j = near_first[window].min(1)
        nearest = far_first[window].max(1).values
        fill[:, holes] = values[:, window.gather(1, j[:, None]).squeeze(1)]
        beside_edge[holes] = torch.isfinite(farthest) & (nearest > edge * farthest)
    return (fill.reshape(C, B, H, W).transpose(0, 1),
            beside_edge.reshape(B, 1, H, W))


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

"""Pixel-grid geometry of the scene memory (``alaya.models.scene_memory``): a depth map lifted
to camera-space points with the steps to their neighbours on the same surface
(``depth_surface``), its slope (``depth_slope``), the rings of pixels a wide splat reaches
(``pixel_ring``), and a render's pinholes filled (``fill_pinholes``).
"""

from __future__ import annotations

import functools

import torch


def fill_pinholes(rgb: torch.Tensor, coverage: torch.Tensor, depth: torch.Tensor, passes: int = 2,
                  min_neighbours: int = 5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A render's (rgb (B, 3, H, W), coverage and depth (B, 1, H, W)) pinholes filled: an uncovered
    pixel with at least ``min_neighbours`` of its 8 neighbours covered takes their mean colour and
    depth, ``passes`` times. A memory filled from generated frames is pinholed where a frame's
    depth did not confirm the one before (``confirm``); unfilled, each pinhole is generated anew
    every frame from a context that does not line up with it, and what it guessed bleeds in.
    Pure: new tensors."""
    kernel = torch.ones(1, 1, 3, 3, dtype=rgb.dtype)
    for _ in range(passes):
        cov = (coverage > 0.5).to(rgb.dtype)
        count = torch.nn.functional.conv2d(cov, kernel, padding=1)
        fill = (cov == 0) & (count >= min_neighbours)
        if not fill.any():
            break
        total = count.clamp(min=1)
        mean_rgb = torch.nn.functional.conv2d((rgb * cov).reshape(-1, 1, *rgb.shape[-2:]), kernel,
                                              padding=1).reshape(rgb.shape) / total
        mean_depth = torch.nn.functional.conv2d(depth * cov, kernel, padding=1) / total
        rgb = torch.where(fill, mean_rgb, rgb)
        depth = torch.where(fill, mean_depth, depth)
        coverage = torch.where(fill, torch.ones_like(coverage), coverage)
    return rgb, coverage, depth


@functools.lru_cache(maxsize=None)
def pixel_ring(k: int) -> torch.Tensor:
    """(R, 2) the pixel offsets at Chebyshev distance ``k``, whole numbers as floats (the splat
    test's pixel indices; cached: read only)."""
    return torch.tensor([(dx, dy) for dx in range(-k, k + 1) for dy in range(-k, k + 1)
                         if max(abs(dx), abs(dy)) == k], dtype=torch.float32).reshape(-1, 2)


def depth_slope(depth: torch.Tensor) -> torch.Tensor:
    """(H, W) depth change to the next pixel along the surface: per axis the smaller of the two
    neighbours' differences (a one-sided edge does not count), the larger axis."""
    p = torch.nn.functional.pad(depth[None, None], (1, 1, 1, 1), mode="replicate")[0, 0]
    dx = torch.minimum((p[1:-1, 2:] - depth).abs(), (p[1:-1, :-2] - depth).abs())
    dy = torch.minimum((p[2:, 1:-1] - depth).abs(), (p[:-2, 1:-1] - depth).abs())
    return torch.maximum(dx, dy)


@functools.lru_cache(maxsize=8)
def _pixel_centres(H: int, W: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(v, u) (H, W) float64 pixel-centre coordinates (cached per size: read only)."""
    return torch.meshgrid(torch.arange(H, dtype=torch.float64) + 0.5,
                          torch.arange(W, dtype=torch.float64) + 0.5, indexing="ij")


def camera_points(depth: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """Camera-space points (3, H, W) float64 of a depth map (H, W) metres along the view axis, GL axes."""
    v, u = _pixel_centres(*depth.shape)
    d = depth.double()
    return torch.stack([(u - K[0, 2]) / K[0, 0] * d, -(v - K[1, 2]) / K[1, 1] * d, -d])


def depth_surface(depth: torch.Tensor, K: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Camera-space points (3, H, W) of a depth map (``camera_points``) and the steps to their
    right and lower neighbours on the same surface (``_step``), float64."""
    cam = camera_points(depth, K)
    pixel = depth.double() / (K[0, 0] * K[1, 1]).sqrt()                               # metres a pixel spans, facing
    return cam, _step(cam, pixel, axis=2, fallback=(1.0, 0.0)), _step(cam, pixel, axis=1, fallback=(0.0, -1.0))


def _step(cam: torch.Tensor, pixel: torch.Tensor, axis: int, fallback: tuple[float, float]) -> torch.Tensor:
    """(3, H, W) camera-space step from each pixel's point to its neighbour's along ``axis`` of
    ``cam`` (3, H, W) (2: right, 1: down): of the two sides the shorter (an edge on one side does
    not count); where even that is longer than 8 facing pixels (both sides off the surface, or
    the sky) the step of a surface facing the camera, ``pixel`` (H, W) long in the ``fallback``
    (x, y) direction."""
    fwd = cam.roll(-1, axis) - cam
    back = cam - cam.roll(1, axis)
    n = cam.shape[axis]
    ends = [slice(None)] * 3
    ends[axis] = n - 1
    fwd[tuple(ends)] = float("inf")                                      # no neighbour past the edge
    ends[axis] = 0
    back[tuple(ends)] = float("inf")
    fl, bl = (fwd ** 2).sum(0), (back ** 2).sum(0)
    step = torch.where(fl <= bl, fwd, back)
    facing = torch.stack([fallback[0] * pixel, fallback[1] * pixel, torch.zeros_like(pixel)])
    bad = ~(torch.minimum(fl, bl) <= (8 * pixel) ** 2)
    return torch.where(bad, facing, step)

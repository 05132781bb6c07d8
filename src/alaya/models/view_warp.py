"""Camera-rotation warps: how a frame looks after the player turns, without knowing any depth.

A pure rotation of a pinhole camera moves every pixel by the homography ``K R K^-1``, whatever
its depth. In the game (``alaya.engine.game``) a ``turn`` / ``pitch`` action rotates the view
by a known angle per frame (``NavigationScale`` rates over the game's frame rate), so the
world model can move its context frames into the new view before it predicts anything
(``WorldModelConfig.view_warp``). What a rotation cannot explain (translation parallax, moving
bodies, what turns into view) is left to the network; ``coverage`` tells it where the warped
frame has no source pixels.

Conventions: camera coordinates are OpenCV's (x right, y down, z forward); ``K`` has its origin
at the top-left pixel's corner (``alaya.engine.raster.intrinsics``); a positive turn turns left
and a positive pitch looks up (``alaya.engine.interactive.InteractiveStream.look``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def pinhole(size: int, fov_y_degrees: float) -> torch.Tensor:
    """K (3, 3) of a square ``size`` image with vertical field of view ``fov_y_degrees``."""
    f = 0.5 * size / math.tan(math.radians(fov_y_degrees) / 2)
    return torch.tensor([[f, 0.0, size / 2], [0.0, f, size / 2], [0.0, 0.0, 1.0]])


def turn_rotation(dyaw: torch.Tensor, dpitch: torch.Tensor) -> torch.Tensor:
    """(B, 3, 3) rotations taking a ray in the new camera's coordinates to the old camera's,
    after turning left by ``dyaw`` and looking up by ``dpitch`` radians (B,). Yaw turns about
    the camera's own up axis: exact at zero pitch, and off by a roll of ``dyaw * sin(pitch)``
    otherwise, which the network corrects."""
    cy, sy = torch.cos(-dyaw), torch.sin(-dyaw)
    cp, sp = torch.cos(dpitch), torch.sin(dpitch)
    one, zero = torch.ones_like(cy), torch.zeros_like(cy)
    yaw = torch.stack([torch.stack([cy, zero, sy], -1), torch.stack([zero, one, zero], -1),
                       torch.stack([-sy, zero, cy], -1)], -2)
    pitch = torch.stack([torch.stack([one, zero, zero], -1), torch.stack([zero, cp, -sp], -1),
                         torch.stack([zero, sp, cp], -1)], -2)
    return yaw @ pitch


def warp_rotation(image: torch.Tensor, rotation: torch.Tensor, K: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """``image`` (B, C, H, W) seen from the rotated camera: (warped, coverage (B, 1, H, W)),
    coverage 1 where the new view sees the old frame and 0 where it sees past its edge (there
    the warped image repeats the edge pixels)."""
    B, _, H, W = image.shape
    ys, xs = torch.meshgrid(torch.arange(H, dtype=image.dtype) + 0.5, torch.arange(W, dtype=image.dtype) + 0.5,
                            indexing="ij")
    pixels = torch.stack([xs, ys, torch.ones_like(xs)], -1).reshape(-1, 3)            # (HW, 3)
    homography = K.to(image) @ rotation.to(image) @ torch.linalg.inv(K.to(image))     # (B, 3, 3)
    src = pixels @ homography.transpose(1, 2)                                         # (B, HW, 3)
    z = src[..., 2:].clamp_min(1e-6)
    uv = src[..., :2] / z
    grid = torch.stack([uv[..., 0] / W * 2 - 1, uv[..., 1] / H * 2 - 1], -1).reshape(B, H, W, 2)
    in_front = (src[..., 2] > 1e-6).reshape(B, 1, H, W).to(image.dtype)
    warped = F.grid_sample(image, grid, mode="bilinear", padding_mode="border", align_corners=False)
    coverage = F.grid_sample(torch.ones(B, 1, H, W, dtype=image.dtype), grid, mode="bilinear",
                             padding_mode="zeros", align_corners=False) * in_front
    return warped, coverage

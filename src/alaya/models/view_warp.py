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


# --- walking: a ground plane under the camera, the rest far away ------------------------------

def camera_rotation(yaw: torch.Tensor, pitch: torch.Tensor) -> torch.Tensor:
    """(B, 3, 3) world -> camera rotations (rows: the camera's right, down and forward axes in
    world coordinates; world z is up) of cameras at ``yaw`` (counter-clockwise from +x) and
    ``pitch`` (up) radians (B,), as the game's camera (``alaya.engine.interactive``)."""
    cy, sy, cp, sp = torch.cos(yaw), torch.sin(yaw), torch.cos(pitch), torch.sin(pitch)
    zero = torch.zeros_like(cy)
    right = torch.stack([sy, -cy, zero], -1)
    forward = torch.stack([cp * cy, cp * sy, sp], -1)
    down = torch.linalg.cross(forward, right)
    return torch.stack([right, down, forward], -2)


def walk_poses(actions: torch.Tensor, pitch: torch.Tensor, turn_rad: float, pitch_rad: float,
               move_metres: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The cameras of frames n-1, n-2, ... relative to frame n's, replayed backwards from the
    action rows (B, K, 8) of frames n, n-1, ... (newest first) as the game plays them: a row turns
    and pitches the camera, then moves it ``move_metres`` per unit of forward / strafe along the
    new heading (diagonals not faster). Frame n sits at the origin with yaw 0 and ``pitch`` (B,)
    radians. Returns yaw (B, K), pitch (B, K) and centre (B, K, 3) of frames n-1-k. Height stays
    constant (terrain and jumps are left to the network)."""
    B, K = actions.shape[:2]
    yaw, pit, centre = torch.zeros(B), pitch.to(torch.float32), torch.zeros(B, 3)
    yaws, pitches, centres = [], [], []
    for k in range(K):
        row = actions[:, k].float()
        walk = row[:, :2]
        walk = walk / walk.norm(dim=1, keepdim=True).clamp_min(1.0)
        c, s = torch.cos(yaw), torch.sin(yaw)
        step = torch.stack([walk[:, 0] * c + walk[:, 1] * s, walk[:, 0] * s - walk[:, 1] * c,
                            torch.zeros(B)], -1)
        centre = centre - move_metres * step
        yaw, pit = yaw - row[:, 2] * turn_rad, pit - row[:, 3] * pitch_rad
        yaws.append(yaw), pitches.append(pit), centres.append(centre)
    return torch.stack(yaws, 1), torch.stack(pitches, 1), torch.stack(centres, 1)


def warp_ground(image: torch.Tensor, K: torch.Tensor, new: torch.Tensor, old: torch.Tensor,
                old_centre: torch.Tensor, eye_height: float, max_distance: float = 60.0
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """``image`` (B, C, H, W), seen by the camera with world -> camera rotation ``old`` (B, 3, 3)
    at ``old_centre`` (B, 3), warped into the camera with rotation ``new`` at the origin, taking
    the scene as a flat floor ``eye_height`` below the new camera (rays that meet it within
    ``max_distance``) and everything else as infinitely far (moved by rotation alone). Exact for
    the floor and the sky; what stands on the floor is left to the network. Returns (warped,
    coverage (B, 1, H, W)) as ``warp_rotation``; with ``old_centre`` zero it is that warp."""
    B, _, H, W = image.shape
    dtype = image.dtype
    ys, xs = torch.meshgrid(torch.arange(H, dtype=dtype) + 0.5, torch.arange(W, dtype=dtype) + 0.5, indexing="ij")
    pixels = torch.stack([xs, ys, torch.ones_like(xs)], -1).reshape(-1, 3)
    K = K.to(dtype)
    rays = pixels @ torch.linalg.inv(K).T @ new.to(dtype)                  # (B, HW, 3): R^T K^-1 p
    down = rays[..., 2]
    depth = -eye_height / torch.where(down < -1e-6, down, torch.full_like(down, -1e-6))
    floor = (down < -1e-6) & (depth * rays.norm(dim=-1) < max_distance)
    point = torch.where(floor[..., None], depth[..., None] * rays - old_centre.to(dtype)[:, None], rays)
    src = point @ (K @ old.to(dtype)).transpose(1, 2)                       # K R_old (X - c_old)
    z = src[..., 2:].clamp_min(1e-6)
    uv = src[..., :2] / z
    grid = torch.stack([uv[..., 0] / W * 2 - 1, uv[..., 1] / H * 2 - 1], -1).reshape(B, H, W, 2)
    in_front = (src[..., 2] > 1e-6).reshape(B, 1, H, W).to(dtype)
    warped = F.grid_sample(image, grid, mode="bilinear", padding_mode="border", align_corners=False)
    coverage = F.grid_sample(torch.ones(B, 1, H, W, dtype=dtype), grid, mode="bilinear",
                             padding_mode="zeros", align_corners=False) * in_front
    return warped, coverage


def view_pitch_degrees(world_to_camera) -> torch.Tensor:
    """Camera pitch (up positive, degrees) of OpenGL view matrices (..., 4, 4) as episodes store
    them (``world_to_camera``: the camera looks down its -z axis; world z is up)."""
    m = torch.as_tensor(world_to_camera, dtype=torch.float64)
    forward_z = -m[..., 2, 2]
    return torch.rad2deg(torch.asin(forward_z.clamp(-1.0, 1.0))).float()

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


def _pixels(H: int, W: int, dtype: torch.dtype) -> torch.Tensor:
    """(3, H * W) homogeneous pixel centres (x + 0.5, y + 0.5, 1), row-major. Points are kept
    coordinates-first, so a transform is one (3, 3) x (3, N) product (a (N, 3) x (3, 3) one is
    much slower on a CPU)."""
    ys, xs = torch.meshgrid(torch.arange(H, dtype=dtype) + 0.5, torch.arange(W, dtype=dtype) + 0.5, indexing="ij")
    return torch.stack([xs, ys, torch.ones_like(xs)]).reshape(3, -1)


def _sample(image: torch.Tensor, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``image`` (B, C, H, W) read at the homogeneous source pixels ``src`` (B, 3, H * W): (warped,
    coverage (B, 1, H, W): 1 where the source is inside the image and in front of the camera)."""
    B, _, H, W = image.shape
    z = src[:, 2].clamp_min(1e-6)
    grid = torch.stack([src[:, 0] / z / W * 2 - 1, src[:, 1] / z / H * 2 - 1], -1).reshape(B, H, W, 2)
    in_front = (src[:, 2] > 1e-6).reshape(B, 1, H, W).to(image.dtype)
    warped = F.grid_sample(image, grid, mode="bilinear", padding_mode="border", align_corners=False)
    coverage = F.grid_sample(torch.ones(B, 1, H, W, dtype=image.dtype), grid, mode="bilinear",
                             padding_mode="zeros", align_corners=False) * in_front
    return warped, coverage


def warp_rotation(image: torch.Tensor, rotation: torch.Tensor, K: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """``image`` (B, C, H, W) seen from the rotated camera: (warped, coverage (B, 1, H, W)),
    coverage 1 where the new view sees the old frame and 0 where it sees past its edge (there
    the warped image repeats the edge pixels)."""
    _, _, H, W = image.shape
    K = K.to(image)
    homography = K @ rotation.to(image) @ torch.linalg.inv(K)                         # (B, 3, 3)
    return _sample(image, homography @ _pixels(H, W, image.dtype))


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


def walk_step(rows: torch.Tensor, heading: torch.Tensor, move_metres: float) -> torch.Tensor:
    """(..., 2) ground-plane step [x, y] of action rows (..., 8) walked along ``heading`` (...)
    radians, as the game walks: ``move_metres`` per unit of forward (along the heading) and strafe
    (to its right), diagonals not faster."""
    walk = rows[..., :2] / rows[..., :2].norm(dim=-1, keepdim=True).clamp_min(1.0)
    c, s = torch.cos(heading), torch.sin(heading)
    return move_metres * torch.stack([walk[..., 0] * c + walk[..., 1] * s, walk[..., 0] * s - walk[..., 1] * c], -1)


def walk_poses(actions: torch.Tensor, pitch: torch.Tensor, turn_rad: float, pitch_rad: float,
               move_metres: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The cameras of frames n-1, n-2, ... relative to frame n's, replayed backwards from the
    action rows (B, K, 8) of frames n, n-1, ... (newest first) as the game plays them: a row turns
    and pitches the camera, then moves it ``move_metres`` per unit of forward / strafe along the
    new heading (diagonals not faster). Frame n sits at the origin with yaw 0 and ``pitch`` (B,)
    radians. Returns yaw (B, K), pitch (B, K) and centre (B, K, 3) of frames n-1-k. Height stays
    constant (terrain and jumps are left to the network)."""
    rows = actions.float()
    turned = rows[..., 2].cumsum(1) * turn_rad                       # (B, K): frame n's yaw minus n-1-k's
    heading = -(turned - rows[..., 2] * turn_rad)                    # yaw of frame n-k, which its walk used
    step = walk_step(rows, heading, 1.0)
    centre = -move_metres * torch.cat([step, torch.zeros_like(step[..., :1])], -1).cumsum(1)
    return -turned, pitch.float()[:, None] - rows[..., 3].cumsum(1) * pitch_rad, centre


def warp_ground(image: torch.Tensor, K: torch.Tensor, new: torch.Tensor, old: torch.Tensor,
                old_centre: torch.Tensor, eye_height: float, max_distance: float = 60.0,
                old_max_distance: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``image`` (B, C, H, W), seen by the camera with world -> camera rotation ``old`` (B, 3, 3)
    at ``old_centre`` (B, 3), warped into the camera with rotation ``new`` at the origin, taking
    the scene as a flat floor ``eye_height`` below the new camera (rays that meet it within
    ``max_distance``) and everything else as infinitely far (moved by rotation alone). Exact for
    the floor and the sky; what stands on the floor is left to the network. Returns (warped,
    coverage (B, 1, H, W)) as ``warp_rotation``; with ``old_centre`` zero it is that warp.
    ``old_max_distance``: floor points farther than this from the old camera count as not
    covered (the old frame shows them as a few pixels at its horizon, or not at all)."""
    B, _, H, W = image.shape
    dtype = image.dtype
    K = K.to(dtype)
    camera_rays = torch.linalg.inv(K) @ _pixels(H, W, dtype)                    # (3, HW): K^-1 p, z = 1
    rays = new.to(dtype).transpose(1, 2) @ camera_rays                          # (B, 3, HW): world directions
    down = rays[:, 2:]
    depth = -eye_height / torch.where(down < -1e-6, down, torch.full_like(down, -1e-6))
    length = (camera_rays[0] ** 2 + camera_rays[1] ** 2 + 1).sqrt()              # |K^-1 p|, kept by a rotation
    floor = (down < -1e-6) & (depth * length < max_distance)
    point = torch.where(floor, depth * rays - old_centre.to(dtype)[:, :, None], rays)
    warped, coverage = _sample(image, (K @ old.to(dtype)) @ point)              # K R_old (X - c_old)
    if old_max_distance is not None:
        far = floor & (point.norm(dim=1, keepdim=True) > old_max_distance)
        coverage = coverage * (~far).reshape(B, 1, H, W).to(dtype)
    return warped, coverage


# --- dead reckoning: where the player is, from the actions alone ------------------------------

def dead_reckon(actions: torch.Tensor, turn_rad: float, move_metres: float) -> torch.Tensor:
    """(B, T, 3) poses [x, y, yaw] (metres, radians; frame 0 at the origin, yaw 0) of frames
    0..T-1 from their action rows (B, T, 8) (row t led to frame t; row 0 is not played), as the
    game plays them and ``walk_poses`` replays them: turn first, then walk ``move_metres`` per
    unit of forward / strafe along the new heading (diagonals not faster). Walls, jumps and
    pushes are not known to it: it is the session's belief of where it is."""
    rows = actions.float().clone()
    rows[:, 0] = 0
    yaw = (rows[..., 2] * turn_rad).cumsum(1)
    return torch.cat([walk_step(rows, yaw, move_metres).cumsum(1), yaw[..., None]], -1)


def advance_pose(pose: torch.Tensor, row: torch.Tensor, turn_rad: float, move_metres: float) -> torch.Tensor:
    """(B, 3) pose [x, y, yaw] after playing one action row (B, 8) from ``pose``: one step of
    ``dead_reckon``, for a session that plays row by row."""
    row = row.float()
    yaw = pose[:, 2] + row[:, 2] * turn_rad
    return torch.cat([pose[:, :2] + walk_step(row, yaw, move_metres), yaw[:, None]], -1)


def relative_pose(old: torch.Tensor, new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The camera of pose ``old`` (B, 3) [x, y, yaw] seen from pose ``new`` (B, 3), which sits at
    the origin with yaw 0: (yaw (B,), centre (B, 3), height 0), as ``walk_poses`` returns them."""
    d = old[:, :2] - new[:, :2]
    c, s = torch.cos(-new[:, 2]), torch.sin(-new[:, 2])
    centre = torch.stack([c * d[:, 0] - s * d[:, 1], s * d[:, 0] + c * d[:, 1], torch.zeros_like(c)], -1)
    return old[:, 2] - new[:, 2], centre


# --- any motion, given the target's depth (learned camera motion, alaya.models.camera_motion) ---

def warp_depth(image: torch.Tensor, depth: torch.Tensor, K: torch.Tensor, target_to_source: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """``image`` (B, C, H, W) of a source camera, seen from a target camera whose pixels have
    ``depth`` (B, 1, H, W) along its view axis: each target pixel is lifted to ``depth * K^-1 p``,
    moved into the source camera by ``target_to_source`` (B, 4, 4, OpenCV axes) and read there
    (bilinear). The backward warp of view synthesis (SfMLearner, Zhou et al. 2017, eq. 2).
    Returns (warped, coverage (B, 1, H, W)) as ``warp_rotation``."""
    B, _, H, W = image.shape
    dtype = image.dtype
    K = K.to(dtype)
    rays = torch.linalg.inv(K) @ _pixels(H, W, dtype)                              # (3, HW) or (B, 3, HW)
    points = depth.to(dtype).reshape(B, 1, H * W) * rays                          # (B, 3, HW)
    T = target_to_source.to(dtype)
    moved = T[:, :3, :3] @ points + T[:, :3, 3:]
    return _sample(image, K @ moved)

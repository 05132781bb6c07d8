"""What a learned camera may not do, whatever its network says: roll (``level``), pitch without a
pitch input (``hold_pitch``), walk through the surface in front of it (``stop_at_surfaces``), walk
out of the region recorded players stood in (``stay_in_region``). ``CameraMotion`` applies the
first two where training found the recording obeys them (``CameraMotionConfig.level``,
``pitch_held``); a world session applies the last two. Conventions
are ``alaya.models.camera_motion``'s: OpenGL camera axes, world z up, ``delta`` camera t-1's
coordinates -> camera t's, ``K`` with its origin at the top-left pixel's corner."""

from __future__ import annotations

import math

import torch


def camera_centre(world_to_camera: torch.Tensor) -> torch.Tensor:
    """(..., 4, 4) view matrices -> (..., 3) the cameras' centres in world coordinates (-R^T t)."""
    return -(world_to_camera[..., :3, :3].transpose(-1, -2) @ world_to_camera[..., :3, 3:])[..., 0]


def level(delta: torch.Tensor, up: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Deltas (B, 4, 4) whose new cameras see world up as ``up`` (B, 3), turned about their view
    axis so that they do not roll (world up in the camera's y-z plane): (levelled deltas, their up)."""
    theta = torch.atan2(up[:, 0], up[:, 1])
    c, s = torch.cos(theta), torch.sin(theta)
    roll = torch.eye(4).repeat(len(up), 1, 1)
    roll[:, 0, 0], roll[:, 0, 1], roll[:, 1, 0], roll[:, 1, 1] = c, -s, s, c
    up = (roll[:, :3, :3] @ up[:, :, None])[..., 0]
    return roll @ delta, up


def hold_pitch(delta: torch.Tensor, up: torch.Tensor, old_up: torch.Tensor, hold: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Deltas (B, 4, 4) whose new cameras see world up as ``up`` (B, 3), where ``hold`` (B,) turned
    about their x axis back to the pitch of the old cameras (world up ``old_up``): (deltas, up)."""
    alpha = torch.atan2(up[:, 2], up[:, 1]) - torch.atan2(old_up[:, 2], old_up[:, 1])
    alpha = torch.where(hold, -alpha, torch.zeros_like(alpha))
    c, s = torch.cos(alpha), torch.sin(alpha)
    turn = torch.eye(4).repeat(len(up), 1, 1)
    turn[:, 1, 1], turn[:, 1, 2], turn[:, 2, 1], turn[:, 2, 2] = c, -s, s, c
    return turn @ delta, (turn[:, :3, :3] @ up[:, :, None])[..., 0]


def stop_at_surfaces(delta: torch.Tensor, world_to_camera: torch.Tensor, depth: torch.Tensor, K: torch.Tensor,
                     radius: float) -> torch.Tensor:
    """``delta`` (4, 4), a camera's motion from ``world_to_camera`` (4, 4, GL), shortened so that
    its walk (the part along the floor: world up is z) stops ``radius`` short of the surface that
    ``depth`` (H, W) metres along the view axis, 0 on the sky, seen by that camera with ``K``, shows
    in the walk's direction (the nearest depth in the 3 x 3 pixels there): a world model's camera
    walks up to a wall and not through it, as a game's collision stops its player. A walk whose
    direction is out of view (sideways, backwards) or towards the sky goes unchanged, and so do
    the turn and the rise or fall."""
    P = world_to_camera.float()
    new = delta.float() @ P
    c0, c1 = camera_centre(P), camera_centre(new)
    walk = c1 - c0
    walk[2] = 0
    distance = float(walk.norm())
    if distance < 1e-6 or radius <= 0:
        return delta
    ray = P[:3, :3] @ (walk / distance)                         # the walk's direction, GL camera axes
    ahead = float(-ray[2])
    if ahead <= 1e-3:
        return delta
    H, W = depth.shape
    u = int(math.floor(float(K[0, 0]) * float(ray[0]) / ahead + float(K[0, 2])))
    v = int(math.floor(-float(K[1, 1]) * float(ray[1]) / ahead + float(K[1, 2])))
    if not (0 <= u < W and 0 <= v < H):
        return delta
    patch = depth[max(v - 1, 0):v + 2, max(u - 1, 0):u + 2]
    patch = patch[patch > 0]
    if patch.numel() == 0:
        return delta
    room = max(float(patch.min()) / ahead - radius, 0.0)      # metres along the walk to the surface, less radius
    if distance <= room:
        return delta
    stopped = new.clone()
    stopped[:3, 3] = -new[:3, :3] @ (c1 - walk * (1 - room / distance))
    return (stopped @ torch.linalg.inv(P)).to(delta.dtype)


def stay_in_region(delta: torch.Tensor, world_to_camera: torch.Tensor, to_region: torch.Tensor, region) -> torch.Tensor:
    """``delta`` (4, 4), a camera's motion from ``world_to_camera`` (4, 4), with its new centre
    kept inside ``region`` (a ``WalkableRegion``: ``walk(start, end)`` on the floor of another
    world frame), ``to_region`` (4, 4) taking this camera's world points into that frame: a walk
    that would leave it slides along its edge. The turn and the height are unchanged."""
    P = world_to_camera.double()
    new = delta.double() @ P
    T = to_region.double()
    c0, c1 = (T[:3, :3] @ camera_centre(m) + T[:3, 3] for m in (P, new))
    end = torch.from_numpy(region.walk(c0[:2].numpy(), c1[:2].numpy()))
    if torch.allclose(end, c1[:2], atol=1e-9):
        return delta
    inside = c1.clone()
    inside[:2] = end
    centre = torch.linalg.solve(T[:3, :3], inside - T[:3, 3])     # back into this camera's world
    moved = new.clone()
    moved[:3, 3] = -new[:3, :3] @ centre
    return (moved @ torch.linalg.inv(P)).to(delta.dtype)

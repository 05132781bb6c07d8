"""What a learned camera may not do, whatever its network says: roll (``level``), pitch without a
pitch input (``hold_pitch``), walk through a surface it sees or remembers (``slide_at_surfaces``,
on the points ``seen_surface`` gathers), walk out of the region recorded players stood in
(``stay_in_region``). ``CameraMotion`` applies the
first two where training found the recording obeys them (``CameraMotionConfig.level``,
``pitch_held``); a world session applies the last two. Conventions
are ``alaya.models.camera_motion``'s: OpenGL camera axes, world z up, ``delta`` camera t-1's
coordinates -> camera t's, ``K`` with its origin at the top-left pixel's corner."""

from __future__ import annotations

import math

import torch

from alaya.models.memory_geometry import camera_points

RAY_BAND = 0.03     # metres: half the width of a walk's collision ray, and its reach over the eye (a game's ray
#                     is one line from its player's eye: 0.1 stopped a walk at a thin post the game's player passes)


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


def slide_at_surfaces(delta: torch.Tensor, world_to_camera: torch.Tensor, surface: torch.Tensor, radius: float,
                      axes: torch.Tensor | None = None, band: float = RAY_BAND, below: float = 0.1,
                      hits: int = 3) -> torch.Tensor:
    """``delta`` (4, 4), a camera's motion from ``world_to_camera`` (4, 4, GL), with its walk (the
    part along the floor: world up is z) stopped per world axis, as a game's collide-and-slide
    moves its player: the walk's x and y parts each stop ``radius`` short of the surface that
    ``surface`` (3, N) world points (what the memory holds, and the last frame) shows along that
    axis from the camera's centre, in a ray ``2 * band`` wide, from ``below`` under the camera's
    height to ``band`` over it (a game's ray is at its player's eye; reaching lower meets the
    slope of rising ground the camera, level where the game's player climbs, does not follow). So a
    walk into a wall at a slant slides along it; a walk into it head on, sideways or backwards
    stops at it, seen now or remembered. A surface is ``hits`` points (a stray one is not a
    wall). ``axes`` (3, 3): the rotation taking world directions to those of the frame whose x
    and y axes the walk slides along (a game's own world; default: this world's). The turn and
    the rise or fall are unchanged."""
    P = world_to_camera.double()
    new = delta.double() @ P
    c0, c1 = camera_centre(P), camera_centre(new)
    R = torch.eye(3, dtype=torch.float64) if axes is None else axes.double()
    walk = R @ (c1 - c0)
    if float(walk[:2].abs().max()) < 1e-9 or radius <= 0 or surface.shape[1] < hits:
        return delta
    rel = R @ (surface.double() - c0[:, None])
    reach = radius + float(walk[:2].abs().max()) + band
    near = (rel[2] > -below) & (rel[2] < band) & (rel[0].abs() < reach) & (rel[1].abs() < reach)
    rel = rel[:, near]
    end = walk.clone()
    for axis in (0, 1):
        step = float(walk[axis])
        if step == 0.0:
            continue
        along = rel[axis] * math.copysign(1.0, step)
        ahead = along[(along > 0) & (rel[1 - axis].abs() < band)]
        if ahead.numel() < hits:
            continue
        room = max(float(ahead.kthvalue(hits).values) - radius, 0.0)
        if abs(step) > room:
            end[axis] = math.copysign(room, step)
    if torch.equal(end, walk):
        return delta
    moved = new.clone()
    moved[:3, 3] = -new[:3, :3] @ (c0 + R.T @ end)
    return (moved @ torch.linalg.inv(P)).to(delta.dtype)


def seen_surface(depth: torch.Tensor, K: torch.Tensor, world_to_camera: torch.Tensor, remembered: torch.Tensor,
                 within: float) -> torch.Tensor:
    """(3, N) world points a camera collides with, those within ``within`` metres of its centre
    along each world axis: of ``remembered`` (3, M), what a scene memory holds, and of the surface
    ``depth`` (H, W) metres along the view axis (0 on the sky) shows, seen with ``K`` from
    ``world_to_camera`` (4, 4, GL): the last frame, some of which the memory keeps out or takes
    in a frame later."""
    points = camera_points(depth, K)[:, (depth > 0) & (depth < within)]
    to_world = torch.linalg.inv(world_to_camera.double())
    centre = to_world[:3, 3:]
    remembered = remembered.double()
    remembered = remembered[:, ((remembered - centre).abs() < within).all(0)]
    return torch.cat([remembered, to_world[:3, :3] @ points + centre], 1)

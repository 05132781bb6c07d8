"""Learned camera motion: an action row (and the camera's state) -> the camera's relative pose.

The world model moves its memory and context into the next view by the camera's motion per
frame. That motion used to be constants tuned to our game (``constant_motion``: 3 degrees of turn
and 0.1 m a frame, yaw about the world's up); ``CameraMotion`` learns it from the data instead:
supervised from recorded poses where episodes have them, self-supervised from the frames where
they do not (``alaya.train.camera_motion``: photometric error of view synthesis, per-pixel minimum
and auto-masking after Monodepth2, Godard et al. 2019; SfMLearner, Zhou et al. 2017).

The API the world model calls::

    from alaya.models.camera_motion import CameraMotion
    motion = CameraMotion.from_pretrained("weights/camera_motion")
    state = motion.initial_state(world_to_camera=pose0)   # or pitch_degrees=..., or level (no argument)
    for row in actions:                                    # row: (8,) alaya.data.actions
        delta, state = motion.step(row, state)             # delta (4, 4): world_to_camera[t] = delta @ world_to_camera[t-1]
    K = motion.intrinsics(64, 64)                          # (3, 3): the data's K, or the learned focal length
    depth = motion.depth(state, 64, 64)                    # (64, 64) the learned depth prior, where no depth is known
    poses = motion.poses(actions, pose0)                   # (T, 4, 4) dead-reckoned world_to_camera, for data without

Conventions are the episodes' (``docs/episodes.md``): ``world_to_camera`` is an OpenGL view
matrix (camera x right, y up, looking down -z; world z up); ``delta`` is camera t-1's
coordinates -> camera t's. ``K`` is a pinhole on OpenCV axes with its origin at the top-left
pixel's corner (``view_warp``); ``gl_to_cv`` turns a GL transform into OpenCV axes.

The state (``MotionState``) is what the motion depends on besides the action: ``up``, the
world's up axis in camera coordinates (the camera's pitch and roll; a yaw turns about it and a
walk moves perpendicular to it), updated by each predicted rotation, and ``prev``, the previous
frame's motion (momentum: a jump's rise and fall, a turn easing in). The network is an MLP over
[action, up, prev, action x up] -> twist (axis-angle rotation in radians, translation), the
translation in metres when trained on poses and in units of the camera's height above the floor
when trained on frames alone (a single camera's frames cannot tell scale).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from alaya.data.actions import ACTION_COLUMNS, ACTION_DIM, NAVIGATION
from alaya.models.camera_constraints import hold_pitch, level
from alaya.models.camera_geometry import (GL_TO_CV, axis_angle_to_matrix, gl_to_cv, matrix_to_twist, pitch_of,
                                         twist_to_matrix, up_from_pitch, up_in_camera)
from alaya.models.view_warp import camera_rotation, walk_step
from alaya.nn.pretrained import from_pretrained, save_pretrained

WORLD_UP = torch.tensor([0.0, 0.0, 1.0])
NAV = len(NAVIGATION)
PITCH = NAVIGATION.index("pitch")          # the pitch column of an action row
JUMP = ACTION_COLUMNS.index("jump")
CAMERA_MOTION_DIR = "camera_motion"        # a memory world model's learned camera, inside its folder


@dataclass
class CameraMotionConfig:
    action_dim: int = ACTION_DIM
    hidden: int = 64
    layers: int = 2
    rotation_scale: float = 0.05        # radians: the twist's rotation is the network's output x this
    translation_scale: float = 0.1      # metres (or eye heights): the same for its translation
    fov_y_degrees: float = 60.0         # the focal length's start (and value, if never trained)
    depth_grid: int = 8                 # the learned depth prior's residual, depth_grid^2 cells
    eye_height: float = 1.0             # the prior's floor below the camera (its scale: see the docstring)
    far: float = 20.0                   # the prior's depth of what is not floor, at the start
    rest_anchored: bool = True          # no action and no previous motion is exactly no motion, at any
                                        # height: the network's output there is subtracted (else its small
                                        # bias moves a standing camera, 0.5 m down in 200 frames, and a
                                        # height correction bobs it after a walk stops)
    level: bool = False                 # the camera never rolls: each step's roll is taken out (set by
                                        # training when no recorded camera rolls; tiny tilts of a learned
                                        # turn's axis otherwise add up: 1.3 degrees of roll in two turns)
    still_without_navigation: bool = False   # a row with no navigation (forward, strafe, turn, pitch) neither
                                        # turns the camera nor moves it along the floor, only up or down in a
                                        # jump's flight (a jump row, or a previous rise or fall): set by
                                        # training when every such recorded frame is so
                                        # (a learned stop otherwise coasts a few mm: 3-6 mm after a walk)
    pitch_held: bool = False            # a row without pitch input keeps the camera's pitch: set by training
                                        # when no recorded frame without it pitches (a learned turn otherwise
                                        # tips the view 0.3 degrees a half-turn)
    stop_steps: float = 4.0             # a world model's camera stops this many of its own steady full
                                        # forward steps short of a surface (slide_at_surfaces); the
                                        # unit is the motion's own, so frames-only data needs no metres.
                                        # At 3 (0.3 m in our game) a remembered wall's splats, magnified,
                                        # broke up, the frames lost the wall and the camera walked through
                                        # it (docs/world_journal.md, thirteenth section)
    height_input: bool = True           # the network sees the camera's height above its start, so it
                                        # can learn to come back to the floor (trained on rollouts with a
                                        # height-correcting target: walking otherwise drifts ~2 m in 300 frames)
    flight_rise: float = 0.0            # a jump's flight, read by training from recorded poses (0: none, the
    flight_gravity: float = 0.0         # network moves the camera up and down): the first frame's rise and
                                        # the fall added each frame after, along world up, until the camera is
                                        # back at the height it took off from. The network alone, with no
                                        # notion of being in the air, hung at a jump's apex (no row, no
                                        # vertical momentum: a rest) for 15 frames of a flight the game ends in 18


@dataclass
class MotionState:
    """``up`` (B, 3): world up in camera (GL) coordinates; ``prev`` (B, 6): the previous twist;
    ``height`` (B,): the camera's height above where it started, along world up (0 if not given);
    ``air`` (B,): its height above the ground its flight took off from, 0 on the ground."""
    up: torch.Tensor
    prev: torch.Tensor
    height: torch.Tensor | None = None
    air: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.height is None:
            self.height = torch.zeros(len(self.up))
        if self.air is None:
            self.air = torch.zeros(len(self.up))


def height_step(height: torch.Tensor, twist: torch.Tensor, next_up: torch.Tensor) -> torch.Tensor:
    """(B,) the height after a twist: the camera centre moves by -R_t^T t, whose world-up part is
    -t . up_t (``next_up``: world up in the new camera)."""
    return height - (twist[:, 3:] * next_up).sum(-1)


def constant_motion(rows: torch.Tensor, up: torch.Tensor, turn_degrees: float = 3.0, pitch_degrees: float = 2.0,
                    move_metres: float = 0.1, max_pitch_degrees: float = 40.0) -> torch.Tensor:
    """(B, 4, 4) GL deltas of action rows (B, 8) played from cameras of world up ``up`` (B, 3) by
    the fixed constants the world model used before this module (``view_warp.walk_poses``): turn
    about the world's up, pitch (held within the session's limit), then walk ``move_metres`` per
    unit along the new heading, diagonals not faster; height constant. The baseline the learned
    motion is measured against."""
    rows, up = rows.float(), up.float()
    pitch0 = pitch_of(up)
    limit = math.radians(max_pitch_degrees)
    pitch1 = (pitch0 + rows[:, 3] * math.radians(pitch_degrees)).clamp(-limit, limit)
    yaw1 = rows[:, 2] * math.radians(turn_degrees)
    old, new = camera_rotation(torch.zeros_like(yaw1), pitch0), camera_rotation(yaw1, pitch1)   # world -> cv camera
    step = move_metres * walk_step(rows, yaw1, 1.0)
    centre = torch.cat([step, torch.zeros_like(step[:, :1])], -1)                # new centre - old centre
    cv = torch.zeros(len(rows), 4, 4)
    cv[:, :3, :3] = new @ old.transpose(1, 2)
    cv[:, :3, 3] = -(new @ centre[:, :, None])[..., 0]
    cv[:, 3, 3] = 1
    return gl_to_cv(cv)


class CameraMotion(nn.Module):
    """Action row + ``MotionState`` -> twist; focal length; a depth prior (module docstring)."""

    def __init__(self, config: CameraMotionConfig | None = None) -> None:
        super().__init__()
        self.config = cfg = config or CameraMotionConfig()
        width = cfg.action_dim + 3 + 6 + 3 * NAV + int(cfg.height_input)
        layers: list[nn.Module] = []
        for _ in range(cfg.layers):
            layers += [nn.Linear(width, cfg.hidden), nn.SiLU()]
            width = cfg.hidden
        self.net = nn.Sequential(*layers, nn.Linear(width, 6))
        nn.init.zeros_(self.net[-1].weight)                  # starts as the identity motion
        nn.init.zeros_(self.net[-1].bias)
        # focal length over the image height: f = 0.5 H / tan(fov / 2)
        self.log_focal = nn.Parameter(torch.tensor(math.log(0.5 / math.tan(math.radians(cfg.fov_y_degrees) / 2))))
        self.log_far = nn.Parameter(torch.tensor(math.log(cfg.far)))
        self.depth_residual = nn.Parameter(torch.zeros(1, 1, cfg.depth_grid, cfg.depth_grid))

    # --- motion ---------------------------------------------------------------------------
    def _scales(self) -> torch.Tensor:
        c = self.config
        return torch.tensor([c.rotation_scale] * 3 + [c.translation_scale] * 3)

    def twist(self, rows: torch.Tensor, up: torch.Tensor, prev: torch.Tensor,
              height: torch.Tensor | None = None) -> torch.Tensor:
        """(B, 6) twists [axis-angle (rad), translation] of action rows (B, 8) from states
        ``up`` (B, 3), ``prev`` (B, 6), ``height`` (B,) (None: 0)."""
        rows, up = rows.float(), up.float()
        height = torch.zeros(len(rows)) if height is None else height.float()
        out = self.net(self._features(rows, up, prev.float(), height))
        if self.config.rest_anchored:     # at rest (no row, no momentum), at any height: exactly 0
            out = out - self.net(self._features(torch.zeros_like(rows), up, torch.zeros_like(prev, dtype=torch.float32),
                                                height))
        return out * self._scales()

    def _features(self, rows: torch.Tensor, up: torch.Tensor, prev: torch.Tensor, height: torch.Tensor) -> torch.Tensor:
        nav = rows[:, :NAV, None] * up[:, None, :]                                # (B, 4, 3) action x up
        parts = [rows, up, prev / self._scales(), nav.flatten(1)]
        if self.config.height_input:
            parts.append(height[:, None] / self.config.eye_height)
        return torch.cat(parts, -1)

    @staticmethod
    def next_up(up: torch.Tensor, twist: torch.Tensor) -> torch.Tensor:
        """(B, 3) the world's up in the next camera: rotated by the twist's rotation, unit length."""
        up = (axis_angle_to_matrix(twist[:, :3]) @ up[:, :, None])[..., 0]
        return up / up.norm(dim=-1, keepdim=True).clamp_min(1e-6)

    def initial_state(self, world_to_camera: torch.Tensor | None = None, pitch_degrees: float | None = None,
                      batch: int = 1) -> MotionState:
        """A session's start: from a recorded pose (4, 4) or (B, 4, 4), else a camera at
        ``pitch_degrees`` (no roll), else a level camera; no previous motion."""
        if world_to_camera is not None:
            up = up_in_camera(torch.as_tensor(world_to_camera, dtype=torch.float32).reshape(-1, 4, 4))
        else:
            up = up_from_pitch(torch.full((batch,), float(pitch_degrees or 0.0)))
        return MotionState(up=up, prev=torch.zeros(len(up), 6))

    @torch.no_grad()
    def step(self, action_row, state: MotionState) -> tuple[torch.Tensor, MotionState]:
        """One frame: (delta (4, 4), or (B, 4, 4) for rows (B, 8); the next state)."""
        rows = torch.as_tensor(action_row, dtype=torch.float32)
        single = rows.dim() == 1
        rows = rows.reshape(-1, self.config.action_dim)
        tw = self.twist(rows, state.up, state.prev, state.height)
        delta = twist_to_matrix(tw)
        up = self.next_up(state.up, tw)
        if self.config.level:
            delta, up = level(delta, up)
        if self.config.still_without_navigation:
            idle = (rows[:, :NAV] == 0).all(-1)
            if idle.any():
                # along world up, and only in a jump's flight: its start or a previous rise or fall
                if self.config.flight_rise > 0:               # a learned flight knows when it is in the air
                    flying = (rows[:, JUMP] != 0) | (state.air > 0)
                else:
                    flying = (rows[:, JUMP] != 0) | ((state.prev[:, 3:] * state.up).sum(-1).abs() > 1e-4)
                vertical = (delta[:, :3, 3] * state.up).sum(-1, keepdim=True) * state.up * flying[:, None]
                held = torch.eye(4).repeat(len(rows), 1, 1)
                held[:, :3, 3] = vertical
                delta = torch.where(idle[:, None, None], held, delta)
                up = torch.where(idle[:, None], state.up.float(), up)
        if self.config.pitch_held:
            delta, up = hold_pitch(delta, up, state.up, rows[:, PITCH] == 0)
        if self.config.level or self.config.still_without_navigation or self.config.pitch_held:
            tw = matrix_to_twist(delta)
        air = torch.zeros_like(state.air)
        if self.config.flight_rise > 0:
            delta, air = self._fly(rows, state, delta, up)
            tw = matrix_to_twist(delta)
        new = MotionState(up=up, prev=tw, height=height_step(state.height, tw, up), air=air)
        return (delta[0] if single else delta), new

    def _fly(self, rows: torch.Tensor, state: MotionState, delta: torch.Tensor,
             up: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A jump's flight along world up: a jump row on the ground takes off with ``flight_rise``,
        each frame in the air rises by the last frame's rise less ``flight_gravity``, and the
        flight ends back at its take-off height. (deltas with that vertical motion, the air after.)"""
        c = self.config
        last_rise = -(state.prev[:, 3:] * state.up).sum(-1)      # the camera centre's last move along world up
        take_off = (state.air <= 0) & (rows[:, JUMP] != 0)
        flying = take_off | (state.air > 0)
        if not flying.any():
            return delta, torch.zeros_like(state.air)
        rise = torch.where(take_off, torch.full_like(last_rise, c.flight_rise), last_rise - c.flight_gravity)
        rise = torch.maximum(rise, -state.air)                    # lands where it took off
        now = -(delta[:, :3, 3] * up).sum(-1)                     # the network's own rise
        delta = delta.clone()
        # the translation t + (now - rise) up moves the centre by `rise` along world up
        delta[:, :3, 3] += torch.where(flying, now - rise, torch.zeros_like(rise))[:, None] * up
        return delta, torch.where(flying, (state.air + rise).clamp_min(0), torch.zeros_like(rise))

    @torch.no_grad()
    def warmed(self, rows, state: MotionState) -> MotionState:
        """``state`` after the rows (K, 8) that led to it were played from rest: their momentum and
        a jump's flight (previous motion, height, air), with ``state``'s own camera (up) kept."""
        _, played = self.rollout(rows, MotionState(up=state.up, prev=torch.zeros_like(state.prev)))
        return MotionState(up=state.up, prev=played.prev, height=played.height, air=played.air)

    @torch.no_grad()
    def rollout(self, actions, state: MotionState) -> tuple[torch.Tensor, MotionState]:
        """(T, 8) or (B, T, 8) rows played from ``state``: (deltas (B, T, 4, 4), last state)."""
        rows = torch.as_tensor(actions, dtype=torch.float32)
        rows = rows[None] if rows.dim() == 2 else rows
        out = []
        for t in range(rows.shape[1]):
            delta, state = self.step(rows[:, t], state)
            out.append(delta)
        return torch.stack(out, 1), state

    @torch.no_grad()
    def poses(self, actions, world_to_camera0=None, pitch_degrees: float | None = None) -> torch.Tensor:
        """(T, 4, 4) world_to_camera of frames 0..T-1 dead-reckoned from their rows (T, 8) (row 0
        is not played), from the pose ``world_to_camera0`` (default: a camera at the origin at
        ``pitch_degrees``, level yaw): poses for data that has none."""
        rows = torch.as_tensor(actions, dtype=torch.float32)
        if world_to_camera0 is None:
            p = torch.deg2rad(torch.tensor(float(pitch_degrees or 0.0)))
            forward = torch.stack([torch.cos(p), torch.zeros(()), torch.sin(p)])     # yaw 0: along +x
            right = torch.tensor([0.0, -1.0, 0.0])
            up = torch.linalg.cross(right, forward)
            P0 = torch.eye(4)
            P0[:3, :3] = torch.stack([right, up, -forward])                         # GL rows: x, y, back
        else:
            P0 = torch.as_tensor(world_to_camera0, dtype=torch.float32).reshape(4, 4)
        state = self.initial_state(world_to_camera=P0)
        out = [P0]
        for t in range(1, len(rows)):
            delta, state = self.step(rows[t], state)
            out.append(delta @ out[-1])
        return torch.stack(out)

    @torch.no_grad()
    def stop_distance(self, frames: int = 15) -> float:
        """How far short of a surface ahead the camera stops: ``stop_steps`` times the length of a
        full forward step once the walk is steady (``frames`` rows in, from a level camera)."""
        row = torch.zeros(self.config.action_dim)
        row[0] = 1.0
        deltas, _ = self.rollout(row.expand(frames, -1), self.initial_state())
        return self.config.stop_steps * float(deltas[0, -1, :3, 3].norm())

    # --- camera ---------------------------------------------------------------------------
    def intrinsics(self, H: int, W: int) -> torch.Tensor:
        """(3, 3) K of an H x W image (square pixels, centred principal point)."""
        f = self.log_focal.exp() * H
        zero, one = torch.zeros(()), torch.ones(())
        return torch.stack([torch.stack([f, zero, zero + W / 2]), torch.stack([zero, f, zero + H / 2]),
                            torch.stack([zero, zero, one])])

    def depth(self, state: MotionState | torch.Tensor, H: int, W: int) -> torch.Tensor:
        """(B, H, W) the learned depth prior (along the view axis) of cameras with world up
        ``state.up`` (B, 3): a floor ``eye_height`` below, the rest at the learned far depth,
        times a learned smooth residual; a (1, H, W) depth comes back squeezed for one camera."""
        up = (state.up if isinstance(state, MotionState) else state).float().reshape(-1, 3)
        K = self.intrinsics(H, W)
        ys, xs = torch.meshgrid(torch.arange(H) + 0.5, torch.arange(W) + 0.5, indexing="ij")
        rays = torch.stack([xs, ys, torch.ones_like(xs)]).reshape(3, -1)
        rays = GL_TO_CV @ torch.linalg.inv(K) @ rays                           # (3, HW) GL, view depth 1
        down = -(up @ rays)                                                    # (B, HW) per unit of depth
        far = self.log_far.exp()
        floor = self.config.eye_height / down.clamp_min(1e-6)
        plane = torch.where(down > 1e-6, torch.minimum(floor, far), far).reshape(-1, 1, H, W)
        residual = F.interpolate(self.depth_residual, size=(H, W), mode="bilinear", align_corners=False)
        return (plane * residual.exp())[:, 0]

    # --- weights --------------------------------------------------------------------------
    def set_intrinsics(self, K: torch.Tensor, H: int) -> None:
        """Take the data's focal length (fy of K over the image height ``H``)."""
        with torch.no_grad():
            self.log_focal.copy_(torch.log(torch.as_tensor(K, dtype=torch.float32)[1, 1] / H))

    def save_pretrained(self, folder, **metadata) -> None:
        save_pretrained(self, folder, **metadata)

    @classmethod
    def from_pretrained(cls, folder) -> CameraMotion:
        return from_pretrained(cls, CameraMotionConfig, folder).eval()

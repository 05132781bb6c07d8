"""The recorded episodes ``alaya train motion`` learns from and is measured on, and what their
poses say.

``MotionEpisodes`` holds one split in memory; ``rollout_states`` plays a model over every
episode's rows and gives the states (up, previous motion, height) each row is played from.
``idle_frames_hold_still`` and ``pitch_needs_input`` read two of the game's rules from the
recorded poses (a camera without input holds still; its pitch changes only with pitch input),
which ``train_motion`` then builds into the model.
"""

from __future__ import annotations

import numpy as np
import torch

from alaya.data.episodes import EpisodeDataset
from alaya.models.camera_constraints import camera_centre
from alaya.models.camera_geometry import matrix_to_axis_angle, matrix_to_twist, pitch_of, relative_motion, up_in_camera
from alaya.models.camera_motion import JUMP, NAV, PITCH, CameraMotion, MotionState


class MotionEpisodes:
    """One split in memory, padded to the longest episode: ``actions`` (N, T, 8), ``length`` (N,),
    ``rgb`` (N, S, T, 3, H, W) float in [0, 1] (frames mode), ``poses`` (N, T, 4, 4) or None,
    ``K`` (3, 3) or None."""

    def __init__(self, root: str, split: str | None, frames: bool) -> None:
        ds = EpisodeDataset(root)
        eps = [ds.load(i) for i in ds.ids(split)]
        if not eps:
            raise ValueError(f"{root}: no episodes in split {split!r}")
        self.ids = ds.ids(split)
        self.length = torch.tensor([len(e["actions"]) for e in eps])
        T = int(self.length.max())
        pad = lambda a, v: np.concatenate([a, np.repeat(a[-1:] * v, T - len(a), 0)]) if len(a) < T else a  # noqa: E731
        self.actions = torch.from_numpy(np.stack([pad(e["actions"], 0) for e in eps]))
        has_poses = all("world_to_camera" in e for e in eps)
        self.poses = torch.from_numpy(np.stack([pad(e["world_to_camera"], 1) for e in eps])) if has_poses else None
        self.heights = recorded_heights(self.poses) if has_poses else None     # (N, T), for poses_loss
        self.K = torch.from_numpy(eps[0]["K"]) if "K" in eps[0] else None
        self.rgb = None
        if frames:
            S = min(e["rgb"].shape[0] for e in eps)
            rgb = np.stack([np.stack([pad(e["rgb"][s], 1) for s in range(S)]) for e in eps])   # (N, S, T, H, W, 3)
            self.rgb = torch.from_numpy(rgb).permute(0, 1, 2, 5, 3, 4)                         # uint8, kept small
        self.size = tuple(eps[0]["rgb"].shape[2:4])

    def targets(self) -> torch.Tensor | None:
        """(N, T, 6) recorded twists (row t: frame t-1 -> t), or None."""
        if self.poses is None:
            return None
        return torch.stack([matrix_to_twist(relative_motion(p)) for p in self.poses]).float()

    def start_state(self, model: CameraMotion, from_poses: bool) -> MotionState:
        if from_poses and self.poses is not None:
            return MotionState(up=up_in_camera(self.poses[:, 0]).float(), prev=torch.zeros(len(self.actions), 6),
                               height=torch.zeros(len(self.actions)))
        return model.initial_state(batch=len(self.actions))


def recorded_heights(poses: torch.Tensor) -> torch.Tensor:
    """(N, T) each recorded camera's height above the episode's first, along world z."""
    z = camera_centre(poses)[..., 2]
    return (z - z[:, :1]).float()


def flights(poses: torch.Tensor, actions: torch.Tensor, landed: float = 5e-3,
            settled: float = 1e-3) -> list[np.ndarray]:
    """Each recorded jump's rise per frame along world z (metres), from the frame of its jump row
    to the second-to-last frame before it lands: a flight starts on a jump row that lifts the camera and
    ends on the way down, within ``landed`` metres of its take-off height or when the fall stops
    (a fall slower than ``settled`` a frame: it came down on higher ground)."""
    z = camera_centre(poses.double())[..., 2].numpy()
    out = []
    for n in range(z.shape[0]):
        start, falling = None, False
        for t in range(1, z.shape[1]):
            dz = z[n, t] - z[n, t - 1]
            if start is None and actions[n, t, JUMP] != 0 and dz > settled:
                start, falling = t, False
            if start is None:
                continue
            falling |= dz < -settled
            if falling and (z[n, t] - z[n, start - 1] < landed or dz > -settled):
                out.append(np.diff(z[n, start - 1:t - 1]))  # the frames into the landing left out (cut short)
                start = None
    return out


def recorded_flight(data: MotionEpisodes, least: int = 3) -> tuple[float, float] | None:
    """(rise of a flight's first frame, fall added each frame after), metres, fitted by least
    squares to the recorded flights (rise at frame n = rise - n * fall), or None with fewer than
    ``least`` flights."""
    rises = [f for f in flights(data.poses, data.actions) if len(f) >= 3]
    if len(rises) < least:
        return None
    n = np.concatenate([np.arange(len(f)) for f in rises])
    A = np.stack([np.ones_like(n, dtype=np.float64), -n.astype(np.float64)], 1)
    (rise, fall), *_ = np.linalg.lstsq(A, np.concatenate(rises), rcond=None)
    return (float(rise), float(fall)) if rise > 0 and fall > 0 else None


@torch.no_grad()
def rollout_states(model: CameraMotion, data: MotionEpisodes,
                   from_poses: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The states before each row, playing every episode's rows from its start: up (N, T + 1, 3),
    prev (N, T + 1, 6), height (N, T + 1), air (N, T + 1); index t is the state row t is played
    from (index T: after the last)."""
    state = data.start_state(model, from_poses)
    states = [[state.up] * 2, [state.prev] * 2, [state.height] * 2, [state.air] * 2]
    for t in range(1, data.actions.shape[1]):                          # row 0 is not played
        _, state = model.step(data.actions[:, t], state)
        for part, value in zip(states, (state.up, state.prev, state.height, state.air)):
            part.append(value)
    return tuple(torch.stack(part, 1) for part in states)


def idle_frames_hold_still(data: MotionEpisodes, degrees: float = 0.05, metres: float = 1e-3) -> bool:
    """Whether every recorded frame whose row has no navigation (forward, strafe, turn, pitch)
    turns less than ``degrees`` and moves less than ``metres`` along the floor (world up is z),
    nor up or down unless it jumps or was already rising or falling, and there is at least one
    such frame: the game holds a camera still without input."""
    T = data.actions.shape[1]
    idle = (data.actions[..., :NAV] == 0).all(-1) & (torch.arange(T) < data.length[:, None])
    idle[:, 0] = False                                                   # row 0 is not played
    if not idle.any():
        return False
    poses = data.poses.double()
    turn = torch.stack([matrix_to_axis_angle(relative_motion(p)[:, :3, :3]).norm(dim=-1) for p in poses])
    centres = camera_centre(poses)
    walk, rise = torch.zeros(idle.shape, dtype=torch.float64), torch.zeros(idle.shape, dtype=torch.float64)
    walk[:, 1:] = (centres[:, 1:, :2] - centres[:, :-1, :2]).norm(dim=-1)
    rise[:, 1:] = (centres[:, 1:, 2] - centres[:, :-1, 2]).abs()
    grounded = idle & (data.actions[..., JUMP] == 0)
    grounded[:, 1:] &= rise[:, :-1] < metres / 10                         # not in a flight already
    grounded[:, 0] = False
    return bool(torch.rad2deg(turn[idle]).max() < degrees and walk[idle].max() < metres
                and (not grounded.any() or rise[grounded].max() < metres))


def pitch_needs_input(data: MotionEpisodes, degrees: float = 0.01) -> bool:
    """Whether no recorded frame whose row has no pitch input changes the camera's pitch by
    ``degrees`` or more, and there is such a frame."""
    T = data.actions.shape[1]
    free = (data.actions[..., PITCH] == 0) & (torch.arange(T) < data.length[:, None])
    free[:, 0] = False
    if not free.any():
        return False
    pitch = torch.rad2deg(pitch_of(up_in_camera(data.poses.double())))
    change = torch.zeros(free.shape, dtype=torch.float64)
    change[:, 1:] = (pitch[:, 1:] - pitch[:, :-1]).abs()
    return bool(change[free].max() < degrees)

"""Measuring a learned camera (``alaya.models.camera_motion.CameraMotion``) against recorded poses.

``evaluate_motion`` plays each held-out episode's rows from its first recorded pose and
measures every frame's rotation (degrees) and translation (m) against the recorded deltas, for
the model and for ``camera_motion.constant_motion`` (the fixed constants); where the chained
camera ends up after a whole episode; and how far it moves standing still and after a walk
stops.
"""

from __future__ import annotations

import math

import torch

from alaya.models.camera_constraints import camera_centre
from alaya.models.camera_geometry import matrix_to_axis_angle, relative_motion, twist_to_matrix, up_in_camera
from alaya.models.camera_motion import CameraMotion, constant_motion
from alaya.train.camera_motion_data import MotionEpisodes, rollout_states


def _errors(pred: torch.Tensor, true: torch.Tensor, mask: torch.Tensor) -> dict:
    """Per-frame rotation (degrees) and translation (m) errors of (N, T, 4, 4) deltas over ``mask``."""
    rel = pred[..., :3, :3].transpose(-1, -2) @ true[..., :3, :3]
    rot = torch.rad2deg(matrix_to_axis_angle(rel).norm(dim=-1))[mask]
    trans = (pred[..., :3, 3] - true[..., :3, 3]).norm(dim=-1)[mask]
    return {"rotation_deg_mean": float(rot.mean()), "rotation_deg_median": float(rot.median()),
            "translation_m_mean": float(trans.mean()), "translation_m_median": float(trans.median())}


def _centres(deltas: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    """(N, T, 3) camera centres of (N, T, 4, 4) deltas chained from the poses ``start`` (N, 4, 4)
    (delta 0 is not played)."""
    P, out = start.float(), []
    for t in range(deltas.shape[1]):
        if t > 0:
            P = deltas[:, t] @ P
        out.append(camera_centre(P))
    return torch.stack(out, 1)


def _drift(pred: torch.Tensor, true: torch.Tensor, poses: torch.Tensor, length: torch.Tensor) -> dict:
    """Where the chained motion puts the camera at each episode's last frame against the recorded
    camera (m): the distance, and the height error alone (mean over episodes)."""
    a, b = _centres(pred, poses[:, 0]), _centres(true, poses[:, 0])
    last = (length - 1).clamp(min=0)
    i = torch.arange(len(last))
    err = a[i, last] - b[i, last]
    return {"end_position_m_mean": float(err.norm(dim=-1).mean()), "end_height_m_mean": float(err[:, 2].abs().mean())}


def _translation_scale(model: CameraMotion, data: MotionEpisodes) -> float:
    """Least-squares scale of the model's translations onto the recorded ones (frames mode learns
    translation up to scale)."""
    pred, mask = _play(model, data)
    true = torch.stack([relative_motion(p) for p in data.poses]).float()
    a, b = pred[..., :3, 3][mask], true[..., :3, 3][mask]
    return float((a * b).sum() / (a * a).sum().clamp_min(1e-12))


def _play(model: CameraMotion, data: MotionEpisodes) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, T, 4, 4) deltas of each episode's rows played freely from its first recorded pose, and
    the mask (N, T) of real frames t >= 1."""
    ups, prevs, heights, _ = rollout_states(model, data, from_poses=True)
    N, T = data.actions.shape[:2]
    tw = model.twist(data.actions.reshape(-1, 8), ups[:, :T].reshape(-1, 3), prevs[:, :T].reshape(-1, 6),
                     heights[:, :T].reshape(-1))
    pred = twist_to_matrix(tw.reshape(N, T, 6))
    mask = torch.arange(T)[None] < data.length[:, None]
    mask[:, 0] = False
    return pred, mask


def _rest_drift(model: CameraMotion, start: torch.Tensor, frames: int = 300) -> float:
    """How far the camera moves (m, mean over the starts) in ``frames`` frames without an action."""
    state = model.initial_state(world_to_camera=start.float())
    deltas = [torch.eye(4).expand(len(start), 4, 4)]
    for _ in range(frames - 1):
        d, state = model.step(torch.zeros(len(start), 8), state)
        deltas.append(d)
    c = _centres(torch.stack(deltas, 1), start)
    return float((c[:, -1] - c[:, 0]).norm(dim=-1).mean())


def _settle_drift(model: CameraMotion, start: torch.Tensor, walk: int = 30, rest: int = 100) -> float:
    """How far the camera moves (m, mean over the starts) in ``rest`` frames without an action
    after ``walk`` frames forward: a player who stops stands still in the game."""
    state = model.initial_state(world_to_camera=start.float())
    forward = torch.zeros(len(start), 8)
    forward[:, 0] = 1.0
    deltas = []
    for i in range(walk + rest):
        d, state = model.step(forward if i < walk else torch.zeros_like(forward), state)
        deltas.append(d)
    c = _centres(torch.stack(deltas, 1), start)
    return float((c[:, -1] - c[:, walk - 1]).norm(dim=-1).mean())


@torch.no_grad()
def evaluate_motion(model: CameraMotion, root: str, split: str = "test", scale_from: str | None = None) -> dict:
    """Rotation and translation errors per frame on ``split`` (free rollouts from each episode's
    first pose) for the model and the fixed constants; ``navigating`` counts only frames whose
    row has a navigation value; with ``scale_from`` (a dataset with poses), the model's
    translations are also scaled by the least-squares factor fitted on its train split."""
    data = MotionEpisodes(root, split, frames=False)
    if data.poses is None:
        raise ValueError(f"{root}: evaluate_motion needs recorded poses (key 'world_to_camera')")
    true = torch.stack([relative_motion(p) for p in data.poses]).float()
    pred, mask = _play(model, data)
    ups = up_in_camera(data.poses).float()
    const = torch.zeros_like(true)
    const[:, 1:] = constant_motion(data.actions[:, 1:].reshape(-1, 8), ups[:, :-1].reshape(-1, 3)).reshape(
        len(true), -1, 4, 4)
    nav = mask & (data.actions[..., :4].abs().sum(-1) > 0)
    out = {"split": split, "episodes": len(data.ids), "frames": int(mask.sum()),
           "model": _errors(pred, true, mask), "model_navigating": _errors(pred, true, nav),
           "constants": _errors(const, true, mask), "constants_navigating": _errors(const, true, nav),
           "no_motion": _errors(torch.eye(4).expand_as(true), true, mask),
           "model_drift": _drift(pred, true, data.poses, data.length),
           "constants_drift": _drift(const, true, data.poses, data.length),
           "rest_drift_m": _rest_drift(model, data.poses[:, 0]),
           "settle_drift_m": _settle_drift(model, data.poses[:, 0]),
           "fov_y_degrees": float(2 * torch.rad2deg(torch.atan(0.5 / model.log_focal.exp()))),
           "true_fov_y_degrees": (float(2 * math.degrees(math.atan(0.5 * data.size[0] / float(data.K[1, 1]))))
                                  if data.K is not None else None)}
    if scale_from is not None:
        scale = _translation_scale(model, MotionEpisodes(scale_from, "train", frames=False))
        scaled = pred.clone()
        scaled[..., :3, 3] *= scale
        out["translation_scale"] = scale
        out["model_scaled"] = _errors(scaled, true, mask)
    return out

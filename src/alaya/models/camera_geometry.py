"""Rigid camera motion in the conventions of ``alaya.models.camera_motion``: axis-angle and twist
<-> matrix, relative motion between recorded poses, world up and pitch in a camera's coordinates,
and OpenGL <-> OpenCV camera axes. Pure functions of tensors."""

from __future__ import annotations

import torch

GL_TO_CV = torch.diag(torch.tensor([1.0, -1.0, -1.0]))     # flips y and z: OpenGL <-> OpenCV camera axes


def axis_angle_to_matrix(w: torch.Tensor) -> torch.Tensor:
    """(..., 3) axis-angle -> (..., 3, 3) rotation (Rodrigues)."""
    theta = w.norm(dim=-1, keepdim=True)[..., None]                           # (..., 1, 1)
    k = torch.zeros(*w.shape[:-1], 3, 3, dtype=w.dtype)
    k[..., 0, 1], k[..., 0, 2], k[..., 1, 2] = -w[..., 2], w[..., 1], -w[..., 0]
    k = k - k.transpose(-1, -2)                                              # [w]x
    small = theta < 1e-6
    a = torch.where(small, 1 - theta ** 2 / 6, torch.sin(theta) / theta.clamp_min(1e-6))
    b = torch.where(small, 0.5 - theta ** 2 / 24, (1 - torch.cos(theta)) / theta.clamp_min(1e-6) ** 2)
    return torch.eye(3, dtype=w.dtype) + a * k + b * (k @ k)


def matrix_to_axis_angle(R: torch.Tensor) -> torch.Tensor:
    """(..., 3, 3) rotation -> (..., 3) axis-angle (angles below 180 degrees)."""
    cos = ((R.diagonal(dim1=-2, dim2=-1).sum(-1) - 1) / 2).clamp(-1 + 1e-7, 1 - 1e-7)
    theta = torch.acos(cos)[..., None]
    v = torch.stack([R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]], -1)
    scale = torch.where(theta < 1e-4, 0.5 + theta ** 2 / 12, theta / (2 * torch.sin(theta).clamp_min(1e-7)))
    return v * scale


def twist_to_matrix(twist: torch.Tensor) -> torch.Tensor:
    """(..., 6) [axis-angle, translation] -> (..., 4, 4) rigid transform."""
    out = torch.zeros(*twist.shape[:-1], 4, 4, dtype=twist.dtype)
    out[..., :3, :3] = axis_angle_to_matrix(twist[..., :3])
    out[..., :3, 3] = twist[..., 3:]
    out[..., 3, 3] = 1
    return out


def matrix_to_twist(T: torch.Tensor) -> torch.Tensor:
    return torch.cat([matrix_to_axis_angle(T[..., :3, :3]), T[..., :3, 3]], -1)


def relative_motion(world_to_camera: torch.Tensor) -> torch.Tensor:
    """(T, 4, 4) recorded poses -> (T, 4, 4) deltas, delta[t] = P[t] P[t-1]^-1 (delta[0] = I)."""
    P = world_to_camera.double()
    out = torch.eye(4, dtype=P.dtype).repeat(len(P), 1, 1)
    out[1:] = P[1:] @ torch.linalg.inv(P[:-1])
    return out.to(world_to_camera.dtype)


def up_in_camera(world_to_camera: torch.Tensor) -> torch.Tensor:
    """(..., 4, 4) GL view matrices -> (..., 3) the world's up axis in camera coordinates."""
    return world_to_camera[..., :3, 2]


def up_from_pitch(pitch_degrees: torch.Tensor) -> torch.Tensor:
    """(B,) camera pitch (+ up) -> (B, 3) world up in a level-rolled GL camera's coordinates."""
    p = torch.deg2rad(pitch_degrees.float())
    return torch.stack([torch.zeros_like(p), torch.cos(p), -torch.sin(p)], -1)


def pitch_of(up: torch.Tensor) -> torch.Tensor:
    """(..., 3) world up in GL camera coordinates -> (...) the camera's pitch in radians (+ up):
    the camera looks down -z, so forward . world up = -up_z."""
    return torch.asin((-up[..., 2]).clamp(-1, 1))


def gl_to_cv(T: torch.Tensor) -> torch.Tensor:
    """(..., 4, 4) a transform between OpenGL camera frames -> the same between OpenCV frames."""
    flip = torch.eye(4, dtype=T.dtype)
    flip[:3, :3] = GL_TO_CV.to(T.dtype)
    return flip @ T @ flip

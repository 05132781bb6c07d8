"""Views of a region's border walls shared by the walls' tests: a level camera at eye height
and a red and blue checker over (along, height)."""

import math

import numpy as np
import torch

EYE = 1.4
SQUARE = 0.48          # metres: the seen wall's checker (4 texels of 0.12 m)


def level_view(yaw_degrees: float) -> torch.Tensor:
    """world_to_camera of a level camera at (0, 0, EYE) looking along the floor direction at yaw (z up)."""
    a = math.radians(yaw_degrees)
    forward = np.array([math.cos(a), math.sin(a), 0.0])
    right = np.array([math.sin(a), -math.cos(a), 0.0])
    up = np.array([0.0, 0.0, 1.0])
    R = np.stack([right, up, -forward])                   # camera x right, y up, looking down -z
    view = np.eye(4)
    view[:3, :3] = R
    view[:3, 3] = -R @ np.array([0.0, 0.0, EYE])
    return torch.from_numpy(view)


def checker(u: np.ndarray, z: np.ndarray) -> np.ndarray:
    """(N, 3) uint8: red and blue squares over (along, height)."""
    red = ((np.floor(u / SQUARE) + np.floor(z / SQUARE)) % 2 == 0)[:, None]
    return np.where(red, [[200, 40, 30]], [[30, 40, 200]]).astype(np.uint8)

"""Views of walls shared by the walls' tests: a level camera at eye height, a red and blue checker
over (along, height), and a striped wall faced at a distance (``facing_wall``)."""

import math

import numpy as np
import torch

from alaya.models.view_warp import pinhole

EYE = 1.4
SQUARE = 0.48          # metres: the seen wall's checker (4 texels of 0.12 m)
SIZE = 128             # pixels: ``facing_wall``'s frames
STRIPE = 0.1           # metres: ``facing_wall``'s stripes (dark, light) up the wall


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


def facing_wall(distance: float, floor: bool = False):
    """(rgb uint8 (H, W, 3), depth (H, W), K, world_to_camera) of a level camera at (0, 0, EYE)
    looking along +y at the wall y = ``distance``, striped up the wall; with ``floor`` the view
    pitched down 60 degrees at the floor z = 0 instead (no wall in view)."""
    K = pinhole(SIZE, 70.0).numpy().astype(np.float64)
    pitch = math.radians(-60.0 if floor else 0.0)
    forward = np.array([0.0, math.cos(pitch), math.sin(pitch)])
    right = np.array([1.0, 0.0, 0.0])
    up = np.cross(right, forward)
    R = np.stack([right, up, -forward])
    w2c = np.eye(4)
    w2c[:3, :3], w2c[:3, 3] = R, -R @ np.array([0.0, 0.0, EYE])
    v, u = np.meshgrid(np.arange(SIZE) + 0.5, np.arange(SIZE) + 0.5, indexing="ij")
    ray = R.T @ np.stack([(u - K[0, 2]) / K[0, 0], -(v - K[1, 2]) / K[1, 1], -np.ones_like(u)]).reshape(3, -1)
    s = (0.0 - EYE) / ray[2] if floor else distance / ray[1]              # along the ray per metre of depth
    hit = np.array([0.0, 0.0, EYE])[:, None] + s * ray
    light = (np.floor(hit[2] / STRIPE) % 2 == 0) if not floor else (np.floor(hit[0] / STRIPE) % 2 == 0)
    rgb = np.where(light[:, None], [[200, 180, 160]], [[100, 90, 80]]).astype(np.uint8).reshape(SIZE, SIZE, 3)
    return rgb, s.reshape(SIZE, SIZE), K, w2c

"""How high the recorded worlds' border walls are, for a border wall no frame of a session shows.

A session draws the walkable region's border as walls (``RegionWalls``); a wall its start frame
shows gets the top its points give, one it does not show needs a guess. The seen walls' median
top is a poor one where a game draws each wall's height at random (ours: 0.8-2.5 m over the
terrain, per wall): a start frame that shows two tall walls then draws the others tall as well,
and the player faces a wall where the game lets it look over a low one. ``border_tops`` measures,
over a dataset's episodes, the tops a session would measure: each episode's first frame (a spawn
view, as a session's start frame is), its recorded depth and camera made into points, and the
walls they show measured as ``RegionWalls.seen_tops`` does. It returns their mean and how they
vary between worlds and within one (``WallDetail.unseen_top`` weighs a world's seen walls by it).
"""

from __future__ import annotations

import numpy as np
import torch

from alaya.data.walkable_region import WalkableRegion
from alaya.models.memory_geometry import camera_points
from alaya.models.region_walls import RegionWalls


def frame_points(depth: np.ndarray, K: np.ndarray, world_to_camera: np.ndarray) -> np.ndarray:
    """(3, N) world points of a frame's ``depth`` (H, W) metres along the view axis (0: the sky,
    left out), its ``K`` (3, 3) and ``world_to_camera`` (4, 4)."""
    depth = np.nan_to_num(np.asarray(depth, np.float64))
    cam = camera_points(torch.from_numpy(depth), torch.from_numpy(np.asarray(K, np.float64))).numpy()
    c2w = np.linalg.inv(np.asarray(world_to_camera, np.float64))
    cam = cam.reshape(3, -1)[:, depth.reshape(-1) > 0]
    return c2w[:3, :3] @ cam + c2w[:3, 3:]


def variance_components(groups: list[np.ndarray]) -> tuple[float, float, float]:
    """(mean, between, within) of values in ``groups`` (each an array of one world's values; at
    least two groups, one with two values): the pooled mean, the variance of the groups' true
    means (the one-way random-effects estimate, at least 0) and the variance within a group."""
    groups = [np.asarray(g, np.float64).reshape(-1) for g in groups if len(g)]
    values = np.concatenate(groups) if groups else np.zeros(0)
    dof = sum(len(g) - 1 for g in groups)
    if len(groups) < 2 or dof < 1:
        raise ValueError(f"groups: expected at least 2 groups and one with 2 values, got sizes {[len(g) for g in groups]}")
    within = sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / dof
    means = np.array([g.mean() for g in groups])
    sizes = np.array([len(g) for g in groups], np.float64)
    between = max(float(means.var(ddof=1) - within * np.mean(1 / sizes)), 0.0)
    return float(values.mean()), between, within


def border_tops(first_frames: list[tuple[np.ndarray, np.ndarray, np.ndarray]], region: WalkableRegion,
                margin: float) -> dict:
    """The border tops episodes' first frames show, each frame (depth (H, W) metres along the view
    axis, K (3, 3), world_to_camera (4, 4)) one world (walls ``margin`` metres beyond ``region``'s
    edges): {"episodes", "tops" (how many), "mean", "between", "within"} (``variance_components``,
    metres and m²), or {"episodes", "tops"} alone where too few walls were seen to tell."""
    walls = RegionWalls(region, margin)
    groups = []
    for depth, K, world_to_camera in first_frames:
        tops = walls.seen_tops(frame_points(depth, K, world_to_camera))
        groups.append(np.array([t for t in tops if t is not None]))
    report = {"episodes": len(groups), "tops": int(sum(len(g) for g in groups))}
    try:
        mean, between, within = variance_components(groups)
    except ValueError:
        return report
    return {**report, "mean": mean, "between": between, "within": within}

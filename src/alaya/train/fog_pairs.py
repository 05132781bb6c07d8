"""Surface points a recording saw at two distances: what a style's fog is learnt from
(``alaya.models.aerial_fog.learn_fog_from_pairs``, fitted per style by ``alaya train wall-detail``).

Frame ``a``'s pixels (a random ``per_frame`` of those with depth within ``max_distance``) are
moved by the recorded depth and cameras into frame ``b``, ``gap`` frames away (both ways); a point
counts where frame ``b`` sees that same surface (its depth there within ``SAME_SURFACE`` of the
point's) and the two cameras are at least ``min_step`` metres apart along it. The game renders a
static world the same from any distance but for its fog, so the pairs' colours differ by the fog
(and a little light that depends on the view, and anything that moved).
"""

from __future__ import annotations

import numpy as np

from alaya.data.geometry import camera_points, project

SAME_SURFACE = 0.02       # a point's depth in the other frame: within this share of it


def surface_pairs(rgb: np.ndarray, depth: np.ndarray, K: np.ndarray, world_to_camera: np.ndarray,
                  rng: np.random.Generator, gaps=(20, 45, 90), every: int = 10, per_frame: int = 400,
                  min_step: float = 2.0, max_distance: float = 60.0) -> np.ndarray:
    """(styles, n, 8) float32 of one episode: per pair, the colour (3,) in [0, 1] in frame ``a``,
    in frame ``b``, and the point's distance (metres) from each camera; ``rgb`` (styles, T, H, W, 3)
    uint8 (each recorded style's frames of the same run), ``depth`` (T, H, W) along the view axis,
    ``K`` (3, 3), ``world_to_camera`` (T, 4, 4). Pairs start every ``every`` frames."""
    rgb, depth = np.asarray(rgb), np.asarray(depth, np.float64)
    K, w2c = np.asarray(K, np.float64), np.asarray(world_to_camera, np.float64)
    T, H, W = depth.shape
    if rgb.ndim != 5 or rgb.shape[1:] != (T, H, W, 3) or K.shape != (3, 3) or w2c.shape != (T, 4, 4):
        raise ValueError(f"rgb, depth, K, world_to_camera: expected (S, T, H, W, 3), (T, H, W), (3, 3), (T, 4, 4), "
                         f"got {rgb.shape}, {depth.shape}, {K.shape}, {w2c.shape}")
    rows = []
    for t in range(0, T, every):
        for gap in gaps:
            if t + gap >= T:
                continue
            for a, b in ((t, t + gap), (t + gap, t)):
                rows.append(_pairs(rgb, depth, K, w2c, a, b, rng, per_frame, min_step, max_distance))
    return np.concatenate(rows, 1) if rows else np.zeros((rgb.shape[0], 0, 8), np.float32)


def _pairs(rgb, depth, K, w2c, a: int, b: int, rng, per_frame: int, min_step: float, max_distance: float) -> np.ndarray:
    """(styles, n, 8): frame ``a``'s sampled points that frame ``b`` sees too (``surface_pairs``)."""
    H, W = depth.shape[1:]
    d = depth[a]
    ii, jj = np.nonzero(np.isfinite(d) & (d > 0) & (d < max_distance))
    if len(ii) > per_frame:
        pick = rng.choice(len(ii), per_frame, replace=False)
        ii, jj = ii[pick], jj[pick]
    points = camera_points(d, K)[ii, jj]                              # (n, 3) camera a
    a_to_b = w2c[b] @ np.linalg.inv(w2c[a])
    moved = points @ a_to_b[:3, :3].T + a_to_b[:3, 3]                # camera b
    uv = project(moved, K)
    seen = np.isfinite(uv).all(1)
    uv = np.where(seen[:, None], uv, -1.0)
    u, v = np.floor(uv[:, 0]).astype(np.int64), np.floor(uv[:, 1]).astype(np.int64)
    seen &= (u >= 0) & (u < W) & (v >= 0) & (v < H)
    u, v = np.where(seen, u, 0), np.where(seen, v, 0)
    along = -moved[:, 2]
    seen &= np.abs(depth[b][v, u] - along) < SAME_SURFACE * along
    da, db = np.linalg.norm(points, axis=1), np.linalg.norm(moved, axis=1)
    seen &= np.abs(db - da) >= min_step
    ii, jj, u, v, da, db = ii[seen], jj[seen], u[seen], v[seen], da[seen], db[seen]
    distances = np.broadcast_to(np.stack([da, db], 1), (rgb.shape[0], len(da), 2))
    colours = np.concatenate([rgb[:, a][:, ii, jj], rgb[:, b][:, v, u]], 2).astype(np.float32) / 255
    return np.concatenate([colours, distances.astype(np.float32)], 2)

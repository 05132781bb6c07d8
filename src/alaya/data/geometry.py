"""Pinhole geometry in the clip contract's conventions.

Camera space is OpenGL's: x right, y up, the camera looks down -z, so a visible point has
z < 0 and its depth (what ``depth`` stores) is ``-z``. ``K`` maps camera space to pixels with
the origin at the top-left pixel's corner and v growing downwards: pixel (row i, column j) has
its centre at (u, v) = (j + 0.5, i + 0.5), and a point (x, y, z) lands on

    u = fx * x / -z + cx,    v = -fy * y / -z + cy.

``world_to_camera`` matrices are OpenGL view matrices (4x4, acting on column vectors).
Background pixels (depth 0 or not finite) are treated as points at infinity.
"""

from __future__ import annotations

import numpy as np


def pixel_centres(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(u, v) pixel-centre coordinates, each (H, W) float64: u = j + 0.5, v = i + 0.5."""
    v, u = np.mgrid[0:height, 0:width].astype(np.float64) + 0.5
    return u, v


def _rays(height: int, width: int, K: np.ndarray) -> np.ndarray:
    """Camera-space rays through pixel centres scaled to depth 1 (z = -1): (H, W, 3) float64."""
    K = np.asarray(K, dtype=np.float64)
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    u, v = pixel_centres(height, width)
    return np.stack([(u - cx) / fx, -(v - cy) / fy, -np.ones_like(u)], axis=-1)


def camera_points(depth: np.ndarray, K: np.ndarray) -> np.ndarray:
    """Back-project a depth map to camera-space points.

    depth: (H, W) linear depth along the viewing axis; K: (3, 3).
    Returns (H, W, 3) float64: ((u - cx) / fx * d, -(v - cy) / fy * d, -d) at pixel centres.
    """
    depth = np.asarray(depth, dtype=np.float64)
    return _rays(*depth.shape, K) * depth[..., None]


def project(points: np.ndarray, K: np.ndarray) -> np.ndarray:
    """Project camera-space points (..., 3) to pixel coordinates (..., 2) as (u, v).

    Points on or behind the camera plane (z >= 0) give NaN.
    """
    K = np.asarray(K, dtype=np.float64)
    points = np.asarray(points, dtype=np.float64)
    d = -points[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), np.nan)
    u = K[0, 0] * points[..., 0] * inv + K[0, 2]
    v = -K[1, 1] * points[..., 1] * inv + K[1, 2]
    return np.stack([u, v], axis=-1)


def _valid_depth(depth: np.ndarray) -> np.ndarray:
    return np.isfinite(depth) & (depth > 0)


def _tangent(points: np.ndarray, depth: np.ndarray, valid: np.ndarray, axis: int) -> np.ndarray:
    """One-sided difference of ``points`` along ``axis`` (0 rows, 1 columns), per pixel taking
    the valid neighbour whose depth is closest, so tangents never straddle a depth edge.
    Returns (H, W, 3) with NaN where neither neighbour is valid."""
    n = depth.shape[axis]
    idx = np.arange(n)
    nxt = np.take(points, np.minimum(idx + 1, n - 1), axis=axis)
    prv = np.take(points, np.maximum(idx - 1, 0), axis=axis)
    shape = [1, 1]
    shape[axis] = n
    has_next = np.take(valid, np.minimum(idx + 1, n - 1), axis=axis) & (idx < n - 1).reshape(shape)
    has_prev = np.take(valid, np.maximum(idx - 1, 0), axis=axis) & (idx > 0).reshape(shape)
    d_next = np.abs(np.take(depth, np.minimum(idx + 1, n - 1), axis=axis) - depth)
    d_prev = np.abs(np.take(depth, np.maximum(idx - 1, 0), axis=axis) - depth)
    use_next = has_next & (~has_prev | (d_next <= d_prev))
    forward = nxt - points
    backward = points - prv
    out = np.where(use_next[..., None], forward, backward)
    out[~(has_next | has_prev)] = np.nan
    return out


def normals_from_depth(depth: np.ndarray, K: np.ndarray) -> np.ndarray:
    """Camera-space unit normals (x right, y up, z towards the camera) from a depth map.

    depth: (H, W) linear depth, 0 or non-finite for background; K: (3, 3).
    Returns (H, W, 3) float64. The normal is cross(dP/dv, dP/du) of the back-projected points,
    which faces the camera for every visible surface; each tangent is a one-sided difference
    towards the neighbour with the closer depth, so planes are exact up to rounding even at
    their silhouette. Pixels with no valid neighbour along a row or column get the unit vector
    towards the camera; background pixels get 0.
    """
    depth = np.asarray(depth, dtype=np.float64)
    valid = _valid_depth(depth)
    safe = np.where(valid, depth, 0.0)
    points = camera_points(safe, K)
    du = _tangent(points, safe, valid, axis=1)  # (H, W, 3) along columns (u grows right)
    dv = _tangent(points, safe, valid, axis=0)  # (H, W, 3) along rows (v grows down)
    n = np.cross(dv, du)
    norm = np.linalg.norm(n, axis=-1, keepdims=True)
    ok = np.isfinite(norm[..., 0]) & (norm[..., 0] > 0)
    n = np.where(ok[..., None], n / np.where(ok, norm[..., 0], 1.0)[..., None], 0.0)
    # Fallback: face the camera (the unit vector from the point towards the origin).
    towards = -points / np.maximum(np.linalg.norm(points, axis=-1, keepdims=True), 1e-30)
    n = np.where((valid & ~ok)[..., None], towards, n)
    n[~valid] = 0.0
    return n


def reproject_flow(
    depth_t: np.ndarray, K: np.ndarray, w2c_t: np.ndarray, w2c_prev: np.ndarray
) -> np.ndarray:
    """Backward optical flow of a static scene between two camera poses.

    Each pixel's surface point at frame t (from ``depth_t``, (H, W)) is moved from camera t to
    camera t-1 and projected: flow = (pixel in t-1) - (pixel in t), (H, W, 2) float64 as
    (du, dv), matching the contract's ``motion`` (the surface at (x, y) in frame t was at
    (x + dx, y + dy) in frame t-1). Background pixels (depth 0 or not finite) are points at
    infinity, whose flow depends on the camera rotation only. Points that fall on or behind
    camera t-1 get NaN.

    Example: camera t sits dx metres to the right of camera t-1 (same orientation), looking at a
    fronto-parallel plane at depth d: every pixel's flow is (+fx * dx / d, 0).
    """
    depth_t = np.asarray(depth_t, dtype=np.float64)
    w2c_t = np.asarray(w2c_t, dtype=np.float64)
    w2c_prev = np.asarray(w2c_prev, dtype=np.float64)
    H, W = depth_t.shape
    valid = _valid_depth(depth_t)
    rays = _rays(H, W, K)  # (H, W, 3), z = -1
    t_to_prev = w2c_prev @ np.linalg.inv(w2c_t)  # (4, 4) camera t -> camera t-1
    R, trans = t_to_prev[:3, :3], t_to_prev[:3, 3]
    p = rays * np.where(valid, depth_t, 0.0)[..., None]
    p_prev = p @ R.T + np.where(valid[..., None], trans, 0.0)  # infinity: rotation only
    p_prev = np.where(valid[..., None], p_prev, rays @ R.T)
    u, v = pixel_centres(H, W)
    return project(p_prev, K) - np.stack([u, v], axis=-1)


def view_pitch_degrees(world_to_camera) -> np.ndarray:
    """Camera pitch (up positive, degrees) of ``world_to_camera`` view matrices (..., 4, 4) as
    episodes store them (OpenGL: the camera looks down its -z axis; world z is up)."""
    forward_z = -np.asarray(world_to_camera, np.float64)[..., 2, 2]
    return np.degrees(np.arcsin(np.clip(forward_z, -1.0, 1.0))).astype(np.float32)

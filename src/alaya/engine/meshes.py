"""Triangle meshes for MuJoCo geom types, in the geom's local frame (MuJoCo conventions).

Every function returns ``(positions (V, 3), normals (V, 3), triangles (F, 3))`` with outward
unit normals and counter-clockwise winding seen from outside. Boxes are flat-shaded; curved
surfaces carry smooth analytic normals.
"""

from __future__ import annotations

import numpy as np

Mesh = tuple[np.ndarray, np.ndarray, np.ndarray]


def box(half: tuple[float, float, float]) -> Mesh:
    hx, hy, hz = half
    pos, nrm, tri = [], [], []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            n = np.zeros(3)
            n[axis] = sign
            u = np.zeros(3)
            v = np.zeros(3)
            u[(axis + 1) % 3] = 1.0
            v[(axis + 2) % 3] = 1.0
            if sign < 0:
                u, v = v, u
            base = len(pos)
            for a, b in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
                p = n + a * u + b * v
                pos.append(p * (hx, hy, hz))
                nrm.append(n)
            tri += [(base, base + 1, base + 2), (base, base + 2, base + 3)]
    return np.array(pos), np.array(nrm), np.array(tri)


def _revolve(profile: np.ndarray, normals: np.ndarray, segments: int) -> Mesh:
    """Revolve a (r, z) profile with (nr, nz) normals around the z axis."""
    angles = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    c, s = np.cos(angles), np.sin(angles)
    rings = len(profile)
    pos = np.stack([profile[:, None, 0] * c, profile[:, None, 0] * s,
                    np.repeat(profile[:, None, 1], segments, 1)], -1).reshape(-1, 3)
    nrm = np.stack([normals[:, None, 0] * c, normals[:, None, 0] * s,
                    np.repeat(normals[:, None, 1], segments, 1)], -1).reshape(-1, 3)
    tri = []
    for i in range(rings - 1):
        for j in range(segments):
            a, b = i * segments + j, i * segments + (j + 1) % segments
            c0, d = a + segments, b + segments
            tri += [(a, b, d), (a, d, c0)]
    return pos, nrm, np.array(tri)


def sphere(radius: float, segments: int = 16, rings: int = 8) -> Mesh:
    theta = np.linspace(np.pi, 0, rings + 1)          # from the south pole up
    n = np.stack([np.sin(theta), np.cos(theta)], -1)
    return _revolve(n * radius, n, segments)


def capsule(radius: float, half_length: float, segments: int = 16, rings: int = 4) -> Mesh:
    lower = np.linspace(np.pi, np.pi / 2, rings + 1)
    upper = np.linspace(np.pi / 2, 0, rings + 1)
    n = np.concatenate([np.stack([np.sin(lower), np.cos(lower)], -1),
                        np.stack([np.sin(upper), np.cos(upper)], -1)])
    offset = np.concatenate([np.full(rings + 1, -half_length), np.full(rings + 1, half_length)])
    profile = n * radius + np.stack([np.zeros_like(offset), offset], -1)
    return _revolve(profile, n, segments)


def cylinder(radius: float, half_length: float, segments: int = 16) -> Mesh:
    side = _revolve(np.array([[radius, -half_length], [radius, half_length]]),
                    np.array([[1.0, 0.0], [1.0, 0.0]]), segments)
    parts = [side]
    angles = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    for sign in (-1.0, 1.0):
        ring = np.stack([radius * np.cos(angles), radius * np.sin(angles),
                         np.full(segments, sign * half_length)], -1)
        pos = np.concatenate([[[0, 0, sign * half_length]], ring])
        nrm = np.tile([0, 0, sign], (segments + 1, 1))
        tri = [(0, 1 + j, 1 + (j + 1) % segments) for j in range(segments)]
        tri = np.array(tri) if sign > 0 else np.array(tri)[:, ::-1]
        parts.append((pos, nrm.astype(float), tri))
    return merge(parts)


def heightfield(heights: np.ndarray, size: tuple[float, float, float, float]) -> Mesh:
    """Grid mesh of a MuJoCo height field: rows run along y, columns along x."""
    rx, ry = size[0], size[1]
    n_rows, n_cols = heights.shape
    xs = np.linspace(-rx, rx, n_cols)
    ys = np.linspace(-ry, ry, n_rows)
    gx, gy = np.meshgrid(xs, ys)
    pos = np.stack([gx, gy, heights], -1).reshape(-1, 3)
    dzdx = np.gradient(heights, xs, axis=1)
    dzdy = np.gradient(heights, ys, axis=0)
    nrm = np.stack([-dzdx, -dzdy, np.ones_like(heights)], -1).reshape(-1, 3)
    nrm /= np.linalg.norm(nrm, axis=1, keepdims=True)
    tri = []
    for i in range(n_rows - 1):
        for j in range(n_cols - 1):
            a = i * n_cols + j
            tri += [(a, a + 1, a + n_cols + 1), (a, a + n_cols + 1, a + n_cols)]
    return pos, nrm, np.array(tri)


def merge(parts: list[Mesh]) -> Mesh:
    pos, nrm, tri, offset = [], [], [], 0
    for p, n, t in parts:
        pos.append(p)
        nrm.append(n)
        tri.append(np.asarray(t) + offset)
        offset += len(p)
    return np.concatenate(pos), np.concatenate(nrm), np.concatenate(tri)

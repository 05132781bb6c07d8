"""geometry: conventions of back-projection, normals from depth and reprojected flow,
checked against analytic cases."""

from __future__ import annotations

import numpy as np

from alaya.data.geometry import camera_points, normals_from_depth, project, reproject_flow
from alaya.data.synthetic import make_synthetic_clip

H, W = 12, 16
K = np.array([[20.0, 0, 8.5], [0, 22.0, 6.5], [0, 0, 1]])  # principal point on a pixel centre


def _pose(R_c2w: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """OpenGL view matrix of a camera with camera-to-world rotation R at ``centre``."""
    w2c = np.eye(4)
    w2c[:3, :3] = R_c2w.T
    w2c[:3, 3] = -R_c2w.T @ centre
    return w2c


def _rot_y(a: float) -> np.ndarray:
    return np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])


def test_camera_points_conventions() -> None:
    depth = np.full((H, W), 2.0)
    p = camera_points(depth, K)
    assert p.shape == (H, W, 3)
    np.testing.assert_allclose(p[..., 2], -2.0)
    # Row 0 is the top of the image (y up), column 0 the left (x right).
    assert p[0, 0, 0] < 0 and p[0, 0, 1] > 0
    assert p[-1, -1, 0] > 0 and p[-1, -1, 1] < 0
    # The principal point's pixel (row 6, column 8) looks straight down -z.
    np.testing.assert_allclose(p[6, 8], [0, 0, -2])
    np.testing.assert_allclose(p[0, 0], [(0.5 - 8.5) / 20 * 2, -(0.5 - 6.5) / 22 * 2, -2])
    uv = project(p, K)
    v, u = np.mgrid[0:H, 0:W] + 0.5
    np.testing.assert_allclose(uv, np.stack([u, v], -1), atol=1e-12)


def test_normals_fronto_parallel_and_floor() -> None:
    n = normals_from_depth(np.full((H, W), 3.0), K)
    np.testing.assert_allclose(n, np.broadcast_to([0, 0, 1], (H, W, 3)), atol=1e-12)
    # A floor 1.5 m below a level camera: rows below the horizon see y = -1.5.
    v = np.arange(H)[:, None] + 0.5 + np.zeros((1, W))
    below = v > K[1, 2] + 0.25
    depth = np.where(below, 1.5 * K[1, 1] / np.where(below, v - K[1, 2], 1.0), 0.0)
    n = normals_from_depth(depth, K)
    np.testing.assert_allclose(n[below], np.broadcast_to([0, 1, 0], n[below].shape), atol=1e-9)
    assert (n[~below] == 0).all()


def test_normals_match_synthetic_plane() -> None:
    clip = make_synthetic_clip(T=3, H=24, W=32, S=1)
    for t in range(3):
        m = clip["mask"][t] == 1
        n = normals_from_depth(clip["depth"][t], clip["K"])
        # Pixels with a geometry neighbour both along the row and the column.
        pad = np.pad(m, 1)
        horiz = pad[1:-1, :-2] | pad[1:-1, 2:]
        vert = pad[:-2, 1:-1] | pad[2:, 1:-1]
        ok = m & horiz & vert
        assert ok.sum() > 0.9 * m.sum()
        np.testing.assert_allclose(n[ok], clip["normal"][t][ok].astype(np.float64), atol=2e-3)
        np.testing.assert_allclose(np.linalg.norm(n[m], axis=-1), 1.0, atol=1e-9)
        assert (n[~m] == 0).all()


def test_flow_of_sideways_translation() -> None:
    d, dx, dy = 4.0, 0.3, 0.2
    depth = np.full((H, W), d)
    prev = _pose(np.eye(3), np.zeros(3))
    # Camera t is dx to the right of camera t-1: a point seen at u in t was at u + fx dx / d.
    cur = _pose(np.eye(3), np.array([dx, 0, 0]))
    flow = reproject_flow(depth, K, cur, prev)
    np.testing.assert_allclose(flow[..., 0], K[0, 0] * dx / d)
    np.testing.assert_allclose(flow[..., 1], 0, atol=1e-12)
    assert flow[..., 0].min() > 0
    # Camera t moved up: things sit lower in t, so in t-1 they were higher (smaller v).
    cur = _pose(np.eye(3), np.array([0, dy, 0]))
    flow = reproject_flow(depth, K, cur, prev)
    np.testing.assert_allclose(flow[..., 1], -K[1, 1] * dy / d)
    np.testing.assert_allclose(flow[..., 0], 0, atol=1e-12)
    np.testing.assert_allclose(reproject_flow(depth, K, prev, prev), 0)


def test_flow_of_rotation_ignores_depth() -> None:
    a = np.radians(3.0)
    prev = _pose(np.eye(3), np.zeros(3))
    cur = _pose(_rot_y(a), np.zeros(3))  # camera t yawed left by a
    near = reproject_flow(np.full((H, W), 1.0), K, cur, prev)
    far = reproject_flow(np.zeros((H, W)), K, cur, prev)  # background: points at infinity
    np.testing.assert_allclose(near, far, atol=1e-9)
    # The centre pixel looks a to the left of where it looked before: it was left in t-1.
    np.testing.assert_allclose(near[6, 8], [-K[0, 0] * np.tan(a), 0], atol=1e-9)


def test_flow_moves_pixels_onto_their_previous_position() -> None:
    """Brute force: project the synthetic plane's 3D points with the previous camera."""
    clip = make_synthetic_clip(T=2, H=12, W=16, S=1)
    Kc, w2c = clip["K"].astype(np.float64), clip["world_to_camera"].astype(np.float64)
    p_cam = camera_points(clip["depth"][1], Kc)
    p_world = (np.concatenate([p_cam, np.ones((12, 16, 1))], -1) @ np.linalg.inv(w2c[1]).T)
    p_prev = (p_world @ w2c[0].T)[..., :3]
    v, u = np.mgrid[0:12, 0:16] + 0.5
    expected = project(p_prev, Kc) - np.stack([u, v], -1)
    m = clip["mask"][1] == 1
    flow = reproject_flow(clip["depth"][1], Kc, w2c[1], w2c[0])
    np.testing.assert_allclose(flow[m], expected[m], atol=1e-6)

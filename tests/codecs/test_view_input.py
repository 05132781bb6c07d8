"""``view_input``: world-space normals and view rays from the clip's camera, on known cameras."""

import numpy as np
import pytest
import torch

from alaya.codecs.gbuffer import VIEW_INPUT_CHANNELS, view_input

K = np.array([[16.0, 0, 8], [0, 16.0, 8], [0, 0, 1]], np.float32)


def camera(yaw_degrees: float, position=(0.0, 0.0, 0.0)) -> np.ndarray:
    """world_to_camera of a camera turned by ``yaw`` about the world's up axis (z)."""
    a = np.radians(yaw_degrees)
    c2w = np.eye(4)
    c2w[:3, :3] = [[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]]
    c2w[:3, 3] = position
    return np.linalg.inv(c2w)[None].astype(np.float32)


def normals(n) -> np.ndarray:
    return np.broadcast_to(np.asarray(n, np.float16), (1, 16, 16, 3)).copy()


def test_identity_camera_keeps_normals_and_gives_pinhole_rays():
    x = view_input(normals((0, 0, 1)), K, camera(0))
    assert x.shape == (1, VIEW_INPUT_CHANNELS, 16, 16)
    assert torch.allclose(x[0, 0:3], torch.tensor([0.0, 0, 1])[:, None, None])
    v, u = 3, 12                                            # row 3 is above the centre: y > 0
    ray = np.array([(u + 0.5 - 8) / 16, -(v + 0.5 - 8) / 16, -1.0])
    assert np.allclose(x[0, 3:6, v, u].numpy(), ray / np.linalg.norm(ray), atol=1e-6)
    assert np.allclose(x[0, 6:8, v, u].numpy(), ray[:2], atol=1e-6)
    assert torch.allclose(x[0, 3:6].norm(dim=0), torch.ones(16, 16))


def test_turning_the_camera_turns_world_normals_not_camera_ones():
    """A surface facing the camera's right is world +x for a camera looking down -z with x
    right, and world +y once the camera has turned 90 degrees left about up; translation does
    not matter; the image-position channels do not change."""
    right = normals((1, 0, 0))
    a, b = view_input(right, K, camera(0)), view_input(right, K, camera(90, (5.0, -2.0, 1.0)))
    assert torch.allclose(a[0, 0:3, 0, 0], torch.tensor([1.0, 0, 0]), atol=1e-6)
    assert torch.allclose(b[0, 0:3, 0, 0], torch.tensor([0.0, 1, 0]), atol=1e-6)
    assert torch.allclose(a[0, 6:8], b[0, 6:8])
    assert not torch.allclose(a[0, 3:6], b[0, 3:6])


def test_background_has_no_normal():
    x = view_input(normals((0, 0, 0)), K, camera(30))
    assert not x[0, 0:3].any() and x[0, 3:6].any()


def test_bad_cameras_are_named():
    with pytest.raises(ValueError, match="K"):
        view_input(normals((0, 0, 1)), K[:2], camera(0))
    with pytest.raises(ValueError, match="world_to_camera"):
        view_input(normals((0, 0, 1)), K, np.concatenate([camera(0), camera(1)]))
    with pytest.raises(ValueError, match="focal"):
        view_input(normals((0, 0, 1)), np.zeros((3, 3)), camera(0))
    bad = normals((0, 0, 1))
    bad[0, 2, 2] = np.nan
    with pytest.raises(ValueError, match="normal"):
        view_input(bad, K, camera(0))


def test_model_view_input_adds_the_gbuffer_and_zeroes_an_unknown_camera():
    from alaya.codecs.gbuffer import PIXEL_VIEW_CHANNELS, gbuffer_input, model_view_input
    rng = np.random.default_rng(0)
    frame = {"normal": normals((0, 0, 1)), "depth": rng.uniform(1, 5, (1, 16, 16)).astype(np.float32),
             "albedo": rng.integers(0, 255, (1, 16, 16, 3), dtype=np.uint8),
             "roughness": rng.integers(0, 255, (1, 16, 16), dtype=np.uint8),
             "metallic": rng.integers(0, 255, (1, 16, 16), dtype=np.uint8)}
    full = model_view_input({**frame, "K": K, "world_to_camera": camera(30)}, PIXEL_VIEW_CHANNELS)
    assert full.shape == (1, PIXEL_VIEW_CHANNELS, 16, 16)
    assert torch.equal(full[:, :VIEW_INPUT_CHANNELS], view_input(frame["normal"], K, camera(30)))
    assert torch.equal(full[:, VIEW_INPUT_CHANNELS:], gbuffer_input(frame))
    unknown = model_view_input(frame, PIXEL_VIEW_CHANNELS)          # no camera
    assert not unknown[:, :VIEW_INPUT_CHANNELS].any() and torch.equal(unknown[:, VIEW_INPUT_CHANNELS:], full[:, VIEW_INPUT_CHANNELS:])
    assert model_view_input(frame, 0) is None
    with pytest.raises(ValueError, match="view channels"):
        model_view_input(frame, 5)

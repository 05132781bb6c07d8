"""Camera paths compared relative to their own start: another world origin changes nothing,
a known walk or turn gives its distance or angle, and bad paths are named."""

import math

import numpy as np
import pytest

from alaya.evaluation.live_camera import camera_errors, relative_cameras


def rigid(yaw_degrees: float, centre) -> np.ndarray:
    """world_to_camera of a camera at ``centre`` turned ``yaw_degrees`` about the world's z."""
    a = math.radians(yaw_degrees)
    R = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1.0]])
    to_world = np.eye(4)
    to_world[:3, :3], to_world[:3, 3] = R, centre
    return np.linalg.inv(to_world)


def path(steps: int, yaw_per_step: float = 0.0, step=(0.1, 0.0, 0.0)) -> np.ndarray:
    return np.stack([rigid(k * yaw_per_step, np.multiply(step, k)) for k in range(steps + 1)])


def test_the_same_path_in_another_world_is_no_error():
    walk = path(20, yaw_per_step=3.0)
    elsewhere = np.linalg.inv(rigid(70.0, (5.0, -2.0, 1.0)))            # a world moved and turned
    moved = walk @ elsewhere
    err = camera_errors(walk, moved)
    assert np.allclose(err["position"], 0, atol=1e-9) and np.allclose(err["rotation"], 0, atol=1e-5)
    centres, rotations = relative_cameras(walk)
    assert np.allclose(centres[0], 0) and np.allclose(rotations[0], np.eye(3))


def test_a_longer_walk_and_a_wider_turn_are_measured():
    err = camera_errors(path(10, step=(0.15, 0, 0)), path(10, step=(0.1, 0, 0)))
    assert np.allclose(err["position"], 0.05 * np.arange(11)) and np.allclose(err["rotation"], 0, atol=1e-5)
    turned = camera_errors(path(10, yaw_per_step=4.0, step=(0, 0, 0)), path(10, yaw_per_step=3.0, step=(0, 0, 0)))
    assert np.allclose(turned["rotation"], np.arange(11), atol=1e-4) and np.allclose(turned["position"], 0)


def test_bad_paths_are_named():
    with pytest.raises(ValueError, match="disagree"):
        camera_errors(path(3), path(4))
    with pytest.raises(ValueError, match="world_to_camera"):
        relative_cameras(np.zeros((3, 3, 3)))
    bad = path(3)
    bad[2, 0, 3] = np.nan
    with pytest.raises(ValueError, match="not finite"):
        relative_cameras(bad)

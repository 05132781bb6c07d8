"""The region recorded players stood in (``WalkableRegion``): a convex hull of camera centres on the
floor that a walk may not leave; it slides along the edge it meets, as a game's collision does."""

import json

import numpy as np
import pytest

from alaya.data.walkable_region import WalkableRegion, convex_hull


def _square(half: float = 2.0) -> WalkableRegion:
    rng = np.random.default_rng(0)
    inside = rng.uniform(-half, half, (200, 2))
    corners = np.array([[-half, -half], [half, -half], [half, half], [-half, half]])
    return WalkableRegion(convex_hull(np.concatenate([inside, corners, [[0.0, -half]]])))


def test_the_hull_is_the_corners_counter_clockwise():
    hull = _square().hull
    assert len(hull) == 4                                     # interior and edge points dropped
    assert {tuple(v) for v in hull} == {(-2, -2), (2, -2), (2, 2), (-2, 2)}
    area = 0.5 * np.sum(hull[:, 0] * np.roll(hull[:, 1], -1) - np.roll(hull[:, 0], -1) * hull[:, 1])
    assert area == pytest.approx(16.0)                        # positive: counter-clockwise


def test_a_walk_inside_is_kept_and_one_out_slides_along_the_edge():
    region = _square()
    assert region.contains([1.9, 0.0]) and region.contains([2.0, 2.0]) and not region.contains([2.1, 0.0])
    np.testing.assert_allclose(region.walk([0, 0], [0.5, 0.3]), [0.5, 0.3])
    np.testing.assert_allclose(region.walk([1.9, 0.0], [2.1, 0.2]), [2.0, 0.2])      # slides: y goes on
    np.testing.assert_allclose(region.walk([1.9, 1.9], [2.3, 2.4]), [2.0, 2.0])      # into a corner: stops there
    np.testing.assert_allclose(region.nearest([0.5, -3.0]), [0.5, -2.0])


def test_a_start_outside_may_only_walk_back_towards_it():
    region = _square()
    np.testing.assert_allclose(region.walk([3.0, 0.0], [2.9, 0.0]), [2.9, 0.0])      # towards: allowed
    np.testing.assert_allclose(region.walk([3.0, 0.0], [3.1, 0.0]), [3.0, 0.0])      # away: stays


def test_a_start_a_rounding_error_outside_the_edge_goes_on_sliding():
    # a camera that slid onto the edge comes back from a float32 view matrix a hair outside it; it
    # must slide on along the edge (it stuck there, and a live scene's camera parted from the game's)
    region = _square()
    start = [float(np.float32(1.3)), float(np.nextafter(np.float32(2.0), np.float32(3.0)) + 2e-6)]
    assert not region.contains(start)
    np.testing.assert_allclose(region.walk(start, [1.2, 2.1]), [1.2, 2.0])               # slides on
    np.testing.assert_allclose(region.walk([1.3, 2.0 + 5e-3], [1.2, 2.1]), [1.3, 2.005])  # truly outside: stays


def test_from_cameras_takes_the_camera_centres_not_their_translations():
    views = []
    for x, y in [(1, 1), (4, 1), (4, 3), (1, 3), (2, 2)]:
        yaw = np.radians(30.0 * x)
        R = np.array([[np.cos(yaw), np.sin(yaw), 0], [0, 0, 1], [np.sin(yaw), -np.cos(yaw), 0]])
        m = np.eye(4)
        m[:3, :3], m[:3, 3] = R, -R @ np.array([x, y, 1.4])
        views.append(m)
    hull = WalkableRegion.from_cameras(np.stack(views)).hull
    assert {tuple(np.round(v, 6)) for v in hull} == {(1, 1), (4, 1), (4, 3), (1, 3)}


def test_save_and_load_round_trip_and_bad_regions_are_named(tmp_path):
    region = _square()
    region.save(tmp_path / "region.json", frames=204)
    body = json.loads((tmp_path / "region.json").read_text())
    assert body["frames"] == 204
    np.testing.assert_array_equal(WalkableRegion.load(tmp_path / "region.json").hull, region.hull)
    (tmp_path / "bad.json").write_text('{"hull": [[0, 0], [1, 0]]}')
    with pytest.raises(ValueError, match="bad.json.*hull"):
        WalkableRegion.load(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="hull"):
        WalkableRegion(np.array([[0, 0], [0, 1], [1, 1], [1, 0.0]]))              # clockwise
    with pytest.raises(ValueError, match="hull"):
        WalkableRegion(np.array([[0, 0], [1, 0], [np.nan, 1.0]]))
    with pytest.raises(ValueError, match="one line"):
        convex_hull(np.array([[0, 0], [1, 1], [2, 2.0]]))
    with pytest.raises(ValueError, match="at least 3"):
        convex_hull(np.array([[0, 0], [0, 0.0]]))


def test_the_region_of_cameras_is_the_smallest_rectangle_so_corners_no_one_reached_stay_in():
    from alaya.data.walkable_region import bounding_rectangle
    rng = np.random.default_rng(1)
    pts = rng.uniform(-7, 7, (400, 2))
    pts = pts[np.abs(pts).sum(1) < 12]                               # no one reached the corners
    pts = np.concatenate([pts, [[7, 0], [-7, 0], [0, 7], [0, -7]]])
    yaw = np.radians(25.0)
    R = np.array([[np.cos(yaw), -np.sin(yaw)], [np.sin(yaw), np.cos(yaw)]])
    rect = WalkableRegion(bounding_rectangle(pts @ R.T))             # a rotated arena
    assert len(rect.hull) == 4
    side = np.linalg.norm(np.roll(rect.hull, -1, 0) - rect.hull, axis=1)
    np.testing.assert_allclose(side, 14.0, atol=0.2)                  # the square, not the cut hull
    assert rect.contains(R @ [6.8, 6.8]) and not rect.contains(R @ [7.2, 0.0])
    assert all(rect.contains(p) for p in pts @ R.T)

"""The height a border wall no frame showed is drawn at (``WallDetail.unseen_top``), learnt from
the border tops recorded first frames show (``alaya.train.border_tops``)."""

import math

import numpy as np
import pytest
import torch

from alaya.data.walkable_region import WalkableRegion
from alaya.models.region_walls import RegionWalls
from alaya.models.wall_detail import WallDetail, WallDetailConfig
from alaya.train.border_tops import border_tops, variance_components

SIZE = 64
EYE = 1.4
HALF = 2.0             # the region: [-2, 2]^2 ...
MARGIN = 0.6           # ... its walls 0.6 m beyond
SQUARE = np.array([[-HALF, -HALF], [HALF, -HALF], [HALF, HALF], [-HALF, HALF]])


def test_variance_components_recover_how_worlds_and_walls_vary():
    rng = np.random.default_rng(0)
    worlds = rng.normal(2.0, 0.3, 2000)                                  # between: 0.09
    groups = [w + rng.normal(0, 0.5, rng.integers(1, 4)) for w in worlds]   # within: 0.25
    mean, between, within = variance_components(groups)
    assert mean == pytest.approx(2.0, abs=0.05)
    assert between == pytest.approx(0.09, abs=0.03) and within == pytest.approx(0.25, abs=0.03)
    independent = [rng.uniform(0.8, 2.5, 3) for _ in range(300)]         # each wall its own height
    assert variance_components(independent)[1] < 0.02
    with pytest.raises(ValueError, match="groups"):
        variance_components([np.array([1.0, 2.0])])
    with pytest.raises(ValueError, match="groups"):
        variance_components([np.array([1.0]), np.array([2.0])])


def test_an_unseen_walls_top_weighs_the_seen_walls_as_far_as_a_world_shares_heights():
    independent = WallDetail(WallDetailConfig(top_mean=1.9, top_between=0.0, top_within=0.25))
    assert independent.unseen_top([2.4, 2.5]) == pytest.approx(1.9)            # the seen walls say nothing
    shared = WallDetail(WallDetailConfig(top_mean=1.9, top_between=0.25, top_within=0.0))
    assert shared.unseen_top([2.4, 2.6]) == pytest.approx(2.5)                 # one height per world
    both = WallDetail(WallDetailConfig(top_mean=2.0, top_between=0.1, top_within=0.2))
    assert both.unseen_top([3.0]) == pytest.approx(2.0 + 1 / 3)               # 0.1 / (0.1 + 0.2)
    assert both.unseen_top([3.0, 3.0]) == pytest.approx(2.5)                  # 0.2 / (0.2 + 0.2)
    assert both.unseen_top([]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="top_mean"):
        WallDetail(WallDetailConfig()).unseen_top([2.0])
    with pytest.raises(ValueError, match="seen"):
        both.unseen_top([float("nan")])
    with pytest.raises(ValueError, match="top_within"):
        WallDetailConfig(top_within=-0.1)


def wall_points(x: float, height: float) -> np.ndarray:
    """(3, N) points on the wall at x = ``x`` from the floor to ``height``."""
    y, z = np.meshgrid(np.arange(-2.5, 2.5, 0.03), np.arange(0.06, height, 0.03))
    return np.stack([np.full(y.size, x), y.ravel(), z.ravel()])


def test_a_wall_no_point_shows_is_drawn_at_the_recorded_top_not_the_seen_walls():
    region = WalkableRegion(SQUARE)
    grey = lambda xyz: np.full((xyz.shape[1], 3), 128, np.uint8)                  # noqa: E731
    xyz = wall_points(HALF + MARGIN, 2.4)
    plain = RegionWalls(region, MARGIN)
    assert plain.learn(xyz, grey(xyz)) == 1
    seen_top = [t for t in plain.seen_tops(xyz) if t is not None]
    assert len(seen_top) == 1 and seen_top[0] == pytest.approx(2.28, abs=0.02)   # (the 95th percentile)
    assert [w.top for w in plain.walls] == pytest.approx(seen_top * 4)         # without: the seen walls' median
    detail = WallDetail(WallDetailConfig(tiles=2, tile=8, levels=2, material_levels=3, top_mean=1.5, top_within=0.25))
    learnt = RegionWalls(region, MARGIN, detail=detail)
    learnt.learn(xyz, grey(xyz))
    tops = [w.top for w in learnt.walls]
    assert sorted(tops) == pytest.approx([1.5, 1.5, 1.5, max(tops)]) and max(tops) > 2.2


def level_camera(x: float, y: float, yaw_degrees: float) -> np.ndarray:
    a = math.radians(yaw_degrees)
    forward, up = np.array([math.cos(a), math.sin(a), 0.0]), np.array([0.0, 0.0, 1.0])
    R = np.stack([np.cross(forward, up), up, -forward])
    view = np.eye(4)
    view[:3, :3], view[:3, 3] = R, -R @ np.array([x, y, EYE])
    return view


def box_depth(view: np.ndarray, K: np.ndarray, heights: list[float]) -> np.ndarray:
    """(SIZE, SIZE) depth along the view axis of a floor and four walls (x = +w, y = +w, x = -w,
    y = -w, w = HALF + MARGIN) of ``heights``, seen by ``view``; 0 where a ray meets neither."""
    from alaya.models.sky_dome import pixel_directions
    d = pixel_directions(torch.from_numpy(K), torch.from_numpy(view), SIZE, SIZE).double().numpy()   # (3, HW)
    eye = np.linalg.inv(view)[:3, 3]
    w, best = HALF + MARGIN, np.full(d.shape[1], np.inf)
    for axis, sign, h in ((0, 1, heights[0]), (1, 1, heights[1]), (0, -1, heights[2]), (1, -1, heights[3])):
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (sign * w - eye[axis]) / d[axis]
        z, other = eye[2] + t * d[2], eye[1 - axis] + t * d[1 - axis]
        best = np.where((t > 0) & (z >= 0) & (z <= h) & (np.abs(other) <= w) & (t < best), t, best)
    with np.errstate(divide="ignore", invalid="ignore"):
        floor = -eye[2] / d[2]
    best = np.where((floor > 0) & (floor < best), floor, best)
    along = best * (-view[2, :3] @ d)
    return np.where(np.isfinite(best), along, 0.0).reshape(SIZE, SIZE)


def test_border_tops_are_measured_from_each_episodes_first_frame(tmp_path):
    from alaya.data.episodes import EpisodeDataset, EpisodesMeta, write_episode, write_meta
    from alaya.models.view_warp import pinhole
    K = pinhole(SIZE, 70.0).double().numpy()
    meta = EpisodesMeta.new(resolution=(SIZE, SIZE), fps=16.0, source="test", styles={"day": ["a day"]})
    (tmp_path / "episodes").mkdir()
    rng = np.random.default_rng(4)
    seen = []
    corners = [level_camera(x, y, 0.0) for x, y in SQUARE]      # later frames: the players reach the corners
    for e in range(8):
        heights = list(rng.uniform(0.8, 2.5, 4))
        yaw = 45.0 + 90.0 * (e % 4)                             # into the corner of walls e % 4 and the next
        views = [level_camera(0.0, 0.0, yaw)] + corners
        depth = np.stack([box_depth(v, K, heights) for v in views])
        seen += [heights[e % 4], heights[(e + 1) % 4]]
        ep = {"rgb": np.zeros((1, len(views), SIZE, SIZE, 3), np.uint8), "styles": np.array(["day"]),
              "actions": np.zeros((len(views), 8), np.float32), "depth": depth.astype(np.float16),
              "K": K.astype(np.float32), "world_to_camera": np.stack(views).astype(np.float32)}
        write_episode(tmp_path / "episodes" / f"e{e}.npz", ep)
        meta.episodes[f"e{e}"] = {"split": "train", "frames": len(views), "seed": None}
    write_meta(tmp_path, meta)
    ds = EpisodeDataset(tmp_path)
    region = WalkableRegion.from_cameras(np.concatenate([ds.load(e)["world_to_camera"] for e in ds.ids()]))
    report = border_tops([(ep["depth"][0], ep["K"], ep["world_to_camera"][0]) for ep in map(ds.load, ds.ids())],
                         region, MARGIN)
    assert report["episodes"] == 8 and report["tops"] == 16
    assert report["mean"] == pytest.approx(np.mean(seen), abs=0.15)       # (a 95th percentile: a little low)
    assert report["within"] > report["between"]

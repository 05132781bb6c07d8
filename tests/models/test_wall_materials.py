"""Walls' materials (``alaya.models.wall_detail``, ``alaya.train.wall_detail``): whole close-up
tiles made to repeat in phase at full strength, chosen to span the recorded walls' range of detail,
only where evenly lit; looked up tiled, interpolated near and averaged far; and drawn on a border
no frame showed, picked per wall by the session's seed."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from alaya.data.walkable_region import WalkableRegion
from alaya.models.region_walls import RegionWalls
from alaya.models.view_warp import pinhole
from alaya.models.wall_detail import WallDetail, WallDetailConfig
from alaya.models.wall_materials import periodic_in_phase
from alaya.train.wall_detail import representative

EYE = 1.4              # metres: the camera's height over the floor


def test_courses_that_do_not_fit_the_tile_repeat_in_phase_at_full_strength():
    """Courses 3.2 texels tall (a period of 6.4) in a 32-texel tile: a cross-fade at half the tile
    blends them out of phase and fades them; the in-phase repeat keeps their strength and shades,
    and a random grain keeps its strength and repeats without a seam."""
    rows = torch.arange(32, dtype=torch.float64)
    courses = (0.2 * torch.sign(torch.sin(2 * math.pi * (rows + 0.5) / 6.4)))[:, None].expand(32, 32)[None]
    step = lambda t, dim: (t - t.roll(1, dim)).abs()                   # noqa: E731  (wrap included)
    assert float(step(courses, -2)[0, 0].mean()) == pytest.approx(0.4)   # the seam where it repeats
    plain = 1 - ((rows + 0.5) * 2 / 32 - 1).abs()                     # the half-tile cross-fade's weight
    faded = plain[:, None] * courses + (1 - plain[:, None]) * courses.roll(16, -2)
    assert float((faded.abs() > 0.15).double().mean()) < 0.7            # out of phase: faded
    made = periodic_in_phase(courses)
    assert float(made.std()) == pytest.approx(float(courses.std()), rel=0.1)
    assert torch.allclose(made, made[..., :1])                          # still level courses
    assert float((made.abs() > 0.15).double().mean()) > 0.85            # of two clear shades
    grain = torch.from_numpy(np.random.default_rng(1).normal(0, 0.1, (8, 32, 32)))
    assert float(periodic_in_phase(grain).std()) == pytest.approx(float(grain.std()), rel=0.15)
    wrap = lambda t, dim: float(step(t, dim).select(dim, 0).abs().mean())   # noqa: E731
    inside = lambda t, dim: float(step(t, dim).narrow(dim, 1, 31).mean())    # noqa: E731
    for dim in (-1, -2):
        assert wrap(periodic_in_phase(grain), dim) < 1.3 * inside(periodic_in_phase(grain), dim)
        assert wrap(grain, dim) > 0.9 * inside(grain, dim)              # (a grain's wrap is a jump like any)


@pytest.fixture()
def materials() -> WallDetail:
    """Three materials, 16 texels of 4 cm: courses 4 texels tall, a checker of 2, and plain."""
    c = WallDetailConfig(tiles=2, tile=16, texel=0.04, levels=3, materials=3, material_levels=3)
    model = WallDetail(c)
    model.set_tiles(torch.zeros(2, 16, 16), torch.tensor([[0.7, 0.3, 0.2], [0.6, 0.6, 0.6]]))
    k = torch.arange(16)
    courses = torch.where((k // 4) % 2 == 0, 0.4, 0.6)[:, None].expand(16, 16)
    checker = torch.where(((k[:, None] // 2) + (k[None, :] // 2)) % 2 == 0, 0.3, 0.7)
    model.set_materials(torch.stack([courses, checker, torch.full((16, 16), 0.5)]).contiguous())
    return model


def test_materials_tile_interpolate_and_average_over_the_footprint(materials):
    c = materials.config
    z = (np.arange(16) + 0.5) * c.texel                             # texel centres up the wall
    up = materials.material_at(0, np.zeros(16), z, np.full(16, c.texel))
    np.testing.assert_allclose(up, np.where((np.arange(16) // 4) % 2 == 0, -0.2, 0.2), atol=1e-5)   # over its mean, less 1
    period = c.tile * c.texel
    u = np.random.default_rng(0).uniform(0, 3, 50)
    w = np.random.default_rng(1).uniform(0, 3, 50)
    one = np.full(50, c.texel)
    np.testing.assert_allclose(materials.material_at(1, u, w, one), materials.material_at(1, u + period, w - period, one),
                               atol=1e-5)                                      # tiled both ways
    between = materials.material_at(0, [0.0], [4 * c.texel], [c.texel])   # on a course's edge
    assert abs(float(between[0])) < 1e-5                                       # interpolated, not one texel's
    fine = materials.material_at(1, u, w, one)
    far = materials.material_at(1, u, w, np.full(50, 4 * c.texel))
    assert far.std() < 0.5 * fine.std()                                       # a far pixel's footprint averaged
    assert np.abs(materials.material_at(2, u, w, one)).max() < 1e-6           # plain: no pattern
    with pytest.raises(ValueError, match="material"):
        materials.material_at(3, [0.0], [0.0], [0.04])
    with pytest.raises(ValueError, match="luma"):
        materials.set_materials(torch.zeros(2, 16, 16))
    with pytest.raises(ValueError, match="WallDetailConfig"):
        WallDetailConfig(materials=2, tile=4, levels=2, material_levels=4)


def test_a_border_no_frame_showed_is_drawn_as_a_recorded_material_picked_by_the_seed(materials, tmp_path):
    from alaya.models.wall_detail import FacingColour
    region = WalkableRegion(np.array([[-2.0, -2.0], [2.0, -2.0], [2.0, 2.0], [-2.0, 2.0]]))
    y, z = np.meshgrid(np.arange(-2.5, 2.5, 0.03), np.arange(0.06, 1.8, 0.03))
    xyz = np.stack([np.full(y.size, 2.5), y.ravel(), z.ravel()])            # only the wall at x = 2.5 seen
    rgb = np.tile(np.array([[180, 80, 50]], np.uint8), (y.size, 1))
    facing = FacingColour(np.array([[0.5, 0.45, 0.4], [0.0] * 3, [0.0] * 3]))
    walls = {}
    for name, kwargs in (("plain", {}), ("a", {"materials": True, "seed": 3}), ("b", {"materials": True, "seed": 3}),
                         ("c", {"materials": True, "seed": -7})):
        walls[name] = RegionWalls(region, margin=0.5, detail=materials, facing=facing, **kwargs)
        assert walls[name].learn(xyz, rgb) == 1
    seen = [m for m, w in enumerate(walls["a"].walls) if w.points > 0]
    assert len(seen) == 1 and walls["a"].walls[seen[0]].material == -1       # a seen wall keeps its texture
    picked = lambda w: [x.material for m, x in enumerate(w.walls) if m not in seen]   # noqa: E731
    assert all(0 <= k < 3 for k in picked(walls["a"])) and picked(walls["a"]) == picked(walls["b"])
    assert all(k == -1 for k in picked(walls["plain"]))
    seeds = set()
    for s in range(12):                                                      # the seed picks among them
        w = RegionWalls(region, margin=0.5, detail=materials, facing=facing, materials=True, seed=s)
        w.learn(xyz, rgb)
        seeds.add(tuple(picked(w)))
    assert len(seeds) > 3
    view = torch.eye(4, dtype=torch.float64)                                  # at (0, 0) looking along -x
    view[:3, :3] = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
    view[:3, 3] = -view[:3, :3] @ torch.tensor([0.0, 0.0, EYE], dtype=torch.float64)
    empty = torch.zeros(1, 3, 64, 64), torch.zeros(1, 1, 64, 64), torch.zeros(1, 1, 64, 64)
    w = RegionWalls(region, margin=0.5, detail=materials, facing=facing, materials=True, seed=0)
    w.learn(xyz, rgb)
    ahead = w.walls[int(np.argmax(w.out @ np.array([-1.0, 0.0])))]          # the unseen wall at x = -2.5
    rgb_drawn, coverage, _ = w.draw(*empty, pinhole(64, 70.0), view)
    on = coverage[0, 0] > 0.5
    drawn = rgb_drawn[0][:, on]
    np.testing.assert_allclose(drawn.mean(1).numpy(), [0.5, 0.45, 0.4], atol=0.03)   # its facing's colour on average
    assert (float(drawn[0].std()) > 0.02) == (ahead.material != 2)              # with its material's pattern
    materials.save_pretrained(tmp_path / "wd")
    back = WallDetail.from_pretrained(tmp_path / "wd")
    assert torch.allclose(back.materials, materials.materials, atol=1e-3)
    old = WallDetail(WallDetailConfig(tiles=2, tile=16, levels=3))            # a folder saved without materials
    old.set_tiles(torch.zeros(2, 16, 16), torch.tensor([[0.7, 0.3, 0.2], [0.6, 0.6, 0.6]]))
    old.save_pretrained(tmp_path / "old")
    fallback = RegionWalls(region, margin=0.5, detail=WallDetail.from_pretrained(tmp_path / "old"), facing=facing,
                           materials=True)
    fallback.learn(xyz, rgb)
    assert all(x.material == -1 for x in fallback.walls)


def test_only_evenly_lit_whole_wall_tiles_are_kept_as_materials():
    from alaya.train.wall_detail import evenly_lit
    k = np.arange(32)
    courses = np.where((k // 4) % 2 == 0, 0.5, 0.7)[:, None, None] * np.ones((32, 32, 3))
    shadow = courses * np.where(k[None, :, None] < 16, 1.0, 0.4)               # a shadow's edge across it
    kept = evenly_lit([courses, shadow])
    assert len(kept) == 1 and torch.allclose(kept[0], torch.from_numpy(courses[::-1] @ np.array(
        [0.299, 0.587, 0.114], np.float32)).float())


def test_materials_are_chosen_to_span_the_walls_range_of_detail():
    """70 smooth walls and 30 of courses: 10 materials chosen hold the courses in proportion (3),
    from the smoothest wall's bin to the most detailed one's, the same every time."""
    rng = np.random.default_rng(0)
    smooth = 0.5 + 0.01 * rng.normal(size=(70, 1, 1)) * torch.linspace(-1, 1, 16).numpy()[None, None, :]
    courses = np.where((np.arange(16) // 2) % 2 == 0, 0.6, 0.4)[None, :, None] * (1 + 0.05 * rng.random((30, 1, 1)))
    luma = torch.from_numpy(np.concatenate([smooth + 0 * courses[:1], courses + 0 * smooth[:1]])).float()
    picked = representative(luma, 10)
    assert len(set(picked.tolist())) == 10 and int((picked >= 70).sum()) == 3
    np.testing.assert_array_equal(picked, representative(luma, 10))
    with pytest.raises(ValueError, match="count"):
        representative(luma, 101)


def smooth_noise(seed: int, n: int = 32, blur: int = 4) -> torch.Tensor:
    """(1, n, n) a zero-mean grain with blotches about ``blur`` texels wide, repeating (made periodic)."""
    from alaya.models.wall_detail import box_mean
    grain = torch.from_numpy(np.random.default_rng(seed).normal(0, 1, (1, n, n)))
    grain = box_mean(box_mean(grain, blur, "circular"), blur, "circular")
    return 0.1 * grain / grain.std()


def test_a_material_without_a_period_is_scattered_and_courses_keep_their_order():
    from alaya.models.wall_materials import repeating_axes, scattered_tile
    rows = torch.arange(32, dtype=torch.float64)
    courses = (0.2 * torch.sign(torch.sin(2 * math.pi * (rows + 0.5) / 8)))[:, None].expand(32, 32)[None]
    checker = torch.from_numpy(np.indices((32, 32)).sum(0) // 4 % 2 * 0.4 - 0.2)[None]
    noise = smooth_noise(0)
    assert repeating_axes(torch.cat([courses, checker, noise])).tolist() == [[True, True], [True, True], [False, False]]
    tile = noise[0].numpy()
    scattered = scattered_tile(tile, np.array([False, False]), 7)
    assert scattered.shape == (128, 128)
    assert np.abs(scattered[:, :32] - scattered[:, 32:64]).mean() > 0.5 * np.abs(tile).mean()   # no repeat every tile
    assert float(scattered.std()) == pytest.approx(float(tile.std()), rel=0.25)   # the same strength
    wrapped = np.concatenate([scattered, scattered], 1)                          # repeats at 4 tiles, no seam there
    assert np.abs(np.diff(wrapped, axis=1)).max() < 3 * np.abs(np.diff(np.tile(tile, (1, 2)), axis=1)).max()
    np.testing.assert_array_equal(scattered, scattered_tile(tile, np.array([False, False]), 7))   # the same every time
    assert np.abs(scattered - scattered_tile(tile, np.array([False, False]), 8)).mean() > 0.5 * np.abs(tile).mean()
    along = scattered_tile(courses[0].numpy(), np.array([False, True]), 7)      # moved along, never up
    assert np.allclose(along, along[:, :1])                                     # still level courses
    assert scattered_tile(checker[0].numpy(), np.array([True, True]), 7) is not None
    np.testing.assert_array_equal(scattered_tile(checker[0].numpy(), np.array([True, True]), 7), checker[0].numpy())


def test_a_session_draws_a_streaked_material_without_a_grid(materials):
    """A wall detail whose material is a streaked grain: drawn over a wall 2.56 m wide, a 0.64 m
    tile no longer repeats; the courses still do."""
    c = WallDetailConfig(tiles=2, tile=32, texel=0.02, levels=3, materials=2, material_levels=3, scatter=True)
    k = torch.arange(32)
    courses = torch.where((k // 4) % 2 == 0, 0.4, 0.6)[:, None].expand(32, 32)
    luma = torch.stack([courses, 0.5 * (1 + smooth_noise(1)[0].float())]).contiguous()
    u, z = np.meshgrid(np.arange(0, 2.56, 0.02) + 0.01, np.arange(0, 0.64, 0.02) + 0.01)
    one = np.full(u.size, c.texel)
    old = WallDetail(dataclasses.replace(c, scatter=False))              # a folder saved before: tiled
    old.set_materials(luma)
    tiled = old.material_at(1, u.ravel(), z.ravel(), one).reshape(u.shape)
    np.testing.assert_allclose(tiled[:, :32], tiled[:, 32:64], atol=1e-5)
    model = WallDetail(c)
    model.set_tiles(torch.zeros(2, 32, 32), torch.tensor([[0.7, 0.3, 0.2], [0.6, 0.6, 0.6]]))
    model.set_materials(luma)
    assert model.material_repeats.tolist() == [[1.0, 1.0], [0.0, 0.0]]
    streaks = model.material_at(1, u.ravel(), z.ravel(), one).reshape(u.shape)
    assert np.abs(streaks[:, :32] - streaks[:, 32:64]).mean() > 0.3 * np.abs(streaks).mean()
    np.testing.assert_allclose(streaks, model.material_at(1, u.ravel() + 2.56, z.ravel(), one).reshape(u.shape),
                               atol=1e-5)
    level = model.material_at(0, u.ravel(), z.ravel(), one).reshape(u.shape)
    np.testing.assert_allclose(level[:, :32], level[:, 32:64], atol=1e-5)

"""Walls' close-up detail (``alaya.models.wall_detail``, ``alaya.train.wall_detail``): tiles are cut
from frames of a wall seen close up and only there, their detail tiles without seams and is
averaged over a pixel's footprint, and a wall walked up to shows it where a far wall is unchanged."""

import math

import numpy as np
import pytest
import torch

from alaya.data.walkable_region import WalkableRegion
from alaya.models.region_walls import RegionWalls
from alaya.models.view_warp import pinhole
from alaya.models.wall_detail import WallDetail, WallDetailConfig, periodic, relative_detail
from alaya.train.wall_detail import WallDetailFitConfig, wall_tile
from wall_views import EYE, SIZE, STRIPE, facing_wall



def test_a_wall_close_up_gives_a_tile_of_its_stripes_and_a_floor_or_a_far_wall_none():
    cfg = WallDetailFitConfig()
    tile, distance, facing = wall_tile(*facing_wall(0.8), cfg)
    assert distance == pytest.approx(0.8)
    np.testing.assert_allclose(facing, [0.0, -1.0], atol=1e-6)       # the wall at y = 0.8 faces the camera
    luma = tile @ np.array([0.299, 0.587, 0.114])
    assert luma.std(1).max() < 0.02                    # the same along the wall (the stripes run level)
    rows = luma[:, 0] > luma.mean()                    # up the wall: light and dark, 5 texels each
    changes = np.nonzero(rows[1:] != rows[:-1])[0]
    assert len(changes) >= 4 and np.allclose(np.diff(changes), STRIPE / cfg.model.texel, atol=1)
    assert wall_tile(*facing_wall(0.8, floor=True), cfg) is None
    assert wall_tile(*facing_wall(4.0), cfg) is None    # beyond reach: a pixel spans too much


def test_detail_is_relative_to_the_far_mean_and_tiles_repeat_without_seams():
    luma = torch.full((1, 12, 12), 0.5)
    luma[0, :, ::2] = 0.6
    d = relative_detail(luma, 4)
    assert d.mean().abs() < 0.01 and d.max() > 0.05
    ramp = torch.linspace(-0.3, 0.3, 16)
    tile = (ramp[None, :] + ramp[:, None])[None]                       # a seam of 0.6 where it repeats
    step = lambda t, dim: (t - t.roll(1, dim)).abs()                   # noqa: E731  (wrap included)
    assert step(tile, -1).max() > 0.5 and step(tile, -2).max() > 0.5
    made = periodic(tile)
    assert step(made, -1).max() < 0.15 and step(made, -2).max() < 0.15
    grain = torch.from_numpy(np.random.default_rng(1).normal(0, 0.1, (8, 32, 32))).float()
    assert float(periodic(grain).std()) == pytest.approx(float(grain.std()), rel=0.15)   # the grain keeps its strength



@pytest.fixture()
def detail() -> WallDetail:
    """Two tiles: a reddish one of fine stripes and a grey one of random grain."""
    c = WallDetailConfig(tiles=2, tile=16, levels=3)
    model = WallDetail(c)
    stripes = torch.where(torch.arange(16) % 2 == 0, 0.2, -0.2).expand(16, 16).T.contiguous()
    grain = torch.from_numpy(np.random.default_rng(0).normal(0, 0.1, (16, 16))).float()
    model.set_tiles(torch.stack([stripes, grain]), torch.tensor([[0.7, 0.3, 0.2], [0.6, 0.6, 0.6]]))
    return model


def test_at_picks_the_level_of_the_pixel_footprint_and_nearest_the_colour(detail):
    c = detail.config
    u = np.linspace(0, 0.3, 200)
    z = np.full_like(u, 0.05)
    fine = detail.at(1, u, z, np.full_like(u, c.texel))
    coarse = detail.at(1, u, z, np.full_like(u, 4 * c.texel))
    assert coarse.std() < 0.6 * fine.std()             # averaged over the footprint, not aliased
    rows = detail.at(0, np.zeros(16), (np.arange(16) + 0.5) * c.texel, np.full(16, c.texel))
    assert (np.sign(rows) == np.where(np.arange(16) % 2 == 0, 1, -1)).all() and np.abs(rows).min() >= 0.2
    assert detail.nearest([0.8, 0.35, 0.2]) == 0 and detail.nearest([0.5, 0.5, 0.55]) == 1


def test_among_the_tiles_nearest_a_colour_the_one_of_median_detail_is_picked():
    """Brown walls from plain to coursed: the nearest tile alone is the strongest; among the three
    nearest, the median; a far colour does not count."""
    model = WallDetail(WallDetailConfig(tiles=4, tile=16, levels=1))
    grain = torch.from_numpy(np.random.default_rng(0).normal(0, 1, (16, 16))).float()
    model.set_tiles(torch.stack([0.3 * grain, 0.02 * grain, 0.1 * grain, 0.05 * grain]),
                    torch.tensor([[0.50, 0.30, 0.20], [0.52, 0.31, 0.21], [0.48, 0.30, 0.19], [0.1, 0.1, 0.9]]))
    assert model.nearest([0.5, 0.3, 0.2]) == 0
    assert model.nearest([0.5, 0.3, 0.2], among=3) == 2                 # strengths 0.3, 0.02, 0.1: the median
    assert model.nearest([0.5, 0.3, 0.2], among=4) == 3                 # the blue tile's 0.05 now counts
    with pytest.raises(ValueError, match="among"):
        model.nearest([0.5, 0.3, 0.2], among=0)


def test_bad_input_names_the_field_and_a_saved_detail_loads_back(detail, tmp_path):
    with pytest.raises(ValueError, match="detail, keys"):
        detail.set_tiles(torch.zeros(3, 16, 16), torch.zeros(3, 3))
    with pytest.raises(ValueError, match="finite"):
        detail.set_tiles(torch.full((2, 16, 16), math.nan), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="colour"):
        detail.nearest([0.5, math.nan, 0.5])
    with pytest.raises(ValueError, match="tile"):
        detail.at(2, [0.0], [0.0], [0.01])
    with pytest.raises(ValueError, match="WallDetailConfig"):
        WallDetailConfig(texel=0.2, far=0.1)
    detail.save_pretrained(tmp_path / "wd")
    back = WallDetail.from_pretrained(tmp_path / "wd")
    assert torch.allclose(back.tiles, detail.tiles, atol=1e-3) and back.nearest([0.8, 0.35, 0.2]) == 0


def test_a_wall_walked_up_to_shows_the_detail_and_a_far_one_is_unchanged(detail):
    region = WalkableRegion(np.array([[-2.0, -2.0], [2.0, -2.0], [2.0, 2.0], [-2.0, 2.0]]))
    y, z = np.meshgrid(np.arange(-2.5, 2.5, 0.03), np.arange(0.06, 1.8, 0.03))
    xyz = np.stack([np.full(y.size, 2.5), y.ravel(), z.ravel()])
    rgb = np.tile(np.array([[180, 80, 50]], np.uint8), (y.size, 1))
    plain, fine = RegionWalls(region, margin=0.5), RegionWalls(region, margin=0.5, detail=detail)
    for w in (plain, fine):
        assert w.learn(xyz, rgb) == 1
    assert fine.walls[0].detail == 0 and plain.walls[0].detail == -1
    among = RegionWalls(region, margin=0.5, detail=detail, detail_among=2)    # of the two nearest, the median (weaker)
    assert among.learn(xyz, rgb) == 1 and among.walls[0].detail == 1
    with pytest.raises(ValueError, match="detail_among"):
        RegionWalls(region, detail=detail, detail_among=0)
    K = pinhole(64, 70.0)

    def drawn(walls, x):
        view = torch.eye(4, dtype=torch.float64)
        view[:3, :3] = torch.tensor([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]], dtype=torch.float64)
        view[:3, 3] = -view[:3, :3] @ torch.tensor([x, 0.0, EYE], dtype=torch.float64)
        empty = torch.zeros(1, 3, 64, 64), torch.zeros(1, 1, 64, 64), torch.zeros(1, 1, 64, 64)
        return walls.draw(*empty, K, view)[0][0]

    near_plain, near_fine = drawn(plain, 2.0), drawn(fine, 2.0)          # 0.5 m away: texels ~7 pixels wide
    assert (near_fine[:, 1:] - near_fine[:, :-1]).abs().mean() > 3 * (near_plain[:, 1:] - near_plain[:, :-1]).abs().mean()
    far = slice(24, 40)                                                   # the wall ahead, not the side walls
    assert torch.equal(drawn(plain, -1.5)[..., far], drawn(fine, -1.5)[..., far])   # 4 m away: a texel 1.4 pixels


def _walls_recorded(tmp_path, frames: int = 8, style: str = "day"):
    """One training episode of a level camera walking up to the striped wall (1.2 m to 0.6 m)."""
    from alaya.data.episodes import EpisodesMeta, write_episode, write_meta
    from alaya.engine.styles import STYLES
    phrasings = list(STYLES[style].phrasings) if style in STYLES else ["a day"]
    meta = EpisodesMeta.new(resolution=(SIZE, SIZE), fps=16.0, source="test", styles={style: phrasings})
    (tmp_path / "episodes").mkdir(parents=True)
    views = [facing_wall(d) for d in np.linspace(1.2, 0.6, frames)]
    ep = {"rgb": np.stack([v[0] for v in views])[None], "styles": np.array([style]),
          "actions": np.zeros((frames, 8), np.float32), "depth": np.stack([v[1] for v in views]).astype(np.float16),
          "K": views[0][2].astype(np.float32), "world_to_camera": np.stack([v[3] for v in views]).astype(np.float32)}
    write_episode(tmp_path / "episodes" / "e0.npz", ep)
    meta.episodes["e0"] = {"split": "train", "frames": frames, "seed": None}
    write_meta(tmp_path, meta)
    return tmp_path


def test_tiles_are_cut_from_recordings_and_the_cli_says_when_there_are_too_few(tmp_path, capsys):
    from alaya.cli import main
    from alaya.train.wall_detail import fit_wall_detail
    data = _walls_recorded(tmp_path / "data")
    model, report = fit_wall_detail(WallDetailFitConfig(data=str(data), every=1, progress=False, materials=2,
                                                        model=WallDetailConfig(tiles=4)))
    assert report["frames_searched"] == 8 and report["candidates"] >= 6 and report["tiles"] == 4
    assert report["evenly_lit"] >= 2 and model.config.materials == 2 and report["material_rms"] > 0.1   # the stripes
    mean = np.array([150, 135, 120]) / 255                        # the stripes' mean colour
    assert np.abs(model.keys.numpy() - mean).max() < 0.05 and report["detail_rms"] > 0.1
    assert main(["train", "wall-detail", "--data", str(data), "--run-dir", str(tmp_path / "run"),
                 "--out", str(tmp_path / "wd")]) == 2
    assert "96 needed" in capsys.readouterr().err and not (tmp_path / "wd").exists()


def test_the_shipped_world_model_carries_its_wall_detail():
    from alaya.paths import default_weights
    from alaya.runtime.world_folder import load_wall_detail
    detail = load_wall_detail(default_weights("world_model"))
    assert detail is not None and detail.config.texel == 0.02
    assert torch.isfinite(detail.tiles).all() and detail.tiles.abs().max() <= 0.7 + 1e-3
    assert 0.01 < float(detail.tiles.pow(2).mean().sqrt()) < 0.2      # a grain, not noise or nothing
    assert len({detail.nearest(c) for c in np.random.default_rng(0).uniform(0, 1, (40, 3))}) > 5
    from alaya.text.encoder import PromptEncoder
    sunset = detail.facing_for(PromptEncoder().encode("a golden sunset"))    # the test scenes' style was recorded
    assert sunset is not None and 0.2 < sunset([1.0, 0.0]).mean() < sunset([-1.0, 0.0]).mean() < 0.9
    fog = detail.fog_for(PromptEncoder().encode("a golden sunset"))           # learnt: the game's 0.02 a metre
    assert fog is not None and 0.01 <= fog.density <= 0.03 and fog.colour[0] > fog.colour[1] > fog.colour[2]
    assert detail.config.materials >= 16 and torch.isfinite(detail.materials).all()
    strength = detail.materials.pow(2).mean((1, 2)).sqrt()
    assert 0.01 < float(strength.median()) < 0.2 and float(strength.min()) > 0.002   # materials, none flat


def test_walls_facing_each_way_are_fitted_per_style_and_found_by_the_prompt(tmp_path):
    from alaya.text.encoder import PromptEncoder
    from alaya.train.wall_detail import fit_facing, fit_wall_detail
    azimuth = np.random.default_rng(2).uniform(-np.pi, np.pi, 400)
    truth = np.array([[0.6, 0.4, 0.3], [-0.2, -0.1, 0.0], [0.05, 0.1, -0.1]])   # brighter facing -x
    X = np.stack([np.ones_like(azimuth), np.cos(azimuth), np.sin(azimuth)], 1)
    material = np.random.default_rng(3).normal(0, 0.1, (400, 3))                 # each wall's own
    coefficients, spread, residual = fit_facing(np.stack([np.cos(azimuth), np.sin(azimuth)], 1), X @ truth + material)
    np.testing.assert_allclose(coefficients, truth, atol=0.03)
    assert residual == pytest.approx(0.1 * 3 ** 0.5, rel=0.1) and spread > residual
    data = _walls_recorded(tmp_path / "data", style="golden_sunset")
    model, report = fit_wall_detail(WallDetailFitConfig(data=str(data), every=1, progress=False, min_facing=5,
                                                        materials=0, model=WallDetailConfig(tiles=4)))
    assert model.config.styles == 1 and report["facing"]["golden_sunset"]["candidates"] >= 6
    encoder = PromptEncoder()
    colour = model.facing_for(encoder.encode("a golden sunset"))
    mean = np.array([150, 135, 120]) / 255                                 # the striped wall's, facing -y
    np.testing.assert_allclose(colour([0.0, -1.0]), mean, atol=0.05)
    assert model.facing_for(encoder.encode("a snowy winter day")) is None     # a look never recorded
    assert model.facing_for(torch.zeros(384)) is None                         # no prompt
    with pytest.raises(ValueError, match="style"):
        model.facing_for(torch.zeros(5))
    with pytest.raises(ValueError, match="facing"):
        colour([0.0, 0.0])
    model.save_pretrained(tmp_path / "wd")
    back = WallDetail.from_pretrained(tmp_path / "wd")
    np.testing.assert_allclose(back.facing_for(encoder.encode("a golden sunset"))([0.0, -1.0]), mean, atol=0.05)
    assert WallDetail(WallDetailConfig(tiles=4)).facing_for(encoder.encode("a golden sunset")) is None


def test_a_border_no_frame_showed_takes_the_colour_of_its_facing_and_keeps_the_grain(detail):
    from alaya.models.wall_detail import FacingColour
    region = WalkableRegion(np.array([[-2.0, -2.0], [2.0, -2.0], [2.0, 2.0], [-2.0, 2.0]]))
    y, z = np.meshgrid(np.arange(-2.5, 2.5, 0.03), np.arange(0.06, 1.8, 0.03))
    xyz = np.stack([np.full(y.size, 2.5), y.ravel(), z.ravel()])            # only the wall at x = 2.5 seen
    stripes = np.where((np.floor(z.ravel() / 0.24) % 2 == 0)[:, None], [[200, 90, 60]], [[140, 60, 40]])
    facing = FacingColour(np.array([[0.5, 0.5, 0.5], [0.0, 0.0, 0.0], [0.3, 0.1, -0.1]]))   # by the face's y
    plain = RegionWalls(region, margin=0.5, detail=detail)
    coloured = RegionWalls(region, margin=0.5, detail=detail, facing=facing)
    for w in (plain, coloured):
        assert w.learn(xyz, stripes.astype(np.uint8)) == 1
    seen = [m for m, w in enumerate(coloured.walls) if w.points > 0]
    assert len(seen) == 1 and np.array_equal(coloured.walls[seen[0]].texels, plain.walls[seen[0]].texels)
    for m, wall in enumerate(coloured.walls):
        if m in seen:
            continue
        face = -coloured.out[m]                                              # looks into the region
        want = np.clip(0.5 + face[1] * np.array([0.3, 0.1, -0.1]), 0, 1)
        np.testing.assert_allclose(wall.texels.reshape(-1, 3).mean(0), want, atol=0.02)
        ratio = lambda t: t[..., 0].max() / t[..., 0].min()                 # noqa: E731  (the stripes' contrast)
        assert ratio(wall.texels) == pytest.approx(ratio(plain.walls[m].texels), rel=0.05)
        assert wall.detail == detail.nearest(want)


def test_a_session_shell_colours_unseen_borders_by_its_prompt_unless_told_not_to():
    import dataclasses
    from types import SimpleNamespace
    from alaya.models.region_shell import region_shell
    from alaya.models.world import WorldModelConfig
    model = WallDetail(WallDetailConfig(tiles=2, tile=16, levels=3, styles=1, text_dim=4, materials=2, material_levels=3))
    model.set_tiles(torch.zeros(2, 16, 16), torch.tensor([[0.7, 0.3, 0.2], [0.6, 0.6, 0.6]]))
    model.set_materials(torch.rand(2, 16, 16, generator=torch.Generator().manual_seed(0)) + 0.5)
    model.set_facing(torch.tensor([[1.0, 0.0, 0.0, 0.0]]), torch.tensor([[[0.5, 0.4, 0.3], [0.0] * 3, [0.0] * 3]]))
    region = WalkableRegion(np.array([[-2.0, -2.0], [2.0, -2.0], [2.0, 2.0], [-2.0, 2.0]]))
    y, z = np.meshgrid(np.arange(-2.5, 2.5, 0.03), np.arange(0.06, 1.8, 0.03))
    memory = SimpleNamespace(xyz=torch.from_numpy(np.stack([np.full(y.size, 2.5), y.ravel(), z.ravel()])).float(),
                             rgb=torch.full((y.size, 3), 120, dtype=torch.uint8))
    view = torch.eye(4)
    view[:3, :3] = torch.tensor([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]])   # looking along +x
    view[:3, 3] = -view[:3, :3] @ torch.tensor([0.0, 0.0, EYE])
    config = WorldModelConfig(memory_wall_margin=0.5)
    prompt, other = torch.tensor([2.0, 0.1, 0.0, 0.0]), torch.tensor([0.0, 1.0, 0.0, 0.0])
    shells = {name: region_shell(region, torch.eye(4, dtype=torch.float64), memory, c, view, model, style)
              for name, c, style in (("on", config, prompt), ("other", config, other),
                                     ("off", dataclasses.replace(config, memory_wall_facing=False), prompt),
                                     ("grain", dataclasses.replace(config, memory_wall_material=False), prompt))}
    unseen = lambda shell: [w for w in shell.walls.walls if w.points == 0]          # noqa: E731
    assert len(unseen(shells["on"])) == 3
    for name in ("on", "grain"):                                               # the facing's colour either way
        for wall in unseen(shells[name]):
            np.testing.assert_allclose(wall.texels.reshape(-1, 3).mean(0), [0.5, 0.4, 0.3], atol=0.01)
    assert all(0 <= w.material < 2 for w in unseen(shells["on"]))             # drawn as a recorded material
    assert all(w.material == -1 and w.texels.size > 3 for w in unseen(shells["grain"]))   # the seen wall's grain
    for name in ("other", "off"):                                              # the seen wall's colour
        assert shells[name].walls.facing is None
        seen = [w for w in shells[name].walls.walls if w.points > 0]
        assert len(seen) == 1 and all(np.array_equal(w.texels, seen[0].texels) for w in unseen(shells[name]))

"""A style's fog learnt from the recordings (``alaya.train.fog_pairs``,
``aerial_fog.learn_fog_from_pairs``, ``alaya train wall-detail``): points seen at two distances are
paired through the recorded depth and cameras, the fog's density and colour (brighter than white
too, as a lit fog before a tone curve) come back from them, the wall detail keeps one per style
for the prompt, and a session's shell takes the walls' fog off with it."""

import numpy as np
import pytest
import torch

from alaya.data.geometry import camera_points
from alaya.models.aerial_fog import AerialFog, learn_fog_from_pairs
from alaya.models.wall_detail import WallDetail, WallDetailConfig
from alaya.train.fog_pairs import surface_pairs
from wall_views import EYE, facing_wall

FOG = AerialFog(0.03, np.array([1.2, 0.9, 0.6]))      # lit: brighter than white in red
DISTANCES = np.concatenate([np.linspace(0.6, 1.2, 8), np.linspace(1.5, 14.0, 32)])   # walking back from the wall


def fogged_walk():
    """(rgb (1, T, H, W, 3) uint8, depth (T, H, W), K, world_to_camera (T, 4, 4)): a level camera
    walking back from the striped wall y = 20, each frame seen through ``FOG``."""
    frames, depths, cams = [], [], []
    for d in DISTANCES:
        rgb, depth, K, w2c = facing_wall(float(d))                         # (the camera at y = 0, the wall at d)
        w2c[:3, 3] = -w2c[:3, :3] @ np.array([0.0, 20.0 - d, EYE])
        far = np.linalg.norm(camera_points(depth, K), axis=-1).reshape(-1)
        frames.append((FOG.apply(rgb.reshape(-1, 3) / 255.0, far) * 255).round().astype(np.uint8).reshape(rgb.shape))
        depths.append(depth)
        cams.append(w2c)
    return np.stack(frames)[None], np.stack(depths), K, np.stack(cams)


def test_the_same_surface_is_paired_across_frames_and_its_fog_learnt_back():
    rgb, depth, K, w2c = fogged_walk()
    pairs = surface_pairs(rgb, depth, K, w2c, np.random.default_rng(0))
    assert pairs.shape[0] == 1 and pairs.shape[1] >= 500 and pairs.shape[2] == 8
    first, second, da, db = pairs[0, :, 0:3], pairs[0, :, 3:6], pairs[0, :, 6], pairs[0, :, 7]
    assert (np.abs(db - da) >= 2.0).all() and (da > 0.5).all() and (db < 40).all()
    off = np.abs(FOG.clear(first, da) - FOG.clear(second, db)).max(1)    # one surface once the fog is off
    assert np.median(off) < 0.02
    fog, report = learn_fog_from_pairs(first, second, da, db)
    assert abs(fog.density - FOG.density) <= 0.005
    np.testing.assert_allclose(fog.colour, FOG.colour, atol=0.06)
    assert report["pairs"] == len(first) and report["mse"] < 0.2 * report["mse_no_fog"]
    flipped, _ = learn_fog_from_pairs(second, first, db, da)              # either order
    assert abs(flipped.density - fog.density) <= 0.0025


def test_bad_pairs_are_named():
    a = np.full((500, 3), 0.5)
    with pytest.raises(ValueError, match="first, second"):
        learn_fog_from_pairs(a, a[:, :2], np.ones(500), np.ones(500))
    with pytest.raises(ValueError, match="pairs"):
        learn_fog_from_pairs(a, a, np.ones(500), np.ones(500))           # no step in distance
    with pytest.raises(ValueError, match="pairs"):
        learn_fog_from_pairs(a[:50], a[:50], np.ones(50), np.full(50, 5.0))
    with pytest.raises(ValueError, match="rgb, depth"):
        surface_pairs(np.zeros((1, 4, 8, 8, 3), np.uint8), np.ones((4, 8, 9)), np.eye(3), np.tile(np.eye(4), (4, 1, 1)),
                      np.random.default_rng(0))


def test_the_wall_detail_keeps_each_styles_fog_for_its_prompt(tmp_path):
    from alaya.data.episodes import EpisodesMeta, write_episode, write_meta
    from alaya.engine.styles import STYLES
    from alaya.text.encoder import PromptEncoder
    from alaya.train.wall_detail import WallDetailFitConfig, fit_wall_detail
    rgb, depth, K, w2c = fogged_walk()
    meta = EpisodesMeta.new(resolution=(128, 128), fps=16.0, source="test",
                            styles={"golden_sunset": list(STYLES["golden_sunset"].phrasings)})
    (tmp_path / "data" / "episodes").mkdir(parents=True)
    write_episode(tmp_path / "data" / "episodes" / "e0.npz",
                  {"rgb": rgb, "styles": np.array(["golden_sunset"]), "actions": np.zeros((len(depth), 8), np.float32),
                   "depth": depth.astype(np.float16), "K": K.astype(np.float32), "world_to_camera": w2c.astype(np.float32)})
    meta.episodes["e0"] = {"split": "train", "frames": len(depth), "seed": None}
    write_meta(tmp_path / "data", meta)
    cfg = dict(data=str(tmp_path / "data"), every=1, progress=False, min_facing=5, materials=0)
    model, report = fit_wall_detail(WallDetailFitConfig(**cfg, model=WallDetailConfig(tiles=4)))
    assert model.config.fog and report["fog"]["golden_sunset"]["pairs"] >= 500
    encoder = PromptEncoder()
    fog = model.fog_for(encoder.encode("a golden sunset"))
    assert isinstance(fog, AerialFog) and abs(fog.density - FOG.density) <= 0.005
    np.testing.assert_allclose(fog.colour, FOG.colour, atol=0.06)
    assert model.fog_for(encoder.encode("a snowy winter day")) is None       # a look never recorded
    model.save_pretrained(tmp_path / "wd")
    back = WallDetail.from_pretrained(tmp_path / "wd").fog_for(encoder.encode("a golden sunset"))
    assert abs(back.density - fog.density) < 1e-4 and np.abs(back.colour - fog.colour).max() < 2e-3
    plain, report = fit_wall_detail(WallDetailFitConfig(**cfg, fog=False, model=WallDetailConfig(tiles=4)))
    assert not plain.config.fog and report["fog"] == {} and plain.fog_for(encoder.encode("a golden sunset")) is None
    with pytest.raises(ValueError, match="fog"):
        model.set_fog(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="fog"):
        WallDetailConfig(fog=True)                                          # no styles to keep it for


def test_a_session_shell_takes_the_styles_fog_off_its_walls():
    """``memory_fog`` with a wall detail that has the prompt's style's fog: the walls and floor take
    that fog as it is, not one fitted to the start frame's floor."""
    from types import SimpleNamespace

    from alaya.data.walkable_region import WalkableRegion
    from alaya.models.region_shell import region_shell
    from alaya.models.world import WorldModelConfig
    detail = WallDetail(WallDetailConfig(tiles=4, styles=1, fog=True))
    key = torch.zeros(1, 384)
    key[0, 0] = 1.0
    detail.set_facing(key, torch.zeros(1, 3, 3))
    detail.set_fog(torch.tensor([[FOG.density, *FOG.colour]]))
    region = WalkableRegion(np.array([[-25.0, -25.0], [25.0, -25.0], [25.0, 25.0], [-25.0, 25.0]]))
    x, y = np.meshgrid(np.arange(1.0, 20.0, 0.1), np.arange(-6.0, 6.0, 0.1))
    memory = SimpleNamespace(xyz=torch.from_numpy(np.stack([x.ravel(), y.ravel(), np.zeros(x.size)])).float(),
                             rgb=torch.full((x.size, 3), 90, dtype=torch.uint8), dome=None)
    view = torch.eye(4, dtype=torch.float64)
    view[:3, :3] = torch.tensor([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]], dtype=torch.float64)
    view[:3, 3] = -view[:3, :3] @ torch.tensor([0.0, 0.0, 1.4], dtype=torch.float64)
    shell = lambda fog, style: region_shell(region, torch.eye(4, dtype=torch.float64), memory,    # noqa: E731
                                            WorldModelConfig(memory_wall_margin=0.5, memory_floor=True, memory_fog=fog),
                                            view, detail, style)
    on = shell(True, key[0])
    assert isinstance(on.walls.haze, AerialFog) and on.walls.haze is on.floor.haze
    assert on.walls.haze.density == pytest.approx(FOG.density) and np.abs(on.walls.haze.colour - FOG.colour).max() < 1e-6
    assert not isinstance(shell(False, key[0]).walls.haze, AerialFog)      # off: the floor's offsets
    other = torch.zeros(384)
    other[1] = 1.0
    assert not isinstance(shell(True, other).walls.haze, AerialFog)        # a style never recorded, no dome

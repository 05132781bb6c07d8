"""Training a memory world model on a tiny recorded dataset: the rolling memory renders are cached
and hold only earlier frames, a run trains, resumes and saves, its start frames ship their recorded
depth, camera and region, a model folder ships its learned camera, and the memory is degraded and
rolled out with the model's own frames as the loss asks."""

import json

import numpy as np
import pytest
import torch

from alaya.models.world import WorldModel
from tiny_memory import TINY

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    from tiny_world import record_tiny_episodes
    return record_tiny_episodes(tmp_path_factory.mktemp("episodes"), episodes=6)


def test_rolling_renders_hold_only_earlier_frames(episodes):
    from alaya.data.episodes import EpisodeDataset
    from alaya.models.scene_memory import SceneMemoryConfig
    from alaya.train.world_memory import MemoryRenders, cache_memory
    ds = EpisodeDataset(episodes)
    eid = ds.ids()[0]
    folder = cache_memory(str(episodes), SceneMemoryConfig(max_points=5000), [eid], progress=False, styles=1)
    renders = MemoryRenders(folder, [eid])
    rgb, cov, depth = renders.get([0, 0], [0, 0], [0, 1])
    assert renders.styles == 1 and rgb.shape == (2, 3, 32, 32)
    assert cov[0].sum() == 0                               # frame 0: nothing seen before it
    assert cov[1].mean() > 0.3 and (depth[1][cov[1] > 0] > 0).all()


def test_memory_training_runs_resumes_and_saves(episodes, tmp_path):
    from alaya.train.loop import TrainConfig
    from alaya.train.world import train_world
    from alaya.train.world_config import WorldTrainConfig
    run = tmp_path / "run"
    cfg = WorldTrainConfig(data=str(episodes), out=str(tmp_path / "out"), model=TINY, error_prob=0.0,
                           still_prob=0.3, reset_prob=0.3, memory_degrade=0.5, memory_rollout=2, memory_rollout_prob=0.5,
                           action_focus=0.5,
                           val_batches=1, val_batch_size=4,
                           train=TrainConfig(run_dir=str(run), steps=2, batch_size=4, log_every=1, val_every=2,
                                             ckpt_every=2, progress=False))
    train_world(cfg)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["step"] == 2 and np.isfinite(rows[-1]["loss"]) and 0 < rows[-1]["coverage"] < 1
    assert WorldModel.from_pretrained(tmp_path / "out").config == TINY
    cfg.train.steps = 3
    train_world(cfg)
    assert [json.loads(r)["step"] for r in (run / "metrics.jsonl").read_text().splitlines()][-1] == 3
    with pytest.raises(ValueError, match="unroll"):
        train_world(WorldTrainConfig(data=str(episodes), model=TINY, unroll=4, train=cfg.train))


def test_start_frames_ship_their_recorded_depth(episodes, tmp_path):
    from alaya.data.episodes import EpisodeDataset
    from alaya.data.start_frames import write_start_frames
    from alaya.runtime.world_folder import load_start_depths, load_start_frames
    paths = write_start_frames(episodes, tmp_path, count=2, split="train")
    frames, depths = load_start_frames(tmp_path, 32), load_start_depths(tmp_path, 32)
    assert len(frames) == len(depths) == 2 and all(d is not None and d.dtype == np.float32 for d in depths)
    ep = EpisodeDataset(episodes).load(paths[0].stem.split("_")[1])
    np.testing.assert_allclose(depths[0], ep["depth"][0].astype(np.float32))
    with pytest.raises(ValueError, match="depth"):
        load_start_depths(tmp_path, 16)
    np.save(paths[1].with_suffix(".depth.npy"), np.full((32, 32), np.nan, np.float16))
    with pytest.raises(ValueError, match="depth"):
        load_start_depths(tmp_path, 32)
    paths[1].with_suffix(".depth.npy").unlink()
    assert load_start_depths(tmp_path, 32)[1] is None            # none shipped: the model predicts it


def test_start_frames_ship_their_camera_and_the_region_players_stood_in(episodes, tmp_path):
    from alaya.data.episodes import EpisodeDataset
    from alaya.data.start_frames import write_start_frames
    from alaya.runtime.world_folder import load_region, load_start_views
    paths = write_start_frames(episodes, tmp_path, count=2, split="train")
    ds = EpisodeDataset(episodes)
    views = load_start_views(tmp_path)
    np.testing.assert_allclose(views[0], ds.load(paths[0].stem.split("_")[1])["world_to_camera"][0], atol=1e-6)
    region = load_region(tmp_path)
    for eid in ds.ids("train"):                                   # every recorded camera is inside
        m = ds.load(eid)["world_to_camera"].astype(np.float64)
        centres = -np.einsum("nji,nj->ni", m[:, :3, :3], m[:, :3, 3])
        assert all(region.contains(c[:2]) for c in centres)
    np.save(paths[1].with_suffix(".view.npy"), np.eye(4) * 2)
    with pytest.raises(ValueError, match="view.npy"):
        load_start_views(tmp_path)


def test_a_memory_model_ships_its_learned_camera(episodes, tmp_path):
    from alaya.models.camera_motion import CameraMotion, CameraMotionConfig
    from alaya.runtime.world_factory import WorldSessionFactory
    from alaya.train.world_memory_train import ship_camera_motion
    WorldModel(TINY).save_pretrained(tmp_path / "model")
    assert WorldSessionFactory.from_pretrained(tmp_path / "model", size=32, backend="torch").camera_motion is None
    CameraMotion(CameraMotionConfig(fov_y_degrees=50.0)).save_pretrained(tmp_path / "motion")
    ship_camera_motion(tmp_path / "motion", tmp_path / "model")
    factory = WorldSessionFactory.from_pretrained(tmp_path / "model", size=32, backend="torch")
    assert factory.camera_motion is not None and factory.new().camera_motion is factory.camera_motion
    with pytest.raises(FileNotFoundError):
        ship_camera_motion(tmp_path / "nothing", tmp_path / "model")


def test_a_degraded_memory_band_is_soft_misplaced_and_pinholed_and_the_rest_untouched():
    from alaya.train.world_memory_loss import degrade_memory
    rng = np.random.default_rng(0)
    rgb = torch.rand(3, 3, 32, 32)
    cov, depth = torch.ones(3, 1, 32, 32), torch.full((3, 1, 32, 32), 4.0)
    which = np.array([True, False, True])
    r2, c2, d2 = degrade_memory(rgb, cov, depth, rng, which)
    assert torch.equal(r2[1], rgb[1]) and torch.equal(c2[1], cov[1]) and torch.equal(d2[1], depth[1])
    assert torch.equal(cov, torch.ones(3, 1, 32, 32))                    # pure: the inputs are kept
    for b in (0, 2):
        changed = (r2[b] != rgb[b]).any(0)
        assert 0.05 < float(changed.float().mean()) < 0.5                # a band, not the view
        holes = c2[b, 0] == 0
        assert holes.any() and (holes <= changed).all() and (d2[b, 0][holes] == 0).all()
        assert (r2[b][:, holes] == 0).all()
        kept = changed & ~holes
        assert float(r2[b][:, kept].std()) < float(rgb[b][:, kept].std())   # blurred: less detail


def test_memory_rollout_fills_memory_and_context_with_the_models_own_frames(episodes):
    from alaya.models.scene_memory import SceneMemoryConfig
    from alaya.text import PromptEncoder
    from alaya.codecs.patch import PatchCodec, PatchCodecConfig
    from alaya.train.world_config import WorldTrainConfig
    from alaya.train.world_data import LatentEpisodes
    from alaya.train.world_memory import MemoryEpisodes, cache_memory
    from alaya.train.world_memory_rollout import rollout_batch
    data = LatentEpisodes(str(episodes), None, "train", PromptEncoder(), PatchCodec(PatchCodecConfig(factor=4)))
    folder = cache_memory(str(episodes), SceneMemoryConfig(max_points=TINY.memory_max_points), data.ids,
                          progress=False, styles=1)
    mem = MemoryEpisodes(str(episodes), data.ids, folder, data.shape[2])
    cfg = WorldTrainConfig(data=str(episodes), model=TINY)
    model = WorldModel(TINY).eval()
    rng = np.random.default_rng(0)
    e, st = np.array([0, 1, 0]), np.array([0, 0, 0])
    style = torch.zeros(3, TINY.text_dim)
    rgb, depth, ctx, valid, rows, _, (mrgb, mcov, mdepth), n = rollout_batch(model, data, mem, cfg, rng, e, st, style,
                                                                             data.shape[2], 2)
    assert rgb.shape == (3, 3, 32, 32) and ctx.shape[:2] == (3, TINY.context) and mcov.shape == (3, 1, 32, 32)
    assert (n >= 3).all() and mcov.mean() > 0.2 and (mdepth[mcov > 0] > 0).all()
    true_ctx, _ = mem.context(data, e, st, n, TINY.context)
    # the two newest context frames are the model's (an untrained model's: far from the truth), the
    # older ones the true frames before the rollout
    assert (ctx[:, :2] - true_ctx[:, :2]).abs().mean() > 0.05
    torch.testing.assert_close(ctx[:, 2:], true_ctx[:, 2:])
    again = rollout_batch(model, data, mem, cfg, np.random.default_rng(0), e, st, style, data.shape[2], 2)
    torch.testing.assert_close(again[2], ctx)             # same seed, same rollout

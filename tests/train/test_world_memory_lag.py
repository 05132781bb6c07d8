"""Lagged memory renders (``memory_lag``): the memory ``lag`` frames behind, rendered at each
frame's camera, cached apart from the rolling renders, and the training samples that show them as
memory and context (a session that kept what its memory showed)."""

import json

import numpy as np
import pytest
import torch

from tiny_memory import TINY

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    from tiny_world import record_tiny_episodes
    return record_tiny_episodes(tmp_path_factory.mktemp("episodes"), episodes=6)


@pytest.fixture(scope="module")
def split(episodes):
    from alaya.codecs.patch import PatchCodec, PatchCodecConfig
    from alaya.models.scene_memory import SceneMemoryConfig
    from alaya.text import PromptEncoder
    from alaya.train.world_data import LatentEpisodes
    from alaya.train.world_memory import MemoryEpisodes, cache_memory
    data = LatentEpisodes(str(episodes), None, "train", PromptEncoder(), PatchCodec(PatchCodecConfig(factor=4)))
    config = SceneMemoryConfig(max_points=TINY.memory_max_points)
    rolling = cache_memory(str(episodes), config, data.ids, progress=False, styles=1)
    lagged = cache_memory(str(episodes), config, data.ids, progress=False, styles=1, lag=3)
    return data, MemoryEpisodes(str(episodes), data.ids, rolling, data.shape[2], lagged), rolling, lagged


def test_lagged_renders_hold_the_frames_lag_behind_in_a_cache_of_their_own(episodes, split):
    from alaya.data.episodes import EpisodeDataset
    from alaya.models.scene_memory import SceneMemory, SceneMemoryConfig
    from alaya.train.world_memory import memory_key, rolling_renders
    data, mem, rolling, lagged = split
    config = SceneMemoryConfig(max_points=TINY.memory_max_points)
    assert rolling != lagged and memory_key(config) == memory_key(config, lag=1) != memory_key(config, lag=3)
    assert json.loads((lagged / "config.json").read_text())["lag"] == 3
    ep = EpisodeDataset(episodes).load(data.ids[0])
    out = rolling_renders(ep, config, styles=1, lag=3)
    assert out["coverage"][0, :3].sum() == 0 and out["coverage"][0, 3].mean() > 0.3   # frames 0-2: nothing 3 behind
    K, views = ep["K"].astype(np.float32), ep["world_to_camera"].astype(np.float32)
    memory = SceneMemory(config)
    for f in range(3):                                   # frame 5 sees frames 0, 1 and 2 only
        memory.insert(ep["rgb"][0, f], ep["depth"][f].astype(np.float32), K, views[f], time=f)
    r = memory.render(K, views[5], 32, 32)
    np.testing.assert_array_equal(out["coverage"][0, 5], r.coverage[0].numpy().astype(np.uint8))
    np.testing.assert_allclose(out["rgb"][0, 5] / 255, r.rgb.permute(1, 2, 0).numpy(), atol=1 / 255)
    rgb, cov, _ = mem.lagged.get([0], [0], [5])
    np.testing.assert_array_equal(cov[0, 0].numpy(), out["coverage"][0, 5])
    with pytest.raises(ValueError, match="lag"):
        rolling_renders(ep, config, styles=1, lag=0)


def test_lagged_samples_show_the_lagged_memory_and_context(split):
    from alaya.models.memory_conditioning import as_context, frame_image, shown_render, to_latent
    from alaya.train.world_config import WorldTrainConfig
    from alaya.train.world_memory_loss import memory_batch
    data, mem, _, _ = split
    cfg = WorldTrainConfig(data="unused", model=TINY, still_prob=0.0, reset_prob=0.0, memory_lag=3, memory_lag_prob=1.0)
    e, st = np.array([0, 1, 2, 0]), np.zeros(4, np.int64)
    T = data.shape[2]
    _, _, ctx, valid, _, _, (mrgb, mcov, mdepth), n = memory_batch(data, mem, cfg, np.random.default_rng(1), e, st, T)
    shown = shown_render(*mem.lagged.get(e, st, n), TINY)
    for got, want in zip((mrgb, mcov, mdepth), shown):
        torch.testing.assert_close(got, want)
    want_ctx, want_valid = mem.context(data, e, st, n, TINY.context, np.ones(len(e), bool))
    torch.testing.assert_close(ctx, want_ctx)
    torch.testing.assert_close(valid, want_valid)
    # the newest context frame: the lagged render of frame n-1 where it covers, the true frame elsewhere
    rgb, depth = mem.frame(data, e, st, n - 1)
    lrgb, lcov, ldepth = mem.lagged.get(e, st, n - 1)
    covered = lcov > 0.5
    assert covered.any() and (~covered).any()
    composite = torch.where(covered, lrgb, rgb)
    torch.testing.assert_close(ctx[:, 0], as_context(to_latent(frame_image(
        composite, torch.where(covered & (depth > 0), ldepth, depth)))))
    true_ctx, _ = mem.context(data, e, st, n, TINY.context)
    assert (ctx - true_ctx).abs().mean() > 1e-3                  # not the true frames
    plain = WorldTrainConfig(data="unused", model=TINY, still_prob=0.0, reset_prob=0.0)
    _, _, ctx0, _, _, _, (mrgb0, _, _), n0 = memory_batch(data, mem, plain, np.random.default_rng(1), e, st, T)
    np.testing.assert_array_equal(n0, n)
    torch.testing.assert_close(ctx0, true_ctx)                    # without the lag: the rolling renders, true context
    torch.testing.assert_close(mrgb0, shown_render(*mem.renders.get(e, st, n), TINY)[0])


def test_lag_config_names_the_field_at_fault():
    from alaya.train.world_config import WorldTrainConfig
    with pytest.raises(ValueError, match="memory_lag"):
        WorldTrainConfig(data="d", model=TINY, memory_lag_prob=0.5)
    with pytest.raises(ValueError, match="memory_lag_prob"):
        WorldTrainConfig(data="d", model=TINY, memory_lag=4, memory_lag_prob=1.5)
    with pytest.raises(ValueError, match="memory_lag"):
        WorldTrainConfig(data="d", model=TINY, memory_lag=-1)


def test_a_lagged_run_caches_its_renders_and_trains(episodes, tmp_path):
    from alaya.train.loop import TrainConfig
    from alaya.train.world import train_world
    from alaya.train.world_config import WorldTrainConfig
    run = tmp_path / "run"
    cfg = WorldTrainConfig(data=str(episodes), out=str(tmp_path / "out"), model=TINY, error_prob=0.0, still_prob=0.2,
                           memory_lag=2, memory_lag_prob=0.5, val_batches=1, val_batch_size=4,
                           train=TrainConfig(run_dir=str(run), steps=2, batch_size=4, log_every=1, val_every=2,
                                             ckpt_every=2, progress=False))
    train_world(cfg)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["step"] == 2 and np.isfinite(rows[-1]["loss"])
    from alaya.models.memory_conditioning import memory_config
    from alaya.train.world_memory import memory_key
    key = memory_key(memory_config(TINY), TINY.memory_sky_depth, lag=2)
    assert len(list((episodes / "memory" / key).glob("*.rgb.npy"))) >= 4

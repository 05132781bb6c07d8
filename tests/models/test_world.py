"""The world model: contracts of the network, and its training loop on a tiny recorded dataset."""

import json

import numpy as np
import pytest
import torch

from alaya.models.world import WorldModel, WorldModelConfig
from alaya.codecs.patch import PatchCodec
from alaya.train.loop import TrainConfig
from alaya.train.world import train_world
from alaya.train.world_config import WorldTrainConfig
from alaya.train.world_data import LatentEpisodes, add_context_noise, training_times
from alaya.train.world_latent_loss import ErrorBank, draw_batch, world_loss
from tiny_world import record_tiny_episodes

TINY = WorldModelConfig(widths=(16, 32), emb_dim=32)


def inputs(B=2, h=4, cfg=TINY):
    C = cfg.latent_channels
    return dict(z=torch.randn(B, C, h, h), t=torch.rand(B), anchor=torch.randn(B, C, h, h),
                context=torch.randn(B, cfg.context, C, h, h), valid=torch.ones(B, cfg.context, 1, h, h),
                style=torch.randn(B, 384), actions=torch.zeros(B, cfg.action_history, 8), noise=torch.zeros(B))


def test_shapes_and_errors_name_the_input():
    m = WorldModel(TINY)
    x = inputs()
    assert m(**x).shape == x["z"].shape
    bad = dict(x, actions=torch.zeros(2, 2, 8))
    with pytest.raises(ValueError, match="actions"):
        m(**bad)
    with pytest.raises(ValueError, match="style"):
        m(**dict(x, style=torch.zeros(2, 300)))


def test_actions_and_anchor_change_the_prediction():
    torch.manual_seed(0)
    m = WorldModel(TINY)
    for p in m.parameters():              # the output layer starts at zero: give it weights
        if p.abs().sum() == 0:
            torch.nn.init.normal_(p, std=0.1)
    x = inputs()
    base = m(**x)
    moved = dict(x, actions=x["actions"].clone())
    moved["actions"][:, 0, 0] = 1.0
    assert not torch.allclose(m(**moved), base)
    assert not torch.allclose(m(**dict(x, anchor=torch.randn_like(x["anchor"]))), base)
    # invalid context frames are ignored whatever they hold
    invalid = dict(x, valid=torch.zeros_like(x["valid"]))
    assert torch.allclose(m(**invalid), m(**dict(invalid, context=torch.randn_like(x["context"]))))


@pytest.fixture(scope="module")
def encoder():
    from alaya.text import PromptEncoder
    return PromptEncoder()


def test_config_checks_the_codec():
    with pytest.raises(ValueError, match="codec"):
        WorldModelConfig(codec="jpeg")
    with pytest.raises(ValueError, match="48 latent channels"):
        WorldModelConfig(latent_channels=32)
    assert WorldModelConfig(codec="autoencoder", latent_channels=32).factor == 8


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    return record_tiny_episodes(tmp_path_factory.mktemp("episodes"), episodes=12)


def test_batches_respect_causality_and_episode_starts(episodes, encoder):
    data = LatentEpisodes(str(episodes), None, "train", encoder, PatchCodec())
    cfg = WorldTrainConfig(data=str(episodes), model=TINY, start_fraction=0.5)
    rng = np.random.default_rng(0)
    e, st = rng.integers(len(data.ids), size=64), rng.integers(2, size=64)
    x, anchor, ctx, valid, rows, style, n, _ = draw_batch(data, cfg, rng, e, st, data.shape[2])

    def frame(b, k):
        return data.latent([e[b]], [st[b]], [k])[0]

    for b in range(64):
        assert torch.equal(x[b], frame(b, n[b]))
        for j in range(TINY.context):                     # context j = frame n-1-j, invalid before 0
            if n[b] - 1 - j >= 0:
                assert valid[b, j].all() and torch.equal(ctx[b, j], frame(b, n[b] - 1 - j))
            else:
                assert not valid[b, j].any()
        assert torch.equal(rows[b, 0], data.actions[e[b], n[b]])   # the row that led to frame n
    assert (n < 4).any()                                          # starts of episodes are trained


def test_training_runs_resumes_and_saves(episodes, tmp_path):
    run = tmp_path / "run"
    cfg = WorldTrainConfig(data=str(episodes), out=str(tmp_path / "out"), model=TINY,
                           rollout=2, rollout_prob=1.0, val_batches=1, val_batch_size=4,
                           train=TrainConfig(run_dir=str(run), steps=4, batch_size=4, log_every=2, val_every=2,
                                             ckpt_every=2, progress=False))
    train_world(cfg)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["step"] == 4 and rows[-1]["rollout"] == 1.0 and np.isfinite(rows[-1]["loss"])
    loaded = WorldModel.from_pretrained(tmp_path / "out")
    assert loaded.config == TINY
    # start frames beside the weights: frame 0 of the held-out episodes, in the first style
    from alaya.data.episodes import EpisodeDataset
    from alaya.runtime.world_folder import load_start_frames
    ds = EpisodeDataset(episodes)
    held_out = next(ds.ids(s) for s in ("test", "val", "train") if ds.ids(s))
    starts = load_start_frames(tmp_path / "out", size=32)
    assert len(starts) == min(6, len(held_out))
    for frame, eid in zip(starts, held_out):
        np.testing.assert_array_equal(frame, ds.load(eid)["rgb"][0, 0])
    cfg.train.steps = 6                                           # resumes from step 4
    train_world(cfg)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [2, 4, 6]


@pytest.mark.parametrize("shared", [0.0, 1.0])
def test_context_noise_is_static_or_fresh_per_frame(shared):
    """Shared noise is one draw for all context frames (a rollout's persistent errors); otherwise
    each frame gets its own. Invalid frames stay zero and the told level is the one applied."""
    cfg = WorldTrainConfig(data="unused", model=TINY, noise_prob=1.0, shared_noise=shared)
    ctx = torch.zeros(4, TINY.context, TINY.latent_channels, 4, 4)
    valid = torch.ones(4, TINY.context, 1, 4, 4)
    valid[:, -1] = 0
    noisy, level = add_context_noise(ctx, valid, cfg, np.random.default_rng(0))
    assert (noisy[:, -1] == 0).all()
    eps = noisy[:, :2] / level.view(4, 1, 1, 1, 1)
    assert torch.allclose(eps.std((1, 2, 3, 4)), torch.ones(4), atol=0.2)   # level is the noise's scale
    assert torch.equal(eps[:, 0], eps[:, 1]) == (shared == 1.0)


def test_error_bank_holds_real_rollout_errors_newest_first(episodes, encoder):
    data = LatentEpisodes(str(episodes), None, "train", encoder, PatchCodec())
    cfg = WorldTrainConfig(data=str(episodes), model=TINY, error_rollouts=5, error_horizon=48)
    bank = ErrorBank()
    torch.manual_seed(0)
    bank.refresh(WorldModel(TINY), data, cfg, np.random.default_rng(0))
    T = data.shape[2]
    assert bank.errors.shape == (5, T - TINY.context - 1, 48, 8, 8)       # horizon clamped to the episodes
    assert torch.isfinite(bank.errors).all() and bank.errors.abs().max() > 0
    bank.errors = torch.arange(1, 5, dtype=torch.float16).view(1, 4, 1, 1, 1).expand(3, 4, 48, 8, 8).clone()
    drawn = bank.draw(64, 3, np.random.default_rng(1))
    newest = drawn[:, 0, 0, 0, 0]                                        # horizon j + 1
    for k in range(3):                                                   # older frames: j - k + 1, or 0
        assert torch.equal(drawn[:, k, 0, 0, 0], torch.clamp(newest - k, min=0) * (newest - k > 0))


@pytest.mark.parametrize("prob", [0.0, 1.0])
def test_recycled_contexts_carry_the_bank_and_the_play_level(episodes, encoder, prob):
    data = LatentEpisodes(str(episodes), None, "train", encoder, PatchCodec())
    cfg = WorldTrainConfig(data=str(episodes), model=TINY, error_prob=prob, rollout=0)
    bank = ErrorBank()
    bank.refresh(WorldModel(TINY), data, cfg, np.random.default_rng(0))
    loss, metrics = world_loss(WorldModel(TINY), data, cfg, torch.ones(48), 0, 8, 0, bank=bank)
    assert metrics["recycled"] == prob and torch.isfinite(loss)


def test_ground_warp_trains_from_the_recorded_pitch(episodes, encoder, tmp_path):
    """The episodes' camera poses give every frame's pitch (the game's), which a ground-warp model
    trains with; data without poses is refused by name."""
    from alaya.data.episodes import EpisodeDataset
    from alaya.data.geometry import view_pitch_degrees
    data = LatentEpisodes(str(episodes), None, "train", encoder, PatchCodec())
    ep = EpisodeDataset(str(episodes)).load(data.ids[0])
    assert torch.allclose(data.pitch[0], torch.from_numpy(view_pitch_degrees(ep["world_to_camera"])))
    assert data.pitch[:, 0].sub(WorldModelConfig().start_pitch_degrees).abs().max() < 0.01   # start frames
    ground = WorldModelConfig(widths=(16, 32), emb_dim=32, view_warp=True, ground_warp=True)
    cfg = WorldTrainConfig(data=str(episodes), out=str(tmp_path / "out"), model=ground, rollout=2, rollout_prob=1.0,
                           error_rollouts=2, val_batches=1, val_batch_size=4,
                           train=TrainConfig(run_dir=str(tmp_path / "run"), steps=2, batch_size=4, log_every=1,
                                             val_every=2, ckpt_every=2, progress=False))
    train_world(cfg)
    assert WorldModel.from_pretrained(tmp_path / "out").config.ground_warp
    data.pitch = None
    with pytest.raises(ValueError, match="pitch"):
        world_loss(WorldModel(ground), data, cfg, torch.ones(48), 0, 4, 0)


def test_standing_still_samples_repeat_one_frame_with_no_action(episodes, encoder):
    """A still sample: no action rows, every context frame and the target are recorded frame
    n-1; the error bank's still rollouts are measured against their start frame."""
    from alaya.train.world_latent_loss import stand_still
    data = LatentEpisodes(str(episodes), None, "train", encoder, PatchCodec())
    cfg = WorldTrainConfig(data=str(episodes), model=TINY, still_prob=1.0, error_rollouts=3, error_horizon=4)
    rng = np.random.default_rng(0)
    e, st = rng.integers(len(data.ids), size=8), rng.integers(2, size=8)
    x, anchor, ctx, valid, rows, style, n, _ = draw_batch(data, cfg, rng, e, st, data.shape[2])
    x2, ctx2, valid2, rows2, pitched = stand_still(data, cfg, rng, e, st, n, x, ctx, valid, rows)
    assert (rows2 == 0).all() and (valid2 == 1).all() and np.array_equal(pitched, n - 1)
    for b in range(8):
        frame = data.latent([e[b]], [st[b]], [n[b] - 1])[0]
        assert torch.equal(x2[b], frame) and all(torch.equal(ctx2[b, k], frame) for k in range(TINY.context))
    same = stand_still(data, WorldTrainConfig(data="unused", model=TINY), rng, e, st, n, x, ctx, valid, rows)
    assert same[0] is x and same[3] is rows                                  # off by default
    bank = ErrorBank()
    model = WorldModel(TINY)
    bank.refresh(model, data, cfg, np.random.default_rng(0))
    assert torch.isfinite(bank.errors).all() and bank.errors.shape[:2] == (3, 4)
    loss, _ = world_loss(model, data, cfg, torch.ones(48), 0, 8, 0, bank=bank)
    assert torch.isfinite(loss)


def test_one_step_share_trains_at_t_one():
    """``one_step_t``: that share of the times is exactly 1 (the 1-step sampler's); the rest keep
    their distribution, and 0 leaves the draw unchanged."""
    base = WorldTrainConfig(data="unused", model=TINY)
    t0 = training_times(4000, base, np.random.default_rng(0))
    assert torch.equal(t0, training_times(4000, WorldTrainConfig(data="unused", model=TINY, one_step_t=0.0),
                                          np.random.default_rng(0)))
    assert (t0 > 0).all() and (t0 <= 1).all() and (t0 == 1).float().mean() < 0.01
    t = training_times(4000, WorldTrainConfig(data="unused", model=TINY, one_step_t=0.4), np.random.default_rng(0))
    assert 0.37 < (t == 1).float().mean() < 0.43
    assert torch.equal(t[t != 1], t0[t != 1])


def test_anchor_warp_trains_and_fine_tunes_from_a_ground_warp_model(episodes, encoder, tmp_path):
    """An anchor-warp run (self-rollout, error bank and still samples included) starts from a
    ground-warp model's weights and saves an anchor-warp model; dead-reckoned poses start at the
    origin of every episode."""
    data = LatentEpisodes(str(episodes), None, "train", encoder, PatchCodec())
    P = data.poses(WorldModelConfig())
    assert P.shape == (*data.actions.shape[:2], 3) and torch.equal(P[:, 0], torch.zeros(len(P), 3))
    ground = WorldModelConfig(widths=(16, 32), emb_dim=32, view_warp=True, ground_warp=True)
    WorldModel(ground).save_pretrained(tmp_path / "init")
    anchored = WorldModelConfig(widths=(16, 32), emb_dim=32, view_warp=True, ground_warp=True, anchor_warp=True)
    cfg = WorldTrainConfig(data=str(episodes), init=str(tmp_path / "init"), out=str(tmp_path / "out"), model=anchored,
                           rollout=2, rollout_prob=1.0, error_rollouts=2, error_horizon=4, still_prob=0.5,
                           one_step_t=0.5, play_context_noise=0.0, val_batches=1, val_batch_size=4,
                           train=TrainConfig(run_dir=str(tmp_path / "run"), steps=2, batch_size=4, log_every=1,
                                             val_every=2, ckpt_every=2, progress=False))
    train_world(cfg)
    out = WorldModel.from_pretrained(tmp_path / "out").config
    assert out.anchor_warp and out.play_context_noise == 0.0
    data.pitch = None
    with pytest.raises(ValueError, match="world_to_camera"):
        world_loss(WorldModel(anchored), data, cfg, torch.ones(48), 0, 4, 0)


def test_unrolled_loss_of_a_copy_last_world_is_its_recorded_change(episodes, encoder):
    """Known answer: a world that repeats its newest frame scores, per chain, the weighted error
    of its start frame against the recorded frames that follow (the copy-last baseline), and 0
    where it stands still; ``velocity_loss_weight`` at t = 1 scales both."""
    from types import SimpleNamespace
    from alaya.diffusion.flow import velocity_loss_weight
    from alaya.train.world_latent_loss import free_rollout_starts, unroll_loss
    data = LatentEpisodes(str(episodes), None, "train", encoder, PatchCodec())
    copy_last = SimpleNamespace(generate=lambda z, anchor, ctx, *a, **k: ctx[:, 0])
    weights = torch.rand(48) + 0.5
    w = weights.view(1, -1, 1, 1) * velocity_loss_weight(torch.ones(()), TINY.sigma_data)
    still = WorldTrainConfig(data="unused", model=TINY, unroll=3, unroll_batch=4, unroll_still_prob=1.0)
    assert unroll_loss(copy_last, data, still, weights, 5, 0).item() == 0.0
    cfg = WorldTrainConfig(data="unused", model=TINY, unroll=3, unroll_batch=4)
    e, st, n0, flags, _ = free_rollout_starts(data, cfg, np.random.default_rng([0, 5, 11]), 4, 3)
    assert not flags.any() and (n0 >= TINY.context).all() and (n0 + 3 <= data.shape[2]).all()
    start = data.latent(e, st, n0 - 1)
    expect = torch.stack([((start - data.latent(e, st, n0 + h)) ** 2 * w).mean() for h in range(3)]).mean()
    assert torch.allclose(unroll_loss(copy_last, data, cfg, weights, 5, 0), expect)


def test_unrolled_loss_trains_through_the_chain(episodes, encoder):
    """Backpropagation through the rollout: a later frame's error reaches an earlier generated
    frame through the context it feeds, and the chain is the one a session plays (the same
    frames as the gradient-free sampler)."""
    from alaya.train.world_latent_loss import free_rollout_starts, play_along
    data = LatentEpisodes(str(episodes), None, "train", encoder, PatchCodec())
    cfg = WorldTrainConfig(data="unused", model=TINY, unroll=3, still_prob=0.5)
    model = WorldModel(TINY)

    def chain(generate):
        rng = np.random.default_rng(3)
        e, st, n0, still, _ = free_rollout_starts(data, cfg, rng, 4, 3)
        return list(play_along(generate, data, cfg, rng, e, st, n0, 3, still))

    frames = chain(model.generate)
    frames[0][0].retain_grad()
    ((frames[-1][0] - frames[-1][1]) ** 2).mean().backward()
    assert frames[0][0].grad is not None and frames[0][0].grad.abs().sum() > 0
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    for (a, _), (b, _) in zip(frames, chain(model.sample)):
        assert torch.allclose(a.detach(), b)


def test_training_with_the_unrolled_loss_logs_and_validates_it(episodes, tmp_path):
    run = tmp_path / "run"
    cfg = WorldTrainConfig(data=str(episodes), out=str(tmp_path / "out"), model=TINY, unroll=3, unroll_batch=2,
                           still_prob=0.5, val_batches=1, val_batch_size=4,
                           train=TrainConfig(run_dir=str(run), steps=2, batch_size=4, log_every=1, val_every=2,
                                             ckpt_every=2, progress=False))
    train_world(cfg)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    last = rows[-1]
    assert np.isfinite(last["unroll"]) and last["unroll"] > 0 and np.isfinite(last["val_unroll"])
    assert last["loss"] == pytest.approx(last["flow"] + last["unroll"], rel=1e-5)

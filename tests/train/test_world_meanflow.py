"""MeanFlow for the memory world model (``alaya.train.world_meanflow``): the times, the target's
identity on a model whose average velocity is known, the 1-step sampler of an average-velocity
model asks for the interval [0, 1], and a run trains, saves and plays such a model."""

import json

import numpy as np
import pytest
import torch

from alaya.models.world import WorldModel, WorldModelConfig
from alaya.train.world_meanflow import PLAY_SHARE, meanflow_target, meanflow_times

TINY = WorldModelConfig(memory=True, latent_channels=80, widths=(16, 32), emb_dim=32, steps=1,
                        memory_max_points=5000)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_times_keep_r_equal_t_off_the_share_and_put_the_play_step_in_it():
    t = torch.rand(4000) * 0.9 + 0.05
    r, same = meanflow_times(t, 0.0, np.random.default_rng(0))
    assert torch.equal(r, t) and torch.equal(same, t)
    r, t2 = meanflow_times(t, 0.5, np.random.default_rng(0))
    interval = r < t2
    assert abs(float(interval.float().mean()) - 0.5) < 0.05
    assert torch.equal(r[~interval], t[~interval]) and torch.equal(t2[~interval], t[~interval])
    play = (r == 0) & (t2 == 1)
    assert abs(float(play.float().mean()) - 0.5 * PLAY_SHARE) < 0.05
    assert bool(((r >= 0) & (r <= t2) & (t2 <= 1)).all()) and bool((t2[interval] >= 0.3).all())
    with pytest.raises(ValueError, match="meanflow_share"):
        meanflow_times(t, 1.5, np.random.default_rng(0))


class Linear(torch.nn.Module):
    """u(z, r, t) = a z + b t + c r: du/dt along velocity v is a v + b."""

    def forward(self, z, t, *condition, r=None):
        return 0.5 * z + 2.0 * t.view(-1, 1, 1, 1) + 3.0 * r.view(-1, 1, 1, 1)


def test_the_target_is_the_velocity_less_the_interval_times_the_derivative_along_the_path():
    z, v = torch.randn(3, 2, 4, 4), torch.randn(3, 2, 4, 4)
    r, t = torch.tensor([0.0, 0.2, 0.5]), torch.tensor([1.0, 0.6, 0.9])
    target = meanflow_target(Linear(), z, r, t, v, (), None)
    expected = v - (t - r).view(-1, 1, 1, 1) * (0.5 * v + 2.0)
    torch.testing.assert_close(target, expected)
    assert not target.requires_grad


def test_an_average_velocity_model_samples_its_one_step_over_zero_to_one():
    torch.manual_seed(0)
    world = WorldModel(WorldModelConfig(**{**TINY.__dict__, "average_velocity": True})).eval()
    assert world.core.config.average_velocity
    with torch.no_grad():                      # every zero-initialized layer given weights: r now matters
        for p in world.parameters():
            p.add_(0.1 * torch.randn_like(p))
    B, h = 2, 8
    z = torch.randn(B, 80, h, h)
    memory = torch.zeros(B, 80, h, h)
    context, valid = torch.zeros(B, TINY.context, 80, h, h), torch.ones(B, TINY.context, 1, h, h)
    style, actions, noise = torch.randn(B, 384), torch.zeros(B, TINY.action_history, 8), torch.zeros(B)
    sampled = world.sample(z, memory, context, valid, style, actions, noise, steps=1)
    u = world(z, torch.ones(B), memory, context, valid, style, actions, noise, r=torch.zeros(B))
    v = world(z, torch.ones(B), memory, context, valid, style, actions, noise)
    assert not torch.allclose(u, v)
    torch.testing.assert_close(sampled, world.finish(z - u, context[:, 0], stabilize=False, memory=memory))


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    from tiny_world import record_tiny_episodes
    return record_tiny_episodes(tmp_path_factory.mktemp("episodes"), episodes=5)


def test_a_meanflow_run_trains_saves_and_plays_an_average_velocity_model(episodes, tmp_path):
    from alaya.runtime.world_factory import WorldSessionFactory
    from alaya.train.loop import TrainConfig
    from alaya.train.world import train_world
    from alaya.train.world_config import WorldTrainConfig
    run = tmp_path / "run"
    cfg = WorldTrainConfig(data=str(episodes), out=str(tmp_path / "out"), model=TINY, error_prob=0.0,
                           meanflow_share=1.0, one_step_t=0.5, spectrum_weight=1.0, spectrum_patch=8,
                           val_batches=1, val_batch_size=4,
                           train=TrainConfig(run_dir=str(run), steps=2, batch_size=4, log_every=1, progress=False))
    train_world(cfg)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(np.isfinite(r["loss"]) for r in rows), rows
    assert any("spectrum" in r for r in rows)              # the play-step samples are judged
    saved = WorldModel.from_pretrained(tmp_path / "out")
    assert saved.config.average_velocity and saved.core.config.average_velocity
    session = WorldSessionFactory.from_pretrained(tmp_path / "out", size=32, backend="torch").new("a golden sunset", 0)
    session.reset(np.full((32, 32, 3), 128, np.uint8))
    frame = session.step(np.zeros(8, np.float32))
    assert frame.shape == (32, 32, 3) and frame.dtype == np.uint8
    with pytest.raises(ValueError, match="meanflow_share"):
        WorldTrainConfig(data=str(episodes), model=TINY, meanflow_share=-0.1)
    plain = WorldModelConfig(widths=(16, 32), emb_dim=32)
    with pytest.raises(ValueError, match="memory"):
        train_world(WorldTrainConfig(data=str(episodes), model=plain, error_prob=0.0, meanflow_share=0.5,
                                     train=TrainConfig(run_dir=str(tmp_path / "r2"), steps=1, progress=False)))


def test_the_adaptive_weight_makes_every_samples_gradient_the_same_size():
    from alaya.train.world_meanflow import adaptive_weighted
    error = torch.tensor([0.5, 50.0], requires_grad=True)
    weighted = adaptive_weighted(error ** 2)
    weighted.sum().backward()
    assert torch.allclose(weighted.detach(), torch.tensor([0.25 / 0.251, 2500 / 2500.001]))
    ratio = float(error.grad[1] / error.grad[0])        # d/de (e^2 / e^2) = 2 / e: the large one counts less
    assert abs(ratio - 0.5 / 50.0) < 1e-3


def test_a_flow_model_made_average_velocity_gives_every_interval_the_velocity_at_t():
    torch.manual_seed(0)
    world = WorldModel(TINY).eval()
    with torch.no_grad():                      # a trained flow model: every layer has weights
        for p in world.parameters():
            p.add_(0.1 * torch.randn_like(p))
    B, h = 3, 8
    z = torch.randn(B, 80, h, h)
    rest = (torch.zeros(B, 80, h, h), torch.zeros(B, TINY.context, 80, h, h), torch.ones(B, TINY.context, 1, h, h),
            torch.randn(B, 384), torch.zeros(B, TINY.action_history, 8), torch.zeros(B))
    t, r = torch.tensor([1.0, 0.7, 0.4]), torch.tensor([0.0, 0.2, 0.1])
    v = world(z, t, *rest)
    assert not torch.allclose(world(z, t, *rest, r=r), v)     # before: an interval it never saw
    assert world.to_average_velocity() is world and world.config.average_velocity
    assert world.core.config.average_velocity
    torch.testing.assert_close(world(z, t, *rest, r=r), v)
    torch.testing.assert_close(world(z, t, *rest), v)

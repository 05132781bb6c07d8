"""The memory world model's patch critic (``alaya.train.world_critic``): the 1-step frame it
judges is the one play shows, the losses reach only their own side, and a run with the critic
trains, resumes and saves the world model alone."""

import json

import numpy as np
import pytest
import torch

from alaya.models.memory_conditioning import memory_latent, to_image
from alaya.models.world import WorldModel, WorldModelConfig
from alaya.nn.critic import PatchCritic, PatchCriticConfig
from alaya.train.world_critic import WorldWithCritic, adversarial_losses, critic_of, one_step_frames, world_of

TINY = WorldModelConfig(memory=True, latent_channels=80, widths=(16, 32), emb_dim=32, steps=1,
                        memory_max_points=5000)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def inputs(B=2, size=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = size // 4
    cov = (torch.rand(B, 1, size, size, generator=g) > 0.5).float()
    memory = memory_latent(torch.rand(B, 3, size, size, generator=g) * cov, cov, (2 + torch.rand(B, 1, size, size,
                                                                                               generator=g)) * cov)
    context = torch.rand(B, TINY.context, 80, h, h, generator=g) * 2 - 1
    context[:, :, 64:] = 0                       # a context carries no gate
    valid = torch.ones(B, TINY.context, 1, h, h)
    return (torch.randn(B, 80, h, h, generator=g), memory, context, valid, torch.randn(B, 384, generator=g),
            torch.zeros(B, TINY.action_history, TINY.action_dim), torch.zeros(B))


def test_the_one_step_frame_is_what_the_sampler_shows():
    torch.manual_seed(0)
    world = WorldModel(TINY).eval()
    z, memory, context, valid, style, actions, noise = inputs()
    v = world(z, torch.ones(2), memory, context, valid, style, actions, noise)
    frame = one_step_frames(world, z, v, context[:, 0], memory)
    sampled = world.sample(z, memory, context, valid, style, actions, noise, steps=1, stabilize=True)
    assert frame.shape == (2, 3, 32, 32)
    torch.testing.assert_close(frame, to_image(sampled)[:, :3].clamp(0, 1))


def test_the_critic_loss_trains_the_critic_and_the_generator_loss_the_generator():
    torch.manual_seed(0)
    critic = PatchCritic(PatchCriticConfig(condition_channels=4, widths=(8, 16)))
    fake = torch.rand(2, 3, 32, 32, requires_grad=True)
    real, mrgb, cov = torch.rand(2, 3, 32, 32), torch.rand(2, 3, 32, 32), torch.ones(2, 1, 32, 32)
    critic_loss, generator_loss = adversarial_losses(critic, fake, real, mrgb, cov)
    critic_loss.backward(retain_graph=True)
    assert fake.grad is None and all(p.grad is not None for p in critic.parameters())
    critic.zero_grad(set_to_none=True)
    generator_loss.backward()
    assert fake.grad is not None and float(fake.grad.abs().sum()) > 0
    assert all(p.grad is None for p in critic.parameters())
    with pytest.raises(ValueError, match="same batch"):
        adversarial_losses(critic, fake, real[:1], mrgb, cov)


def test_the_wrapper_forwards_to_the_world_model():
    torch.manual_seed(0)
    world = WorldModel(TINY)
    both = WorldWithCritic(world)
    assert world_of(both) is world and world_of(world) is world
    assert critic_of(world) is None and critic_of(both) is both.critic
    z, memory, context, valid, style, actions, noise = inputs()
    t = torch.full((2,), 0.5)
    assert torch.equal(both(z, t, memory, context, valid, style, actions, noise),
                       world(z, t, memory, context, valid, style, actions, noise))


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    from tiny_world import record_tiny_episodes
    return record_tiny_episodes(tmp_path_factory.mktemp("episodes"), episodes=5)


def test_a_run_with_the_critic_trains_resumes_and_saves_the_world_model(episodes, tmp_path, monkeypatch):
    from alaya.train.loop import TrainConfig
    from alaya.train.world import train_world
    from alaya.train.world_config import WorldTrainConfig
    run = tmp_path / "run"
    cfg = WorldTrainConfig(data=str(episodes), out=str(tmp_path / "out"), model=TINY, error_prob=0.0,
                           still_prob=0.2, one_step_t=0.5, adversarial_weight=0.5, adversarial_start=1,
                           val_batches=1, val_batch_size=4,
                           train=TrainConfig(run_dir=str(run), steps=2, batch_size=4, log_every=1, val_every=2,
                                             ckpt_every=2, progress=False))
    train_world(cfg)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    logged = [r for r in rows if "critic" in r]
    assert logged and all(np.isfinite(r["critic"]) and np.isfinite(r["generator"]) for r in logged)
    saved = WorldModel.from_pretrained(tmp_path / "out")
    assert saved.config == TINY and not any(k.startswith("critic") for k in saved.state_dict())
    cfg.train.steps = 3
    train_world(cfg)                                           # resumes the critic with the model
    assert [json.loads(r)["step"] for r in (run / "metrics.jsonl").read_text().splitlines()][-1] == 3
    with pytest.raises(ValueError, match="one_step_t"):
        train_world(WorldTrainConfig(data=str(episodes), model=TINY, error_prob=0.0, adversarial_weight=0.5,
                                     train=TrainConfig(run_dir=str(tmp_path / "r2"), steps=1, progress=False)))
    monkeypatch.setenv("WORLD_SIZE", "2")                     # under torchrun the critic would not be averaged
    with pytest.raises(ValueError, match="torchrun"):
        train_world(WorldTrainConfig(data=str(episodes), model=TINY, error_prob=0.0, adversarial_weight=0.5,
                                     one_step_t=0.5, train=TrainConfig(run_dir=str(tmp_path / "r3"), steps=1,
                                                                       progress=False)))


def test_a_run_with_the_spectrum_loss_logs_it_and_needs_the_one_step_samples(episodes, tmp_path):
    from alaya.train.loop import TrainConfig
    from alaya.train.world import train_world
    from alaya.train.world_config import WorldTrainConfig
    run = tmp_path / "run"
    train_world(WorldTrainConfig(data=str(episodes), out=str(tmp_path / "out"), model=TINY, error_prob=0.0,
                                 one_step_t=1.0, spectrum_weight=1.0, spectrum_patch=8, val_batches=1,
                                 val_batch_size=4, train=TrainConfig(run_dir=str(run), steps=2, batch_size=4,
                                                                     log_every=1, progress=False)))
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(np.isfinite(r["spectrum"]) and r["spectrum"] >= 0 for r in rows), rows
    with pytest.raises(ValueError, match="one_step_t"):
        WorldTrainConfig(data=str(episodes), model=TINY, spectrum_weight=1.0)
    with pytest.raises(ValueError, match="spectrum_weight"):
        WorldTrainConfig(data=str(episodes), model=TINY, one_step_t=0.5, spectrum_weight=-1.0)

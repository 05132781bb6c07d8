"""A patch critic for a memory world model's one-step frames (``adversarial_weight``).

Flow matching at t = 1, the only time the shipped 1-step sampler asks about, is a regression: its
answer where the memory is empty (a turn's new side, a walk's new floor, a lamp never seen) is the
mean of what could be there, which play continues column by column into soft streaks. A critic
asks for content of the game's kind instead (ADD, Sauer et al. 2023: a patch critic beside the
regression; pix2pix's PatchGAN for the critic, ``alaya.nn.critic``):

* the samples of a batch trained at t = 1 (``one_step_t`` of them) give the frame play would show:
  ``x̂ = eps - v`` added to the memory base, stabilized and composited with the memory by the
  generated gate (``WorldModel.finish``), as RGB;
* the critic sees that frame, or the true one, beside the memory render it was made from (rgb and
  coverage), so it judges whether the content fits the memory and is the game's own where the
  memory is empty;
* hinge losses: the critic's on detached frames, the generator's through a frozen critic, so one
  backward pass trains both; the generator's from ``adversarial_start`` on.

The critic trains in the same module as the model (``WorldWithCritic``), so the loop's optimizer,
EMA and checkpoints carry it and a run resumes exactly; only the world model is saved. One process
only: the critic is called outside the module's forward, which DDP would not synchronize, so
training refuses it under torchrun.
"""

from __future__ import annotations

import torch
from torch import nn

from alaya.models.memory_conditioning import to_image
from alaya.models.world import WorldModel
from alaya.nn.critic import PatchCritic, PatchCriticConfig, frozen_call, hinge_critic_loss, hinge_generator_loss

CONDITION_CHANNELS = 4          # the memory render's rgb and coverage


class WorldWithCritic(nn.Module):
    """A world model and its patch critic as one trained module; ``forward`` is the model's."""

    def __init__(self, world: WorldModel, critic: PatchCritic | None = None):
        super().__init__()
        self.world = world
        self.critic = critic or PatchCritic(PatchCriticConfig(condition_channels=CONDITION_CHANNELS))

    def forward(self, *args, **kwargs) -> torch.Tensor:
        return self.world(*args, **kwargs)


def world_of(model: nn.Module) -> WorldModel:
    """The world model inside what the loop trains (a world model or a ``WorldWithCritic``, maybe under DDP)."""
    model = getattr(model, "module", model)
    return model.world if isinstance(model, WorldWithCritic) else model


def critic_of(model: nn.Module) -> PatchCritic | None:
    model = getattr(model, "module", model)
    return model.critic if isinstance(model, WorldWithCritic) else None


def one_step_frames(world: WorldModel, z: torch.Tensor, v: torch.Tensor, newest: torch.Tensor,
                    memory: torch.Tensor) -> torch.Tensor:
    """The RGB frames (B, 3, H, W) in [0, 1] a 1-step sampler shows from noise ``z`` at t = 1 and
    the model's velocity ``v`` there (latents (B, 80, h, w)), given the newest aligned context
    frame and the memory latent. Differentiable."""
    shown = world.finish(z - v, newest, stabilize=True, memory=memory)
    return to_image(shown, world.config.factor)[:, :3].clamp(0, 1)


def adversarial_losses(critic: PatchCritic, fake: torch.Tensor, real: torch.Tensor, memory_rgb: torch.Tensor,
                       coverage: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(critic loss, generator loss) for generated and true frames (B, 3, H, W) made from the
    memory render ``memory_rgb`` (B, 3, H, W) with ``coverage`` (B, 1, H, W). The critic loss
    reaches the critic only, the generator loss the generator only."""
    if fake.shape != real.shape or fake.shape[0] != memory_rgb.shape[0]:
        raise ValueError(f"fake {tuple(fake.shape)}, real {tuple(real.shape)} and memory {tuple(memory_rgb.shape)} "
                         "must be (B, 3, H, W) frames of the same batch")
    cond = torch.cat([memory_rgb * 2 - 1, coverage * 2 - 1], 1)
    critic_loss = hinge_critic_loss(critic(real, cond), critic(fake.detach(), cond))
    generator_loss = hinge_generator_loss(frozen_call(critic, fake, cond))
    return critic_loss, generator_loss

"""A small conditional patch critic and its hinge losses, for adversarial detail in few-step
decoders (pix2pix's PatchGAN, Isola et al. 2017; as a light term beside a reconstruction loss, as
in ADD, Sauer et al. 2023, and the TAESD decoders).

The critic sees an image beside its conditioning (for a decoder: the G-buffer guide) and scores
each overlapping patch real or generated, so what it asks of the generator is local detail that
fits the conditioning (the texture, outlines and grain the reference has there), not a mean.

    critic = PatchCritic(PatchCriticConfig(condition_channels=20))
    d_loss = hinge_critic_loss(critic(real, cond), critic(fake.detach(), cond))
    g_loss = hinge_generator_loss(frozen_call(critic, fake, cond))
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call


@dataclass
class PatchCriticConfig:
    image_channels: int = 3
    condition_channels: int = 0
    widths: tuple[int, ...] = (32, 64, 64)     # one stride-2 4x4 convolution each: patches of ~22 px


class PatchCritic(nn.Module):
    def __init__(self, config: PatchCriticConfig | None = None):
        super().__init__()
        self.config = c = config or PatchCriticConfig()
        layers, width = [], c.image_channels + c.condition_channels
        for w in c.widths:
            layers += [nn.Conv2d(width, w, 4, stride=2, padding=1), nn.LeakyReLU(0.2)]
            width = w
        layers.append(nn.Conv2d(width, 1, 3, padding=1))
        self.net = nn.Sequential(*layers)

    def forward(self, image: torch.Tensor, condition: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (B, 1, H / 2^n, W / 2^n) for images in [0, 1] (B, 3, H, W) and their condition."""
        x = image * 2 - 1
        if self.config.condition_channels:
            if condition is None or condition.shape[1] != self.config.condition_channels:
                raise ValueError(f"critic condition: expected {self.config.condition_channels} channels, got "
                                 f"{None if condition is None else tuple(condition.shape)}")
            x = torch.cat([x, condition], 1)
        return self.net(x)


def frozen_call(critic: nn.Module, *inputs: torch.Tensor) -> torch.Tensor:
    """``critic(*inputs)`` with its parameters detached: the gradient reaches the inputs (the
    generator) but not the critic, so one backward pass can train both on their own losses."""
    params = {k: v.detach() for k, v in critic.named_parameters()}
    return functional_call(critic, params, inputs)


def hinge_critic_loss(real_logits: torch.Tensor, fake_logits: torch.Tensor) -> torch.Tensor:
    """Hinge loss of the critic (Lim & Ye 2017): push real patches above +1, generated below -1."""
    return 0.5 * (F.relu(1 - real_logits).mean() + F.relu(1 + fake_logits).mean())


def hinge_generator_loss(fake_logits: torch.Tensor) -> torch.Tensor:
    """The generator's side of the hinge game: raise the critic's score of its patches."""
    return -fake_logits.mean()

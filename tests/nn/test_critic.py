"""The patch critic: shapes, its condition checked, frozen calls, hinge losses."""

import pytest
import torch

from alaya.nn.critic import (PatchCritic, PatchCriticConfig, frozen_call, hinge_critic_loss,
                             hinge_generator_loss)


def test_shapes_and_condition_checked():
    critic = PatchCritic(PatchCriticConfig(condition_channels=5, widths=(8, 16)))
    x, cond = torch.rand(2, 3, 32, 32), torch.randn(2, 5, 32, 32)
    assert critic(x, cond).shape == (2, 1, 8, 8)
    with pytest.raises(ValueError, match="condition"):
        critic(x, cond[:, :4])
    with pytest.raises(ValueError, match="condition"):
        critic(x)


def test_frozen_call_trains_the_generator_not_the_critic():
    torch.manual_seed(0)
    critic = PatchCritic(PatchCriticConfig(widths=(8,)))
    fake = torch.rand(2, 3, 16, 16, requires_grad=True)
    out = frozen_call(critic, fake)
    assert torch.equal(out, critic(fake))
    hinge_generator_loss(out).backward()
    assert fake.grad is not None and float(fake.grad.abs().sum()) > 0
    assert all(p.grad is None for p in critic.parameters())


def test_hinge_losses():
    ones = torch.ones(4)
    assert float(hinge_critic_loss(ones, -ones)) == 0.0          # real above +1, fake below -1: no loss
    assert float(hinge_critic_loss(-ones, ones)) == 2.0
    assert float(hinge_generator_loss(3 * ones)) == -3.0


def test_a_critic_learns_to_tell_sharp_from_blurred():
    """Trained for a few steps, it scores textured patches above their blurred copies: what the
    generator is then asked for is detail, not a mean."""
    torch.manual_seed(0)
    critic = PatchCritic(PatchCriticConfig(widths=(8, 16)))
    opt = torch.optim.Adam(critic.parameters(), lr=2e-3)
    blur = torch.nn.AvgPool2d(5, 1, 2, count_include_pad=False)
    for _ in range(60):
        real = torch.rand(8, 3, 32, 32)
        loss = hinge_critic_loss(critic(real), critic(blur(real)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    real = torch.rand(8, 3, 32, 32)
    with torch.no_grad():
        assert float(critic(real).mean()) > float(critic(blur(real)).mean()) + 0.5

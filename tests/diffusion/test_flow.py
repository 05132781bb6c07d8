"""Rectified-flow losses and samplers on cases with known answers."""

import pytest
import torch

from alaya.diffusion.flow import (flow_matching_loss, interpolate, logit_normal_t, sample_euler,
                                  sample_heun, time_grid)


def exact_velocity(x0):
    """The true velocity field when all data sits at the single point x0: v = (z - x0) / t."""
    def model(z, t, **_):
        return (z - x0) / t.reshape(-1, *([1] * (z.ndim - 1))).clamp(min=1e-6)
    return model


@pytest.mark.parametrize("sampler", [sample_euler, sample_heun])
def test_samplers_reach_the_data_point(sampler):
    x0 = torch.tensor([[1.5, -2.0, 0.25]])
    z1 = torch.randn(1, 3)
    out = sampler(exact_velocity(x0), z1, time_grid(4))
    assert torch.allclose(out, x0, atol=1e-5)


def test_flow_loss_is_zero_for_the_true_velocity():
    x, eps = torch.randn(8, 4), torch.randn(8, 4)
    t = logit_normal_t(8, torch.Generator().manual_seed(0))
    def oracle(z, t, **_):
        return eps - x
    assert flow_matching_loss(oracle, x, t, eps) == 0
    assert flow_matching_loss(lambda z, t: torch.zeros_like(z), x, t, eps) > 0
    assert torch.allclose(interpolate(x, eps, torch.zeros(8)), x)
    assert torch.allclose(interpolate(x, eps, torch.ones(8)), eps)


def test_guidance_combines_two_calls():
    calls = []
    def model(z, t, label):
        calls.append(label)
        return torch.full_like(z, float(label))
    z = torch.zeros(1, 2)
    out = sample_euler(model, z, torch.tensor([1.0, 0.0]), cond={"label": 1, "uncond": {"label": 0}},
                       guidance=3.0)
    assert calls == [1, 0]
    assert torch.allclose(out, torch.full((1, 2), -3.0))     # v = 0 + 3 (1 - 0); z = 0 - 1 * 3
    with pytest.raises(ValueError, match="uncond"):
        sample_euler(model, z, torch.tensor([1.0, 0.0]), cond={"label": 1}, guidance=2.0)


def test_time_grid():
    g = time_grid(10, shift=3.0)
    assert g[0] == 1 and g[-1] == 0 and torch.all(g[1:] < g[:-1])
    assert g[5] > 0.5
    t = logit_normal_t(1000, torch.Generator().manual_seed(1))
    assert 0 < t.min() and t.max() < 1


def test_edm_coefficients_and_x_prediction_loss():
    from alaya.diffusion.flow import edm_coefficients, x_prediction_loss
    t = torch.tensor([1e-6, 0.5, 1.0])
    c_in, c_skip, c_out = edm_coefficients(t, 0.5)
    assert torch.allclose(c_skip[[0, 2]], torch.tensor([1.0, 0.0]), atol=1e-5)
    assert torch.allclose(c_out[[0, 2]], torch.tensor([0.0, 0.5]), atol=1e-5)
    # residual x - c_skip z has variance c_out^2 for x ~ N(0, 0.5^2)
    g = torch.Generator().manual_seed(0)
    x, eps = 0.5 * torch.randn(200000, generator=g), torch.randn(200000, generator=g)
    z = 0.5 * x + 0.5 * eps
    assert abs(float((x - c_skip[1] * z).var()) - float(c_out[1] ** 2)) < 2e-3
    assert abs(float((c_in[1] * z).var()) - 1.0) < 1e-2
    xs = torch.randn(4, 3)
    exact = x_prediction_loss(lambda z, t: xs, xs, torch.full((4,), 0.3), torch.randn(4, 3), 0.5)
    assert float(exact) == 0.0


def test_share_at_one_draws_nothing_when_off():
    import numpy as np

    from alaya.diffusion.flow import with_share_at_one
    t = torch.full((50,), 0.3)
    rng = np.random.default_rng(0)
    assert with_share_at_one(t, 0.0, rng) is t
    assert rng.random() == np.random.default_rng(0).random()      # no draw was taken
    half = with_share_at_one(t, 0.5, np.random.default_rng(1))
    assert ((half == 1) | (half == t)).all()
    assert 10 < int((half == 1).sum()) < 40

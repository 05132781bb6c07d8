"""MeanFlow target, loss and sampler on a flow with a known answer: all data at one point x, so
the marginal velocity is v(z, t) = (z - x) / t, trajectories are straight lines, and the exact
average velocity is u(z, r, t) = (z - x) / t for every r."""

import numpy as np
import pytest
import torch

from alaya.diffusion.meanflow import meanflow_loss, meanflow_target, sample_meanflow, sample_times

X = torch.tensor([[0.5, -1.0, 2.0]])


def exact_u(z, r, t):
    return (z - X) / t.reshape(-1, 1)


def setup(n=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    eps = torch.randn(n, 3, generator=g)
    t = torch.rand(n, generator=g) * 0.8 + 0.2
    r = t * torch.rand(n, generator=g)
    z = (1 - t[:, None]) * X + t[:, None] * eps
    return z, r, t, eps - X


@pytest.mark.parametrize("jvp", ["exact", "fd"])
def test_exact_average_velocity_is_a_fixed_point(jvp):
    z, r, t, v = setup()
    u, target = meanflow_target(exact_u, z, r, t, v, jvp=jvp)
    assert torch.allclose(u, v, atol=1e-5)
    assert torch.allclose(target, u, atol=2e-3 if jvp == "fd" else 1e-5)
    assert float(meanflow_loss(exact_u, z, r, t, v, jvp=jvp)) < 1e-5


def test_a_wrong_model_is_not_a_fixed_point():
    z, r, t, v = setup()

    def curved(z, r, t):          # right at r = t, wrong over intervals
        return exact_u(z, r, t) + (t - r).reshape(-1, 1) * z
    assert float(meanflow_loss(curved, z, r, t, v)) > 1e-2


def test_target_matches_the_identity_on_a_nonlinear_model():
    z, r, t, v = setup()
    w = torch.tensor([[0.3, -0.2, 0.1]])

    def model(z, r, t):
        return torch.tanh(z * w) * t.reshape(-1, 1) ** 2
    u, target = meanflow_target(model, z, r, t, v)
    dudt = (1 - torch.tanh(z * w) ** 2) * w * v * t[:, None] ** 2 + torch.tanh(z * w) * 2 * t[:, None]
    assert torch.allclose(target, v - (t - r)[:, None] * dudt, atol=1e-5)


def test_one_step_sampling_with_the_exact_u_lands_on_the_data():
    z1 = torch.randn(4, 3)
    for steps in (1, 4):
        x = sample_meanflow(exact_u, z1, torch.linspace(1, 0, steps + 1))
        assert torch.allclose(x, X.expand(4, 3), atol=1e-5)


def test_time_sampling():
    r, t = sample_times(1000, np.random.default_rng(0))
    assert torch.all(r <= t) and torch.all((t > 0) & (t < 1))
    assert 0.65 < float((r == t).float().mean()) < 0.85
    with pytest.raises(ValueError, match="jvp"):
        meanflow_target(exact_u, *setup(), jvp="bogus")

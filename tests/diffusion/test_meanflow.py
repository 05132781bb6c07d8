"""MeanFlow target, loss and sampler on a flow with a known answer: all data at one point x, so
the marginal velocity is v(z, t) = (z - x) / t, trajectories are straight lines, and the exact
average velocity is u(z, r, t) = (z - x) / t for every r."""

import numpy as np
import pytest
import torch

from alaya.diffusion.meanflow import meanflow_loss, meanflow_target, sample_meanflow, sample_times
from alaya.nn.conditioning import smooth_time_derivative, timestep_embedding

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


def test_smooth_time_derivative_keeps_values_and_drops_only_fast_phases():
    t = torch.tensor([0.3, 0.7])
    ones = torch.ones_like(t)
    plain = timestep_embedding(t, 16)
    _, exact = torch.func.jvp(lambda tt: timestep_embedding(tt, 16), (t,), (ones,))
    with smooth_time_derivative(50.0):
        value, smooth = torch.func.jvp(lambda tt: timestep_embedding(tt, 16), (t,), (ones,))
    assert torch.equal(value, plain)                                  # values untouched
    omega = 1000 * torch.exp(-np.log(10000.0) * torch.arange(8) / 8)  # the embedding's frequencies
    slow = torch.cat([omega <= 50, omega <= 50])
    assert torch.allclose(smooth[:, slow], exact[:, slow]) and torch.all(smooth[:, ~slow] == 0)
    assert slow.any() and (~slow).any() and exact[:, ~slow].abs().max() > 100
    _, after = torch.func.jvp(lambda tt: timestep_embedding(tt, 16), (t,), (ones,))
    assert torch.equal(after, exact)                                  # the block's setting is undone
    with pytest.raises(ValueError, match="max_frequency"):
        with smooth_time_derivative(0.0):
            pass


def test_a_fast_time_wiggle_swamps_the_exact_target_and_not_the_smooth_one():
    """The exact average velocity plus a tiny wiggle carried by the embedding's fast features (as a
    trained network's t-dependence has): the wiggle's value is negligible, but its exact time
    derivative, scaled by up to 1000, is not; with the fast phases held constant the target is the
    true average velocity again."""
    z, r, t, v = setup()
    omega = 1000 * torch.exp(-np.log(10000.0) * torch.arange(96) / 96)
    fast = torch.cat([omega > 64, omega > 64]).float() * 1e-3

    def wiggly(z, r, t):
        return exact_u(z, r, t) + (timestep_embedding(t, 192) @ fast)[:, None]
    _, exact_target = meanflow_target(wiggly, z, r, t, v)
    with smooth_time_derivative(64.0):
        u, smooth_target = meanflow_target(wiggly, z, r, t, v)
    assert (u - v).abs().max() < 0.05                                 # the wiggle's value is small
    assert torch.allclose(smooth_target, v, atol=1e-5)
    assert (exact_target - v).abs().max() > 0.5                      # its derivative is not


def test_the_data_term_counts_only_where_r_equals_t():
    z, r, t, v = setup()
    r = torch.where(torch.arange(len(t)) % 2 == 0, t, r)              # half the samples at r = t
    far = v + 1.0                                                     # a data velocity off by 1 everywhere
    base = float(meanflow_loss(exact_u, z, r, t, v))
    with_data = float(meanflow_loss(exact_u, z, r, t, v, data_velocity=far, data_weight=2.0))
    assert base < 1e-5 and abs(with_data - 2.0 * 0.5) < 1e-4          # weight 2, half the samples, error 1
    with pytest.raises(ValueError, match="data_velocity"):
        meanflow_loss(exact_u, z, r, t, v, data_weight=1.0)


@pytest.mark.parametrize("steps", [1, 2, 3, 4, 7, 30])
def test_the_time_grid_is_linspace_bit_for_bit(steps):
    from alaya.diffusion.flow import time_grid
    assert torch.equal(time_grid(steps), torch.linspace(1.0, 0.0, steps + 1))


def test_the_step_is_the_meanflow_formula_bit_for_bit():
    from alaya.diffusion.meanflow import meanflow_step
    g = torch.Generator().manual_seed(3)
    z, u = torch.randn(2, 4, 5, 5, generator=g), torch.randn(2, 4, 5, 5, generator=g)
    t, r = torch.tensor(0.75), torch.tensor(0.5)
    assert torch.equal(meanflow_step(z, u, t, r), z - (t - r) * u)
    tb, rb = torch.rand(2, 1, 1, 1, generator=g), torch.rand(2, 1, 1, 1, generator=g)   # per sample
    assert torch.equal(meanflow_step(z, u, tb, rb), z - (tb - rb) * u)


@pytest.mark.parametrize("average", [True, False])
def test_integrated_steps_equal_the_loop_they_replace(average):
    """The loop the student, the backends and the ONNX graph each wrote out before (issue 31):
    r' = the next grid time for an average-velocity model, t otherwise."""
    from alaya.diffusion.meanflow import integrate_steps, step_times
    g = torch.Generator().manual_seed(4)
    w = torch.randn(3, 3, generator=g)

    def model(z, r, t):
        return torch.tanh(z @ w) * (1 + t) - r * z

    z0, ts = torch.randn(5, 3, generator=g), torch.linspace(1.0, 0.0, 5)
    z = z0
    for t, r in zip(ts[:-1], ts[1:]):
        z = z - (t - r) * model(z, r if average else t, t)
    assert torch.equal(integrate_steps(model, z0, ts, average), z)
    assert [(float(a), float(b), float(c)) for a, b, c in step_times(ts, average)] == [
        (float(r if average else t), float(t), float(r)) for t, r in zip(ts[:-1], ts[1:])]

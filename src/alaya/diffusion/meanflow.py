"""MeanFlow (Geng et al. 2025): a network ``u(z_t, r, t)`` for the *average* velocity over
[r, t], so that one step ``z_r = z_t - (t - r) u`` follows the flow exactly; few-step sampling
without a many-step ODE solve.

Identity: ``(t - r) u = ∫_r^t v dτ`` gives ``u = v - (t - r) du/dt`` with the total derivative
``du/dt = v·∂_z u + ∂_t u`` — a Jacobian-vector product with tangents (v, 0, 1) for (z, r, t).
Training regresses ``u_θ`` on ``u_tgt = v - (t - r) sg(du_θ/dt)``. With ``v`` the teacher's
(guided) velocity the student distils the teacher, guidance folded in.

``model(z, r, t) -> u`` everywhere below; extra conditioning goes through closures. A network
that embeds time with fast sinusoids (``timestep_embedding``: frequencies up to 1000 per unit t)
has an exact ``du/dt`` dominated by those features' wiggle, not by its trend over an interval;
call it under ``alaya.nn.conditioning.smooth_time_derivative`` inside the closure, as the Flash
student's stage does, so that the JVP (``jvp="exact"``; a finite difference is unaffected) leaves
the fast phases out — a smoothed derivative, not the exact one (docs/flash.md, "MeanFlow").
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

AverageVelocity = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def _b(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1, *([1] * (like.ndim - 1)))


def exact_target(model: AverageVelocity, z: torch.Tensor, r: torch.Tensor, t: torch.Tensor,
                 v: torch.Tensor) -> torch.Tensor:
    """u_tgt = v - (t - r) du/dt without gradient, ``du/dt`` by forward-mode AD (``torch.func.jvp``,
    tangents (v, 0, 1) for (z, r, t))."""
    def f(z_, t_):
        return model(z_, r, t_)
    with torch.no_grad():
        _, dudt = torch.func.jvp(f, (z, t), (v, torch.ones_like(t)))
    return (v - _b(t - r, z) * dudt).detach()


def adaptive_weight(err: torch.Tensor, p: float, c: float = 1e-3) -> torch.Tensor:
    """Per-sample errors with the paper's adaptive weight ``1 / sg(err + c)^p``."""
    return err / (err.detach() + c) ** p


def meanflow_target(model: AverageVelocity, z: torch.Tensor, r: torch.Tensor, t: torch.Tensor,
                    v: torch.Tensor, jvp: str = "exact", fd_eps: float = 1e-3
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """(u_θ(z, r, t) with gradient, u_tgt without). ``jvp="exact"`` uses forward-mode AD
    (``exact_target``); ``"fd"`` a forward finite difference (one extra no-grad call). Only
    use ``"fd"`` for networks smooth in t at the scale of ``fd_eps``: sinusoidal time
    embeddings with frequencies up to 1000 (``timestep_embedding``) turn a 1e-3 step into a
    full radian of phase, and the difference is then meaningless."""
    if jvp == "exact":
        target = exact_target(model, z, r, t, v)
        return model(z, r, t), target
    if jvp == "fd":
        u = model(z, r, t)
        with torch.no_grad():
            dudt = (model(z + fd_eps * v, r, t + fd_eps) - u.detach()) / fd_eps
    else:
        raise ValueError(f"jvp must be 'exact' or 'fd', got {jvp!r}")
    target = v - _b(t - r, z) * dudt
    return u, target.detach()


def meanflow_loss(model: AverageVelocity, z: torch.Tensor, r: torch.Tensor, t: torch.Tensor,
                  v: torch.Tensor, jvp: str = "exact", adaptive_p: float = 0.0,
                  adaptive_c: float = 1e-3, weight: torch.Tensor | None = None,
                  data_velocity: torch.Tensor | None = None, data_weight: float = 0.0) -> torch.Tensor:
    """Mean squared error to the MeanFlow target; ``adaptive_p > 0`` weights each sample by
    ``1 / sg(err + c)^p`` (the paper's adaptive loss); ``weight`` (B,) multiplies each sample's
    error (e.g. ``velocity_loss_weight``). ``data_velocity``: each sample's own straight-path
    velocity ``eps - x``; with ``data_weight > 0``, the samples with ``r = t`` also regress on it
    (flow matching on the data, whose regression target at r = t is the data's unguided marginal
    velocity, while ``v`` may be a guided teacher's; over an interval it is not the average
    velocity, so samples with r < t are left out). The data term is averaged over the whole
    batch (zeros where r < t), added after the adaptive weighting and before ``weight``."""
    u, target = meanflow_target(model, z, r, t, v, jvp)
    err = ((u.float() - target.float()) ** 2).flatten(1).mean(1)
    if adaptive_p > 0:
        err = adaptive_weight(err, adaptive_p, adaptive_c)
    if data_weight > 0:
        if data_velocity is None:
            raise ValueError("data_weight > 0 needs data_velocity")
        same = (r == t).float()
        err = err + data_weight * same * ((u.float() - data_velocity.float()) ** 2).flatten(1).mean(1)
    if weight is not None:
        err = err * weight
    return err.mean()


def sample_times(n: int, rng: np.random.Generator, equal_fraction: float = 0.75,
                 mean: float = -0.4, std: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(r, t) with r <= t from two logit-normal draws; r = t for ``equal_fraction`` of the batch
    (plain flow matching there)."""
    a = 1 / (1 + np.exp(-(rng.standard_normal(n) * std + mean)))
    b = 1 / (1 + np.exp(-(rng.standard_normal(n) * std + mean)))
    t, r = np.maximum(a, b), np.minimum(a, b)
    r = np.where(rng.random(n) < equal_fraction, t, r)
    return torch.from_numpy(r).float(), torch.from_numpy(t).float()


def meanflow_step(z: torch.Tensor, u: torch.Tensor, t: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """One step from time t to r: ``z_r = z_t - (t - r) u`` with ``u`` the average velocity over
    [r, t] (MeanFlow, Geng et al. 2025: its definition ``(t - r) u = ∫_r^t v dτ``); with ``u``
    the velocity at t, an Euler step. ``t`` and ``r`` broadcast against ``z``."""
    return z - (t - r) * u


def step_times(ts: torch.Tensor, average: bool = True) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(r', t, r) of each step on the grid ``ts`` (from 1 down to 0, ``flow.time_grid``): the step
    goes from t to r, and the model is asked for its velocity over [r', t] — r' = r for an
    ``average``-velocity model (MeanFlow), r' = t (the instantaneous velocity: Euler) otherwise."""
    return [(r if average else t, t, r) for t, r in zip(ts[:-1], ts[1:])]


def integrate_steps(model: AverageVelocity, z: torch.Tensor, ts: torch.Tensor, average: bool = True) -> torch.Tensor:
    """``z`` from ``ts[0]`` to ``ts[-1]`` by ``meanflow_step`` on the steps of ``step_times``;
    ``model(z, r', t)`` gets each step's times as 0-dim tensors. Differentiable."""
    for r_model, t, r in step_times(ts, average):
        z = meanflow_step(z, model(z, r_model, t), t, r)
    return z


@torch.no_grad()
def sample_meanflow(model: AverageVelocity, z: torch.Tensor, ts: torch.Tensor) -> torch.Tensor:
    """Few-step sampling on the grid ``ts`` (from 1 down to 0): ``z_r = z_t - (t - r) u(z_t, r, t)``,
    ``model`` called with (B,) times."""
    n = z.shape[0]
    return integrate_steps(lambda z_, r, t: model(z_, r.expand(n), t.expand(n)), z, ts)

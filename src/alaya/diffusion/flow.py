"""Rectified flow (Liu et al. 2022; Lipman et al. 2022): ``z_t = (1 - t) x + t eps``, velocity
``v = eps - x``; sampling integrates from t = 1 (noise) to t = 0 (data).

Every sampler has the k-diffusion-style signature ``sample_x(model, z, ts, cond=None,
guidance=1.0, callback=None)`` where ``model(z, t, cond) -> v`` and ``cond`` is a dict of
keyword arguments. Classifier-free guidance (Ho & Salimans 2022): when ``guidance != 1``,
``cond`` must hold ``uncond``, the kwargs for the unconditional call, and
``v = v_u + w (v_c - v_u)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

Model = Callable[..., torch.Tensor]


def logit_normal_t(n: int, generator: torch.Generator | None = None, mean: float = 0.0,
                   std: float = 1.0) -> torch.Tensor:
    """(n,) times in (0, 1) with logit(t) ~ N(mean, std) (SD3's training distribution)."""
    return torch.sigmoid(torch.randn(n, generator=generator) * std + mean)


def with_share_at_one(t: torch.Tensor, share: float, rng: np.random.Generator) -> torch.Tensor:
    """``t`` with about ``share`` of its entries set to exactly 1 (pure noise: the time a sampler
    starts from). Draws from ``rng`` only when ``share > 0``, so other draws stay unchanged."""
    if share <= 0:
        return t
    return torch.where(torch.from_numpy(rng.random(len(t)) < share), torch.ones_like(t), t)


def interpolate(x: torch.Tensor, eps: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """z_t = (1 - t) x + t eps, with t broadcast over all but the batch dimension."""
    t = t.reshape(-1, *([1] * (x.ndim - 1)))
    return (1 - t) * x + t * eps


def flow_matching_loss(model: Model, x: torch.Tensor, t: torch.Tensor, eps: torch.Tensor,
                       cond: dict | None = None) -> torch.Tensor:
    """Mean squared error between ``model(z_t, t, **cond)`` and the velocity ``eps - x``."""
    v = model(interpolate(x, eps, t), t, **(cond or {}))
    return ((v.float() - (eps - x).float()) ** 2).mean()


def edm_coefficients(t: torch.Tensor, sigma_data: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(c_in, c_skip, c_out) of EDM preconditioning (Karras et al. 2022) for ``z_t = (1 - t) x + t eps``
    with data std ``sigma_data``: ``x_hat = c_skip z + c_out F(c_in z)``. c_skip is the best linear
    guess of x from z, c_out the std of what is left, c_in makes the input unit-variance; so the
    network's target ``(x - c_skip z) / c_out`` has unit variance at every t."""
    s2 = sigma_data ** 2
    d = (1 - t) ** 2 * s2 + t ** 2
    return d.rsqrt(), (1 - t) * s2 / d, t * sigma_data * d.rsqrt()


def velocity_loss_weight(t: torch.Tensor, sigma_data: float) -> torch.Tensor:
    """Per-sample weight (t / c_out)^2 that turns a velocity error into the EDM-preconditioned
    network's error: for ``v = (z - x_hat) / t`` a velocity error e is an ``x_hat`` error t e, so
    this keeps a data-predicting model's loss bounded as t -> 0 (it tends to 1; 1/sigma_data^2 at
    t = 1). All ones when ``sigma_data`` is 0 (a plain velocity model)."""
    if sigma_data <= 0:
        return torch.ones_like(t)
    return (t / edm_coefficients(t, sigma_data)[2]) ** 2


def x_prediction_loss(predict_x: Model, x: torch.Tensor, t: torch.Tensor, eps: torch.Tensor,
                      sigma_data: float, cond: dict | None = None,
                      weight: torch.Tensor | None = None) -> torch.Tensor:
    """EDM-weighted data-prediction loss: mean ``((x_hat - x) / c_out)^2`` — the preconditioned
    network's error in its own unit-variance target space — optionally times a ``weight``
    broadcast over x (e.g. per latent channel)."""
    x_hat = predict_x(interpolate(x, eps, t), t, **(cond or {}))
    c_out = edm_coefficients(t, sigma_data)[2].reshape(-1, *([1] * (x.ndim - 1)))
    err = ((x_hat.float() - x.float()) / c_out) ** 2
    return (err * weight).mean() if weight is not None else err.mean()


def time_grid(steps: int, shift: float = 1.0) -> torch.Tensor:
    """steps + 1 times from 1 to 0, evenly spaced (every sampler's grid: the teacher's, the
    student's and the world model's, in torch and in the ONNX graphs); ``shift > 1`` spends more
    steps at high noise (SD3). ``shift = 1`` gives ``linspace(1, 0, steps + 1)`` bit for bit."""
    t = torch.linspace(1.0, 0.0, steps + 1)
    return shift * t / (1 + (shift - 1) * t)


def guided_velocity(model: Model, z: torch.Tensor, t: torch.Tensor, cond: dict | None,
                    guidance: float) -> torch.Tensor:
    cond = dict(cond or {})
    uncond = cond.pop("uncond", None)
    v = model(z, t, **cond)
    if guidance == 1.0:
        return v
    if uncond is None:
        raise ValueError("guidance != 1 needs cond['uncond'], the unconditional kwargs")
    v_u = model(z, t, **uncond)
    return v_u + guidance * (v - v_u)


@torch.no_grad()
def sample_euler(model: Model, z: torch.Tensor, ts: torch.Tensor, cond: dict | None = None,
                 guidance: float = 1.0, callback: Callable | None = None) -> torch.Tensor:
    """Euler integration of dz/dt = v from ts[0] to ts[-1]."""
    for i in range(len(ts) - 1):
        t = ts[i].expand(z.shape[0])
        v = guided_velocity(model, z, t, cond, guidance)
        z = z + (ts[i + 1] - ts[i]) * v
        if callback is not None:
            callback(i, z)
    return z


@torch.no_grad()
def sample_heun(model: Model, z: torch.Tensor, ts: torch.Tensor, cond: dict | None = None,
                guidance: float = 1.0, callback: Callable | None = None) -> torch.Tensor:
    """Heun's second-order method (Karras et al. 2022, Alg. 1), Euler on the last step to t=0."""
    for i in range(len(ts) - 1):
        t0, t1 = ts[i], ts[i + 1]
        v0 = guided_velocity(model, z, t0.expand(z.shape[0]), cond, guidance)
        z_next = z + (t1 - t0) * v0
        if t1 > 0:
            v1 = guided_velocity(model, z_next, t1.expand(z.shape[0]), cond, guidance)
            z_next = z + (t1 - t0) * 0.5 * (v0 + v1)
        z = z_next
        if callback is not None:
            callback(i, z)
    return z

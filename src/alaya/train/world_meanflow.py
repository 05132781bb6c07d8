"""MeanFlow for a memory world model (``WorldTrainConfig.meanflow_share``; Geng et al. 2025,
``alaya.diffusion.meanflow``).

Flow matching at t = 1, the only time a 1-step sampler asks about, is a regression: where the
memory is empty its answer is the mean of what could be there, which play draws out into soft
streaks. An average-velocity model ``u(z, r, t)`` is asked instead for the mean velocity over
[r, t], so that one step from t = 1 to r = 0 lands where the whole flow would: a sample, not the
mean, at the cost of one network call, as before.

On a share of the samples the pair (r, t) is an interval: half of them the play step (0, 1), the
rest with t in [``MIN_T``, 1]; their target is MeanFlow's,
``(eps - x) - (t - r) du/dt``, with ``du/dt`` the model's own change along the sample's straight
path (a Jacobian-vector product, no gradient), taken with the time embedding's fast phases held
(``smooth_time_derivative``, as the Flash student's MeanFlow stage does). Every other sample keeps
r = t and the flow-matching target. The interval samples' errors are heavy-tailed (a du/dt near
t = 0 is large; unweighted, single steps reached 40x the flow loss and a gradient norm of 74), so
each counts by MeanFlow's adaptive weight (``adaptive_weighted``: its error over the error itself,
without gradient, plus ``ADAPTIVE_C``), as the paper trains.
"""

from __future__ import annotations

import numpy as np
import torch

from alaya.diffusion.meanflow import adaptive_weight, exact_target
from alaya.nn.conditioning import smooth_time_derivative

PLAY_SHARE = 0.5        # of the interval samples: the play step (r, t) = (0, 1) itself
ADAPTIVE_C = 1e-3       # adaptive_weighted's floor
MIN_T = 0.3             # the other interval samples: t uniform in [MIN_T, 1], r uniform in [0, t)


def adaptive_weighted(error: torch.Tensor, c: float = ADAPTIVE_C) -> torch.Tensor:
    """Per-sample errors (n,) with MeanFlow's adaptive weight at power 1 (``meanflow.adaptive_weight``):
    ``error / sg(error + c)``, whose gradient is the error's divided by its size, so no sample
    outweighs the batch."""
    return adaptive_weight(error, 1.0, c)


def meanflow_times(t: torch.Tensor, share: float, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(r, t) from flow-matching times ``t`` (B,): r = t except on about ``share`` of the samples,
    which get an interval: (0, 1) on ``PLAY_SHARE`` of them, else t uniform in [``MIN_T``, 1] and
    r uniform in [0, t) (near t = 0 the EDM-preconditioned velocity's du/dt is large: single
    samples' errors reached 250x the flow loss's). Draws from ``rng`` only when ``share > 0``."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"meanflow_share must be in [0, 1], got {share}")
    if share <= 0:
        return t, t
    B = len(t)
    pick = torch.from_numpy(rng.random(B) < share)
    play = pick & torch.from_numpy(rng.random(B) < PLAY_SHARE)
    t_draw = torch.from_numpy(rng.uniform(MIN_T, 1.0, B)).float()
    r_draw = t_draw * torch.from_numpy(rng.random(B)).float()
    r = torch.where(play, torch.zeros_like(t), torch.where(pick, r_draw, t))
    t = torch.where(play, torch.ones_like(t), torch.where(pick, t_draw, t))
    return r, t


def meanflow_target(world, z: torch.Tensor, r: torch.Tensor, t: torch.Tensor, velocity: torch.Tensor,
                    condition: tuple, max_frequency: float | None) -> torch.Tensor:
    """MeanFlow's regression target ``velocity - (t - r) du/dt`` (no gradient; ``meanflow.exact_target``)
    for a world model's samples ``z`` (n, C, h, w) at times ``r`` < ``t`` (n,), moving along their straight paths with
    ``velocity`` (eps - x); ``condition``: the model's other inputs after ``t`` (memory, context,
    validity, style, actions, noise level), for these samples."""
    def average(z_, r_, t_):
        with smooth_time_derivative(max_frequency):
            return world(z_, t_, *condition, r=r_)
    return exact_target(average, z, r, t, velocity).float()

"""The latent world model's loss (``alaya train world`` without ``--memory``): next-frame flow
matching on recorded gameplay.

Every gameplay episode is encoded once by the RGB autoencoder (a latent cache beside the data,
keyed by the codec's hash). A training sample is one frame n of one episode in one style:

* target: frame n's latents, trained by flow matching with the EDM-preconditioned data
  prediction of the streaming core (loss weighted per latent channel by its pixel-space gain);
* anchor: an earlier frame of the same episode (the session's first frame at play time, so
  anything from a moment to thousands of frames ago), or frame n-1's... context at the start;
* context: frames n-1 ... n-K, invalid before the episode's start, corrupted by Gaussian noise
  of a random level the model is told (noise augmentation); on part of the samples the same
  noise in every context frame, like the errors a long rollout carries from frame to frame;
* self-rollout (``rollout > 0``, a later stage): with probability ``rollout_prob`` the newest
  ``rollout`` context frames are the model's own few-step predictions (no gradient) from the
  real frames before them, so it learns to continue from what it generates, not only from
  ground truth;
* error recycling (``error_prob``): on part of the samples the context instead carries the
  model's own errors from free rollouts (``ErrorBank``), told the play-time noise level;
* standing still (``still_prob``): recorded players rarely stand still, but a still view is
  where nothing resamples the picture and the model's errors add up; on part of the samples
  (and of the bank's rollouts) the player stands: no action rows, and the context and the target
  are the same recorded frame (the world's moving bodies aside);
* actions: rows n, n-1, ... ; style: an augmented embedding of one of the style's phrasings;
* with ``view_warp`` the (noised) context is first rotated into frame n's view by its turn and
  pitch rows (``WorldModel.align``; with ``ground_warp`` also moved by their walk, from the
  recorded camera pitch), and the residual is taken from that warped frame.

The episodes in memory and the lookups a sample is built from are in ``alaya.train.world_data``.
"""

from __future__ import annotations

import numpy as np
import torch

from alaya.diffusion.flow import interpolate, velocity_loss_weight
from alaya.models.student import push_context
from alaya.models.world import WorldModel
from alaya.train.teacher import augment_prompt
from alaya.train.world_config import WorldTrainConfig
from alaya.train.world_data import (LatentEpisodes, action_rows, add_context_noise, anchor_poses, frame_pitch,
                                    real_context, training_times)


def draw_batch(data: LatentEpisodes, cfg: WorldTrainConfig, rng: np.random.Generator, e, st, T: int):
    """Target frames, anchors, clean context (B, K, ...), validity, action rows, style vectors,
    frame indices and anchor frame indices for episodes ``e`` in styles ``st``."""
    m = cfg.model
    B = len(e)
    K, A = m.context, m.action_history
    start = rng.random(B) < cfg.start_fraction
    n = np.where(start, rng.integers(1, K + 1, size=B), rng.integers(1, T, size=B))
    recent = rng.random(B) < cfg.recent_anchor
    anchor_idx = np.where(recent, np.maximum(n - rng.integers(1, 33, size=B), 0),
                          (rng.random(B) * n).astype(int))
    anchor_idx = np.where(start, 0, anchor_idx)
    x = data.latent(e, st, n)
    anchor = data.latent(e, st, anchor_idx)
    ctx, valid = real_context(data, e, st, n - 1, K)
    rows = action_rows(data, e, n, A)
    style = torch.stack([augment_prompt(data.phrasings[k], rng, cfg.text_noise) for k in st])
    return x, anchor, ctx, valid, rows, style, n, anchor_idx


def stand_still(data: LatentEpisodes, cfg: WorldTrainConfig, rng: np.random.Generator, e, st, n, x, ctx, valid,
                rows):
    """On ``cfg.still_prob`` of the samples the player stands still: the recorded frame n-1 as the
    target and as every context frame, no action rows. Returns (x, ctx, valid, rows, the frame
    whose camera pitch applies)."""
    if cfg.still_prob <= 0:
        return x, ctx, valid, rows, n
    still = rng.random(len(e)) < cfg.still_prob
    if not still.any():
        return x, ctx, valid, rows, n
    frame = data.latent(e[still], st[still], n[still] - 1)
    b = torch.from_numpy(still)
    x, ctx, valid, rows = x.clone(), ctx.clone(), valid.clone(), rows.clone()
    x[b] = frame
    ctx[b] = frame[:, None].expand(-1, ctx.shape[1], -1, -1, -1)
    valid[b] = 1.0
    rows[b] = 0.0
    return x, ctx, valid, rows, np.where(still, n - 1, n)


@torch.no_grad()
def self_rollout(model: WorldModel, data: LatentEpisodes, cfg: WorldTrainConfig, rng, e, st, n,
                 ctx: torch.Tensor, valid: torch.Tensor, anchor: torch.Tensor, style: torch.Tensor,
                 anchor_idx=None):
    """Replace the newest ``cfg.rollout`` context frames by the model's own predictions, each
    generated from the (real, then generated) frames before it."""
    m = cfg.model
    B, K = ctx.shape[:2]
    r = min(cfg.rollout, K)
    g_ctx, g_valid = real_context(data, e, st, n - r - 1, K)    # the oldest generated frame's context
    was_training = model.training
    model.eval()
    for j in range(r, 0, -1):                                   # generate frame n - j
        f = n - j
        rows = action_rows(data, e, f, m.action_history)
        level = torch.full((B,), m.play_context_noise)    # as at play: told, not added (WorldSession)
        z = torch.from_numpy(rng.standard_normal((B, *ctx.shape[2:]))).float()
        out = model.sample(z, anchor, g_ctx, g_valid, style, rows, level, steps=cfg.rollout_steps, stabilize=True,
                           pitch=frame_pitch(data, e, f), poses=anchor_poses(data, m, e, anchor_idx, f))
        real = data.latent(e, st, np.maximum(f, 0))
        out = torch.where(torch.from_numpy(f >= 1).view(B, 1, 1, 1), out, real)   # frame 0 stays real
        g_ctx, g_valid = push_context(g_ctx, g_valid, out)
        g_valid[torch.from_numpy(f < 0), 0] = 0
    model.train(was_training)
    return g_ctx, g_valid


def free_rollout_starts(data: LatentEpisodes, cfg: WorldTrainConfig, rng: np.random.Generator, size: int,
                        horizon: int, still_prob: float | None = None):
    """Episodes, styles, first generated frames n0 and standing-still flags (share ``still_prob``,
    by default ``cfg.still_prob``) of ``size`` free rollouts of ``horizon`` frames (fewer if the
    episodes are short: the number is returned last), each with a full recorded context before it."""
    episodes, styles, T = data.shape
    K = cfg.model.context
    H = min(horizon, T - K - 1)
    if H < 1:
        raise ValueError(f"free rollouts need episodes longer than context + 1 = {K + 1} frames, got {T}")
    e, st = rng.integers(episodes, size=size), rng.integers(styles, size=size)
    n0 = rng.integers(K, T - H + 1, size=size)
    p = cfg.still_prob if still_prob is None else still_prob
    still = torch.from_numpy(rng.random(size) < p if p > 0 else np.zeros(size, bool))
    return e, st, n0, still, H


def play_along(generate, data: LatentEpisodes, cfg: WorldTrainConfig, rng: np.random.Generator, e, st, n0,
               frames: int, still: torch.Tensor):
    """A free rollout as ``WorldSession`` plays it, along recorded episodes ``e`` in styles ``st``:
    the recorded context up to frame n0 - 1 (its newest frame is also the anchor, as a session's
    start frame), then ``frames`` frames generated with the recorded actions, each from the
    generated ones before it, told the play-time noise level. Chains flagged ``still`` stand still
    from frame n0 - 1 (no action; that frame is their target). Yields (generated latents, target)
    per frame; ``generate`` is ``WorldModel.sample`` or, to train through the chain, ``generate``."""
    m = cfg.model
    ctx, valid = real_context(data, e, st, n0 - 1, m.context)
    first = ctx[:, 0]
    style = torch.stack([augment_prompt(data.phrasings[k], rng, cfg.text_noise) for k in st])
    level = torch.full((len(e),), m.play_context_noise)
    for h in range(frames):
        f = n0 + h
        rows = action_rows(data, e, f, m.action_history) * ~still.view(-1, 1, 1)
        z = torch.from_numpy(rng.standard_normal(first.shape)).float()
        seen_from = np.where(still.numpy(), n0 - 1, f)
        out = generate(z, first, ctx, valid, style, rows, level, steps=m.steps, stabilize=True,
                       pitch=frame_pitch(data, e, seen_from), poses=anchor_poses(data, m, e, n0 - 1, seen_from))
        yield out, torch.where(still.view(-1, 1, 1, 1), first, data.latent(e, st, f))
        ctx, valid = push_context(ctx, valid, out)


def unroll_loss(model: WorldModel, data: LatentEpisodes, cfg: WorldTrainConfig, weights: torch.Tensor, index: int,
                seed: int) -> torch.Tensor:
    """The play-time sampler unrolled over ``cfg.unroll`` frames, with gradient through every
    generated frame and every context it feeds (backpropagation through the rollout): the error
    of each frame against the recorded one, weighted as the flow loss weighs the one-step time
    t = 1 (``velocity_loss_weight``), averaged over the frames. A per-frame bias too small to see
    in one step (a slight blur when nothing moves) adds up over the chain, so here it is trained
    away; the flow loss alone only ever sees one step from a given context."""
    rng = np.random.default_rng([seed, index, 11])
    e, st, n0, still, frames = free_rollout_starts(data, cfg, rng, cfg.unroll_batch, cfg.unroll,
                                                   cfg.unroll_still_prob)
    w = weights.view(1, -1, 1, 1) * velocity_loss_weight(torch.ones(()), cfg.model.sigma_data)
    errors = [((out - target) ** 2 * w).mean()
              for out, target in play_along(model.generate, data, cfg, rng, e, st, n0, frames, still)]
    return torch.stack(errors).mean()


class ErrorBank:
    """The model's own errors, for error recycling (after Stable Video Infinity's error-recycling
    fine-tuning): free rollouts along recorded episodes, with the recorded actions, from real
    context; ``errors`` (R, H, C, h, w) float16 is generated minus recorded latents at rollout
    frames 1..H. A training context that draws from it carries the errors of the 3 most recent
    generated frames of a rollout at a random horizon — the drift and the noise a long play
    session builds up — and is trained to give the recorded next frame, so the model learns to
    repair what it really gets wrong (Gaussian context noise alone does not look like that: its
    own accumulated noise passed through untouched)."""

    def __init__(self):
        self.errors: torch.Tensor | None = None
        self.calls = 0                   # training steps since the process started (refresh clock)

    @torch.no_grad()
    def refresh(self, model: WorldModel, data: LatentEpisodes, cfg: WorldTrainConfig, rng: np.random.Generator):
        was_training = model.training
        model.eval()
        e, st, n0, still, H = free_rollout_starts(data, cfg, rng, cfg.error_rollouts, cfg.error_horizon)
        self.errors = torch.stack([(out - target).half() for out, target in
                                   play_along(model.sample, data, cfg, rng, e, st, n0, H, still)], 1)
        model.train(was_training)

    def draw(self, size: int, context: int, rng: np.random.Generator) -> torch.Tensor:
        """(size, context, C, h, w): the errors of the newest ``context`` generated frames (newest
        first; zero where the rollout had not started) at a random rollout and horizon."""
        R, H = self.errors.shape[:2]
        r, j = rng.integers(R, size=size), rng.integers(H, size=size)
        out = torch.zeros(size, context, *self.errors.shape[2:])
        for k in range(context):
            ok = torch.from_numpy(j - k >= 0)
            out[:, k] = torch.where(ok.view(-1, 1, 1, 1), self.errors[r, np.maximum(j - k, 0)].float(), 0.0)
        return out


def world_loss(model, data: LatentEpisodes, cfg: WorldTrainConfig, weights: torch.Tensor, index: int,
               batch_size: int, seed: int, rollout: bool = True, bank: ErrorBank | None = None
               ) -> tuple[torch.Tensor, dict]:
    rng, e, st, T = data.sample(batch_size, seed, index, cfg.text_noise)
    x, anchor, ctx, valid, rows, style, n, anchor_idx = draw_batch(data, cfg, rng, e, st, T)
    core = model.module if hasattr(model, "module") else model
    used_rollout = rollout and cfg.rollout > 0 and rng.random() < cfg.rollout_prob
    if used_rollout:
        ctx, valid = self_rollout(core, data, cfg, rng, e, st, n, ctx, valid, anchor, style, anchor_idx)
    x, ctx, valid, rows, pitched = stand_still(data, cfg, rng, e, st, n, x, ctx, valid, rows)
    noisy, level = add_context_noise(ctx, valid, cfg, rng)
    recycled = torch.zeros(x.shape[0], dtype=torch.bool)
    if bank is not None and bank.errors is not None:             # error recycling, told the play level
        recycled = torch.from_numpy(rng.random(x.shape[0]) < cfg.error_prob)
        errors = bank.draw(x.shape[0], ctx.shape[1], rng)
        noisy = torch.where(recycled.view(-1, 1, 1, 1, 1), (ctx + errors) * valid, noisy)
        level = torch.where(recycled, torch.full_like(level, cfg.model.play_context_noise), level)
    B = x.shape[0]
    t = training_times(B, cfg, rng)
    eps = torch.from_numpy(rng.standard_normal(x.shape)).float()
    noisy, valid = core.align(noisy, valid, rows, frame_pitch(data, e, pitched))   # view_warp: seen from frame n
    poses = anchor_poses(data, cfg.model, e, anchor_idx, pitched)
    if poses is not None:                        # anchor_warp: so is the anchor, filled in by the newest frame
        anchor = core.align_anchor(anchor, noisy[:, 0], *poses, frame_pitch(data, e, pitched))
    if cfg.model.residual:                       # the change from the newest context frame as it is given,
        x = x - noisy[:, 0]                      # noise included: the model learns to remove that noise
    v = model(interpolate(x, eps, t), t, anchor, noisy, valid, style, rows, level)
    err = (v.float() - (eps - x)) ** 2 * weights.view(1, -1, 1, 1)
    per = err.mean((1, 2, 3)) * velocity_loss_weight(t, cfg.model.sigma_data)
    logs = {"rollout": float(used_rollout), "recycled": float(recycled.float().mean())}
    loss = per.mean()
    if rollout and cfg.unroll > 0:          # through the core: the wrapper's forward above already
        unrolled = unroll_loss(core, data, cfg, weights, index, seed)   # readied DDP's gradient hooks
        logs["flow"], logs["unroll"] = loss.item(), unrolled.item()
        loss = loss + cfg.unroll_weight * unrolled
    return loss, logs

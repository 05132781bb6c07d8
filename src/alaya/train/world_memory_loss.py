"""The training sample and loss of a memory-conditioned world model (``WorldModelConfig.memory``).

One frame n of one recorded episode, in a style with cached memory renders (``world_memory``):

* memory: the rolling render at frame n's recorded camera of the memory holding the true frames
  0 ... n-1 (their true depth), as rgb | coverage | disparity (``memory_latent``); its colour gets
  the context's noise level (halved: image units) where covered, so the model learns to repair a
  memory filled with imperfect frames;
* context: frames n-1 ... n-K as RGB-D (true depth), noised as the plain model's are (``world_data.add_context_noise``)
  (level told), warped into frame n's view by the actions (``align``);
* target: frame n's rgb, its true disparity, and the gate "the memory is right here"
  (``gate_target``); the model generates the change from ``memory_base`` (the memory where it
  covers, the newest context frame elsewhere) by flow matching, all three channels at once;
* standing still (``still_prob``): target, context and memory are frame n-1 (memory: that frame
  where it has geometry, and its sky as a backdrop when the model stores one, as a session's
  memory is once it stood a frame), no actions, gate 1 where covered;
* degraded memory (``memory_degrade``): in play the memory's newest parts are the model's own
  frames (inserted where the memory had holes: at the side a turn or a strafe uncovers, at the
  floor a walk uncovers), blurred by the one-step mean, misplaced by guessed depth and pinholed;
  the true frames of the rolling renders never look like that. On this share of the samples a
  band of the memory at a random side (10-45% of the view) is made so (``degrade_memory``); the
  gate's target there is then 0 wherever it is wrong, so the model learns to repair it instead
  of keeping it;
* self-rollout (``memory_rollout``, on ``memory_rollout_prob`` of the steps, instead of the
  above): the memory and context hold the model's own frames, generated as play generates them
  (``alaya.train.world_memory_rollout``);
* novelty (``novelty_weight``): the loss counts more where the frame is not the memory's render
  (``novelty_weights``), so the holes and the one-shot actions' effects are not outweighed by the
  ~98% of the view the memory already shows;
* spectrum (``spectrum_weight``): on the samples at t = 1 (``one_step_t``), the frame play would
  show (``world_critic.one_step_frames``) must have the true frame's patch amplitude spectra (of
  luminance) where
  the memory does not show it (``spectrum_loss``): detail of the game's kind there, not the mean;
* MeanFlow (``meanflow_share``, an ``average_velocity`` model): on that share of the samples the
  model is asked for the average velocity over an interval [r, t], half of them the play step
  [0, 1], with MeanFlow's target (``alaya.train.world_meanflow``): one step then lands on a sample,
  not on the mean; the spectrum loss and the critic then judge the samples at (0, 1);
* lagged memory (``memory_lag_prob``, renders ``memory_lag`` frames behind: ``rolling_renders``):
  in play, where the model keeps what the memory shows, nothing new goes into the memory, so the
  floor a walk comes up to is shown magnified from where it was seen far away, and what the last
  frames uncovered are holes; the rolling renders, refreshed by the true frame before, never look
  like that. On this share of the samples the memory holds frames 0 ... n-L only, and the context
  frames are such renders too (the true frame where they do not cover), as a session's own frames
  are: the target is still the true frame, so the model learns to bring detail to what the memory
  shows magnified, and the gate to let it replace the memory there;
* reset (``reset_prob``): what a session does with its start frame: an empty memory, one context
  frame with unknown depth (disparity 0), no actions; the target is that frame with its depth, so
  the model learns to predict a start frame's depth.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from alaya.diffusion.flow import interpolate, velocity_loss_weight
from alaya.models.memory_conditioning import (as_context, frame_as_memory, frame_image, gate_target, memory_latent,
                                              shown_render, to_latent)
from alaya.train.spectrum_loss import luminance, patch_spectrum_loss
from alaya.train.teacher import augment_prompt
from alaya.train.world_critic import adversarial_losses, critic_of, one_step_frames, world_of
from alaya.train.world_data import (LatentEpisodes, action_rows, add_context_noise, draw_frames, frame_pitch,
                                    training_times)
from alaya.train.world_meanflow import adaptive_weighted, meanflow_target, meanflow_times
from alaya.train.world_memory import MemoryEpisodes
from alaya.train.world_memory_rollout import rollout_batch


def channel_weights(cfg) -> torch.Tensor:
    """(80,) per-channel loss weights: rgb 1, disparity ``depth_weight``, gate ``gate_weight``."""
    return torch.cat([torch.ones(48), torch.full((16,), cfg.depth_weight), torch.full((16,), cfg.gate_weight)])


def novelty_weights(gate: torch.Tensor, weight: float, factor: int = 4) -> torch.Tensor:
    """(B, 1, H / factor, W / factor) per-latent-pixel loss weights from the gate target ``gate``
    (B, 1, H, W) (1 where the memory's render is the frame): 1 + ``weight`` where it is not (the
    holes the model must fill, an action's blade or orb), averaged over each latent pixel's patch,
    then scaled so each frame's weights average 1. A frame is mostly the memory, which is easy to
    keep; its new content, the hard part, would otherwise count for ~2% of the loss. ``weight`` 0:
    all ones."""
    if weight < 0:
        raise ValueError(f"novelty weight must be >= 0, got {weight}")
    w = F.avg_pool2d(1 + weight * (1 - gate.float().clamp(0, 1)), factor)
    return w / w.mean((1, 2, 3), keepdim=True)


def memory_batch(data: LatentEpisodes, mem: MemoryEpisodes, cfg, rng: np.random.Generator, e, st, T: int):
    """(target image (B, 5, H, W), context (B, K, 80, h, w), valid, rows, style, memory rgb,
    coverage, depth (B, ., H, W), the frame whose pitch applies)."""
    m = cfg.model
    B, K = len(e), m.context
    start = rng.random(B) < cfg.start_fraction
    n = np.where(start, rng.integers(1, K + 1, size=B), draw_frames(data, rng, e, 1, T, cfg.action_focus,
                                                                    cfg.action_focus_span))
    still = rng.random(B) < cfg.still_prob
    reset = ~still & (rng.random(B) < cfg.reset_prob)
    fixed = still | reset
    rows = action_rows(data, e, n, m.action_history) * torch.from_numpy(~fixed).view(B, 1, 1).float()
    style = torch.stack([augment_prompt(data.phrasings[k], rng, cfg.text_noise) for k in st])
    lag = None                             # a memory (and context) that the last frames added nothing to
    if cfg.memory_lag_prob > 0 and mem.lagged is not None:
        lag = ~fixed & (rng.random(B) < cfg.memory_lag_prob)
    ctx, valid = mem.context(data, e, st, n, K, lag)
    target = np.where(fixed, n - 1, n)
    rgb, depth = mem.frame(data, e, st, target)
    mrgb, mcov, mdepth = shown_render(*mem.memory(e, st, n, lag), m)    # as play shows it
    if fixed.any():
        b = torch.from_numpy(fixed)
        prev = to_latent(frame_image(rgb[b], depth[b]))
        ctx[b] = prev[:, None].expand(-1, K, -1, -1, -1)
        valid[b] = 1.0
        mrgb[b], mcov[b], mdepth[b] = frame_as_memory(rgb[b], depth[b], m.memory_sky_depth)   # as play shows it
    if reset.any():
        b = torch.from_numpy(reset)
        unknown = to_latent(frame_image(rgb[b]))                  # depth unknown: disparity 0
        ctx[b] = torch.cat([unknown[:, None], torch.zeros_like(ctx[b][:, 1:])], 1)
        valid[b] = torch.cat([torch.ones_like(valid[b][:, :1]), torch.zeros_like(valid[b][:, 1:])], 1)
        mrgb[b], mcov[b], mdepth[b] = 0.0, 0.0, 0.0
    return rgb, depth, ctx, valid, rows, style, (mrgb, mcov, mdepth), target


def degrade_memory(rgb: torch.Tensor, cov: torch.Tensor, depth: torch.Tensor, rng: np.random.Generator,
                   which: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The memory renders (B, 3 | 1 | 1, H, W) with, for the samples ``which`` (B,) bool, a band at
    a random side (10-45% of the view) replaced by what play's memory holds there: the render
    blurred (5x5 box, the one-step mean's softness), shifted by up to 3 pixels each way (depth
    guessed wrong), its colour scaled by 0.85-1.15 per channel, and a fifth to a half of its
    pixels uncovered (pinholes). Pure: new tensors."""
    rgb, cov, depth = rgb.clone(), cov.clone(), depth.clone()
    B, _, H, W = rgb.shape
    for b in np.nonzero(which)[0]:
        side, frac = int(rng.integers(4)), float(rng.uniform(0.10, 0.45))
        band = torch.zeros(H, W, dtype=torch.bool)
        n = max(1, int(round(frac * (W if side < 2 else H))))
        if side == 0:
            band[:, :n] = True
        elif side == 1:
            band[:, W - n:] = True
        elif side == 2:
            band[H - n:] = True
        else:
            band[:n] = True
        dx, dy = (int(v) for v in rng.integers(-3, 4, size=2))
        soft = F.avg_pool2d(F.pad(rgb[b:b + 1], (2, 2, 2, 2), mode="replicate"), 5, stride=1)[0]
        soft = torch.roll(soft, (dy, dx), (1, 2)) * torch.from_numpy(rng.uniform(0.85, 1.15, (3, 1, 1))).float()
        keep = torch.from_numpy(rng.random((H, W)) >= rng.uniform(0.2, 0.5))
        region = band & (cov[b, 0] > 0.5)
        rgb[b][:, region] = soft.clamp(0, 1)[:, region]
        holes = region & ~keep
        cov[b, 0][holes], depth[b, 0][holes] = 0.0, 0.0
        rgb[b][:, holes] = 0.0
    return rgb, cov, depth


def memory_world_loss(model, data: LatentEpisodes, mem: MemoryEpisodes, cfg, weights: torch.Tensor, index: int,
                      batch_size: int, seed: int) -> tuple[torch.Tensor, dict]:
    """Flow matching of frame n's RGB-D and gate given the memory, as the module docstring says."""
    rng = np.random.default_rng([seed, index])
    n_ep, _, T = data.shape
    e = rng.integers(n_ep, size=batch_size)
    st = rng.integers(mem.renders.styles, size=batch_size)
    core = world_of(model)
    rollout = cfg.memory_rollout > 0 and rng.random() < cfg.memory_rollout_prob
    if rollout:
        style = torch.stack([augment_prompt(data.phrasings[k], rng, cfg.text_noise) for k in st])
        batch = rollout_batch(core, data, mem, cfg, rng, e, st, style, T, int(rng.integers(1, cfg.memory_rollout + 1)))
    else:
        batch = memory_batch(data, mem, cfg, rng, e, st, T)
    rgb, depth, ctx, valid, rows, style, (mrgb, mcov, mdepth), target = batch
    if cfg.memory_degrade > 0 and not rollout:
        mrgb, mcov, mdepth = degrade_memory(mrgb, mcov, mdepth, rng, rng.random(len(e)) < cfg.memory_degrade)
    B = len(e)
    gate = gate_target(mrgb, mcov, rgb, cfg.gate_tolerance)
    x = to_latent(frame_image(rgb, depth, gate))
    noisy, level = add_context_noise(ctx, valid, cfg, rng)
    noisy = torch.stack([as_context(noisy[:, k]) for k in range(noisy.shape[1])], 1)   # a context carries no gate
    eps_m = torch.from_numpy(rng.standard_normal(mrgb.shape)).float()
    mrgb = ((mrgb + 0.5 * level.view(B, 1, 1, 1) * eps_m).clamp(0, 1)) * mcov
    memory = memory_latent(mrgb, mcov, mdepth)
    noisy, valid = core.align(noisy, valid, rows, frame_pitch(data, e, target))
    x = x - core.base(noisy[:, 0], memory)
    r, t = meanflow_times(training_times(B, cfg, rng), cfg.meanflow_share, rng)
    eps = torch.from_numpy(rng.standard_normal(x.shape)).float()
    z = interpolate(x, eps, t)
    v = model(z, t, memory, noisy, valid, style, rows, level, r=r)
    target, interval = eps - x, r < t
    if interval.any():                            # MeanFlow: the average velocity over [r, t]
        i = interval
        target = target.clone()
        target[i] = meanflow_target(core, z[i], r[i], t[i], target[i],
                                    (memory[i], noisy[i], valid[i], style[i], rows[i], level[i]),
                                    cfg.meanflow_max_frequency)
    err = (v.float() - target) ** 2 * weights.view(1, -1, 1, 1)
    if cfg.novelty_weight > 0:
        err = err * novelty_weights(gate, cfg.novelty_weight)
    per_sample = err.mean((1, 2, 3)) * velocity_loss_weight(t, cfg.model.sigma_data)
    logs = {"coverage": float(mcov.mean()), "gate": float(gate.mean())}
    if interval.any():       # MeanFlow's targets are heavy-tailed: each interval sample's error normalized
        logs.update(meanflow=float(per_sample[interval].mean().detach()))
        per_sample = torch.where(interval, adaptive_weighted(per_sample), per_sample)
    loss = per_sample.mean()
    critic, one = critic_of(model), (t >= 1.0) & ((r <= 0.0) if core.config.average_velocity else (r >= 1.0))
    if cfg.spectrum_weight > 0 and one.any():     # the 1-step frames' detail where the memory does not show them
        fake = one_step_frames(core, eps[one], v[one].float(), noisy[one][:, 0], memory[one])
        spectrum = patch_spectrum_loss(luminance(fake), luminance(rgb[one]), (gate[one] < 0.5).float(),
                                       cfg.spectrum_patch)
        logs.update(spectrum=float(spectrum.detach()))
        loss = loss + cfg.spectrum_weight * spectrum
    if critic is not None and one.any():          # the 1-step frames against the game's (world_critic)
        fake = one_step_frames(core, eps[one], v[one].float(), noisy[one][:, 0], memory[one])
        critic_loss, generator_loss = adversarial_losses(critic, fake, rgb[one], mrgb[one], mcov[one])
        weight = cfg.adversarial_weight if index >= cfg.adversarial_start else 0.0
        logs.update(flow=float(loss.detach()), critic=float(critic_loss.detach()),
                    generator=float(generator_loss.detach()))
        loss = loss + critic_loss + weight * generator_loss
    return loss, logs

"""World-model training (``alaya train world``): next-frame flow matching on recorded gameplay.

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

import dataclasses
import json
from dataclasses import dataclass, field

import numpy as np
import torch

from alaya.codecs.autoencoder import Autoencoder
from alaya.codecs.patch import PatchCodec, PatchCodecConfig
from alaya.data.episodes import EpisodeDataset
from alaya.data.start_frames import write_start_frames
from alaya.diffusion.flow import interpolate, velocity_loss_weight
from alaya.models.student import push_context
from alaya.models.world import WorldModel, WorldModelConfig
from alaya.nn.pretrained import copy_matching
from alaya.text import PromptEncoder
from alaya.train.loop import TrainConfig, Trainer
from alaya.train.teacher import augment_prompt, latent_channel_weights
from alaya.train.world_data import (LatentEpisodes, action_rows, add_context_noise, anchor_poses, encode_episodes,
                                    frame_pitch, real_context, training_times)
from alaya.train.world_memory_train import train_memory_world


@dataclass
class WorldTrainConfig:
    data: str
    autoencoder: str = "weights/autoencoder"
    init: str | None = None              # continue from these world-model weights
    out: str = "weights/world_model"
    model: WorldModelConfig = field(default_factory=WorldModelConfig)
    context_noise: float = 0.5           # noise augmentation: level ~ U(0, this) ...
    noise_prob: float = 0.8              # ... on this share of samples (the rest: clean context)
    shared_noise: float = 0.5            # share of noised samples whose noise is the same in every
                                         # context frame: a rollout's own errors persist from frame to
                                         # frame, so they must be removed by the image prior alone
    start_fraction: float = 0.1          # samples at the start of an episode (little context)
    recent_anchor: float = 0.3           # share of anchors drawn from the last 32 frames
    rollout: int = 0                     # self-rollout: generated context frames (0 = off)
    rollout_prob: float = 0.5
    rollout_steps: int = 1               # sampling steps of the rollout (cheap; no gradient)
    error_prob: float = 0.3              # error recycling: share of samples whose context carries the
    error_horizon: int = 48              # model's own errors from free rollouts of up to this many frames
    error_rollouts: int = 32             # (ErrorBank: this many rollouts, redrawn every
    error_refresh: int = 200             # this many steps with the current weights)
    play_context_noise: float | None = None   # the noise level the model is told at play (and so in
                                         # self-rollouts and the error bank); None: the model's own
    unroll: int = 0                      # unrolled rollout loss (``unroll_loss``): frames per chain (0 = off)
    unroll_batch: int = 8                # chains per step
    unroll_weight: float = 1.0           # its weight next to the flow loss
    unroll_still_prob: float | None = None   # share of the chains standing still (None: still_prob)
    still_prob: float = 0.0              # share of samples (and of error-bank rollouts and unrolled chains) standing still:
                                         # no action, the same recorded frame as context and target
    text_noise: float = 0.5
    uniform_t: float = 0.5               # share of training times drawn uniformly (the rest logit-normal):
                                         # few-step sampling visits low t, which logit-normal rarely trains
    one_step_t: float = 0.0              # share of samples trained at t = 1 exactly: the only time a
                                         # 1-step sampler (steps = 1, the shipped setting) ever asks about,
                                         # where the prediction is the mean next frame
    channel_weight_mix: float = 0.5      # per-channel loss weights (see latent_channel_weights)
    reset_prob: float = 0.05             # memory model: share of samples as a session's start (empty memory,
                                         # depth unknown: the model predicts the start frame's depth)
    gate_tolerance: float = 0.04         # memory model: the gate's target is 1 where the memory is this close
    memory_degrade: float = 0.0          # memory model: share of samples whose memory shows, in a band where
                                         # new content enters the view, what play's memory holds there: the
                                         # model's own blurred, misplaced, pinholed frames (degrade_memory)
    memory_rollout: int = 0              # memory model: the model plays up to this many frames (its own frames
                                         # then fill the memory's holes and the context) before the trained one
    memory_rollout_prob: float = 0.5     # ... on this share of the steps (world_memory_rollout)
    action_focus: float = 0.0            # memory model: share of the trained frames (0: all uniform) drawn from
    action_focus_span: int = 2           # ... this many frames from a one-shot action on (world_data.draw_frames;
                                         # the first shows its blade, orb or body from the action alone)
    novelty_weight: float = 0.0          # memory model: extra loss weight where the frame is not the memory's
                                         # render (holes, a blade, an orb: 1 - the gate target), each frame's
                                         # weights then scaled to mean 1 (world_memory_loss.novelty_weights); 0: off
    spectrum_weight: float = 0.0         # memory model: weight of the patch amplitude-spectrum loss on the 1-step
                                         # frames (the one_step_t samples) where the memory does not show the
                                         # frame (alaya.train.spectrum_loss); 0: none
    spectrum_patch: int = 16             # ... its tile size in pixels
    depth_weight: float = 1.0            # memory model: loss weights of the disparity and gate channels
    gate_weight: float = 0.5
    memory_styles: int = 1               # memory model: styles with memory renders (the first ones; ~30 ms a frame each)
    memory_cached_only: bool = False     # memory model: train on the episodes already rendered, render no more
    adversarial_weight: float = 0.0      # memory model: weight of a patch critic's hinge loss on the 1-step
                                         # frames (the one_step_t samples; alaya.train.world_critic); 0: none
    adversarial_start: int = 250         # ... from this step on (the critic trains from the first)
    camera_motion: str | None = None     # memory model: a learned camera (alaya train motion) copied into
                                         # <out>/camera_motion/, which play then moves the memory's camera by
    starts: int = 6                      # start frames written to <out>/starts/ (start_frames.write_start_frames)
    val_batches: int = 4                 # validation: this many fixed held-out batches ...
    val_batch_size: int = 32             # ... of this size
    train: TrainConfig = field(default_factory=lambda: TrainConfig(run_dir="runs/world", batch_size=32,
                                                                   lr=5e-4, ema=0.999))

    def __post_init__(self):
        if not 0.0 <= self.action_focus <= 1.0:
            raise ValueError(f"action_focus must be in [0, 1], got {self.action_focus}")
        if self.action_focus_span < 1:
            raise ValueError(f"action_focus_span must be at least 1, got {self.action_focus_span}")
        if not 0.0 <= self.novelty_weight < 1e4:
            raise ValueError(f"novelty_weight must be in [0, 1e4), got {self.novelty_weight}")
        if not 0.0 <= self.spectrum_weight < 1e4:
            raise ValueError(f"spectrum_weight must be in [0, 1e4), got {self.spectrum_weight}")
        if self.spectrum_weight > 0 and self.one_step_t <= 0:
            raise ValueError("spectrum_weight: the loss is on the 1-step frames of the samples at t = 1; "
                             "set one_step_t (--one-step-t) above 0")
        if self.spectrum_patch < 2:
            raise ValueError(f"spectrum_patch must be at least 2 pixels, got {self.spectrum_patch}")


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


def with_position_features(model: WorldModel, octaves: int) -> WorldModel:
    """``model`` given the frame-position input (``WorldModelConfig.position_features``): its
    weights copied, the new input layer zero, so it starts out computing what ``model`` did."""
    grown = WorldModel(dataclasses.replace(model.config, position_features=octaves))
    state = model.state_dict()
    copied = copy_matching(grown, state)
    if len(copied) != len(state):
        raise ValueError(f"position_features: weights of another shape in the init: {sorted(set(state) - set(copied))}")
    return grown


def train_world(cfg: WorldTrainConfig) -> WorldModel:
    model = WorldModel.from_pretrained(cfg.init) if cfg.init else WorldModel(cfg.model)
    if cfg.init and cfg.model.view_warp and not model.config.view_warp:   # fine-tune into the warp
        model.config = dataclasses.replace(model.config, view_warp=True)
    if cfg.init and cfg.model.ground_warp and not model.config.ground_warp:
        model.config = dataclasses.replace(model.config, view_warp=True, ground_warp=True)
    if cfg.init and cfg.model.anchor_warp and not model.config.anchor_warp:
        model.config = dataclasses.replace(model.config, view_warp=True, ground_warp=True, anchor_warp=True)
    if cfg.init and cfg.model.position_features > model.config.position_features:   # fine-tune into it
        model = with_position_features(model, cfg.model.position_features)
    if cfg.play_context_noise is not None:
        model.config = dataclasses.replace(model.config, play_context_noise=cfg.play_context_noise)
    cfg.model = model.config
    if cfg.model.memory:
        return train_memory_world(model, cfg)
    if cfg.model.codec == "patch4":
        folder, patch = None, PatchCodec(PatchCodecConfig(factor=4))
        weights = torch.ones(cfg.model.latent_channels)
    else:
        ae = Autoencoder.from_pretrained(cfg.autoencoder).eval()
        if cfg.model.latent_channels != ae.latent_channels:
            raise ValueError(f"model.latent_channels {cfg.model.latent_channels} != the autoencoder's "
                             f"{ae.latent_channels}")
        folder, patch = encode_episodes(cfg.data, ae, progress=cfg.train.progress), None
        weights = latent_channel_weights(ae, cfg.channel_weight_mix)
    encoder = PromptEncoder()
    train = LatentEpisodes(cfg.data, folder, "train", encoder, patch)
    if (cfg.model.ground_warp or cfg.model.anchor_warp) and train.pitch is None:
        raise ValueError(f"{cfg.data}: ground_warp needs every episode's camera poses (key 'world_to_camera')")
    ds = EpisodeDataset(cfg.data)
    held_out = next((s for s in ("val", "test") if ds.ids(s)), None)   # tiny datasets may lack val
    val = LatentEpisodes(cfg.data, folder, held_out, encoder, patch) if held_out else None
    tc = cfg.train

    bank = ErrorBank() if cfg.error_prob > 0 else None

    def loss_fn(m, index):
        if bank is not None and bank.calls % cfg.error_refresh == 0:      # also the first call after a resume
            core = m.module if hasattr(m, "module") else m
            bank.refresh(core, train, cfg, np.random.default_rng([tc.seed, index, 7]))
        if bank is not None:
            bank.calls += 1
        return world_loss(m, train, cfg, weights, index, tc.batch_size, tc.seed, bank=bank)

    def validate(m):
        losses = [world_loss(m, val, cfg, weights, 10_000_000 + i, cfg.val_batch_size, 1234, rollout=False)[0].item()
                  for i in range(cfg.val_batches)]
        out = {"loss": float(np.mean(losses))}
        if cfg.unroll > 0:                 # the chains' error too: what the unrolled loss trains
            core = m.module if hasattr(m, "module") else m
            out["unroll"] = float(np.mean([unroll_loss(core, val, cfg, weights, 10_000_000 + i, 1234).item()
                                           for i in range(cfg.val_batches)]))
        return out

    describe = {"world": json.loads(json.dumps(cfg.__dict__, default=lambda o: getattr(o, "__dict__", str(o))))}
    model = Trainer(model, tc, loss_fn, validate if val is not None else None, describe).run()
    model.save_pretrained(cfg.out, trained={"data": cfg.data, "steps": tc.steps, "run_dir": tc.run_dir,
                                            "rollout": cfg.rollout, "init": cfg.init})
    if cfg.starts > 0:                   # what alaya play --world and WorldModelEnv start from
        write_start_frames(cfg.data, cfg.out, count=cfg.starts)
    return model

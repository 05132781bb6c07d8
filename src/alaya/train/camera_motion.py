"""Training ``alaya.models.camera_motion.CameraMotion`` (``alaya train motion``).

Two ways to learn the camera's motion per action, chosen per dataset (``mode="auto"``: poses
when every episode has ``world_to_camera``, else frames):

* ``poses`` (supervised): the twist of each recorded delta ``P[t] P[t-1]^-1`` is the target
  (smooth L1 over the twist, each part over its scale). Half of the samples take their state
  (up, previous motion) from the recording, half from the model's own rollout from the
  episode's first pose (refreshed every ``refresh`` steps), which is what a session has.
* ``frames`` (self-supervised, SfMLearner / Monodepth2): frame t is synthesised from frames t-1
  and t+1 by ``view_warp.warp_depth`` with the predicted motions of rows t and t+1 and the
  model's depth prior (floor plane + far depth x a learned coarse residual); the loss is
  Monodepth2's photometric error 0.85 (1 - SSIM) / 2 + 0.15 L1 with auto-masking (a pixel that
  is unchanged unwarped, and better explained so, is left out: the HUD, bodies moving with the
  camera, standing still), each source on its own by default (``source_min`` for Monodepth2's
  per-pixel minimum over the two, which let one constant turn fit half of random actions), at
  ``scales`` levels (H down to H/16: the coarse ones widen the basin for 15-degree turns).
  States come from the model's own rollout from a level camera. Where the data has no ``K`` the
  focal length is learned too.

The episodes and what their poses say are ``alaya.train.camera_motion_data``; the measurement
(``evaluate_motion``, which ``train_motion`` runs on the test split) is
``alaya.train.camera_motion_eval``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from alaya.data.episodes import EpisodeDataset
from alaya.io import atomic_write_text
from alaya.models.camera_geometry import gl_to_cv, twist_to_matrix, up_in_camera
from alaya.models.camera_motion import CameraMotion, CameraMotionConfig
from alaya.models.view_warp import warp_depth
from alaya.train.camera_motion_data import (MotionEpisodes, idle_frames_hold_still, pitch_needs_input,
                                            recorded_flight, rollout_states)
from alaya.train.camera_motion_eval import evaluate_motion
from alaya.train.loop import TrainConfig

MODES = ("auto", "poses", "frames")
MOVING = 1e-4     # a recorded twist (rad, m) above this in any part: the camera moves (no rest frame)
STATIC = 0.02      # auto-masking without the minimum: a pixel is static when unwarped it is this close


@dataclass
class MotionTrainConfig:
    data: str
    out: str = "weights/camera_motion"
    mode: str = "auto"
    model: CameraMotionConfig = field(default_factory=CameraMotionConfig)
    refresh: int = 25                  # steps between rollouts of the states
    scales: int = 5                    # frames: pyramid levels (64 px down to 4 px; 3 missed 15-degree turns)
    learn_intrinsics: bool | None = None   # None: learn the focal length when the data has no K
    rest_weight: float = 30.0          # poses: weight of samples whose recorded camera is at rest
    source_min: bool = False           # frames: Monodepth2's per-pixel minimum over the sources (reprojection_loss)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(run_dir="runs/camera_motion", steps=1500,
                                                                    batch_size=32, lr=3e-3))


# --- the photometric loss (Monodepth2) ---------------------------------------------------------

def ssim_map(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) SSIM over 3x3 windows (reflection padded), as Monodepth2's."""
    x, y = F.pad(x, (1, 1, 1, 1), mode="reflect"), F.pad(y, (1, 1, 1, 1), mode="reflect")
    mx, my = F.avg_pool2d(x, 3, 1), F.avg_pool2d(y, 3, 1)
    sx = F.avg_pool2d(x * x, 3, 1) - mx ** 2
    sy = F.avg_pool2d(y * y, 3, 1) - my ** 2
    sxy = F.avg_pool2d(x * y, 3, 1) - mx * my
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    return ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx ** 2 + my ** 2 + c1) * (sx + sy + c2))


def photometric_error(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(B, 1, H, W) 0.85 (1 - SSIM) / 2 + 0.15 |pred - target|, averaged over channels."""
    ssim = ((1 - ssim_map(pred, target)) / 2).clamp(0, 1)
    return (0.85 * ssim + 0.15 * (pred - target).abs()).mean(1, keepdim=True)


def reprojection_loss(target: torch.Tensor, sources: list[torch.Tensor], to_source: list[torch.Tensor],
                      depth: torch.Tensor, K: torch.Tensor,
                      source_min: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Monodepth2's loss (Godard et al. 2019: eqs. 1 and 4, auto-masking) of ``target``
    (B, 3, H, W) synthesised from each of ``sources`` by the
    OpenCV transforms ``to_source`` (B, 4, 4) and the target's ``depth`` (B, 1, H, W): the
    per-pixel minimum over the sources' errors and, auto-masking, their errors unwarped (a pixel
    the identity explains better gives no gradient); a pixel a source does not cover counts
    there as unexplained. ``source_min`` False: each source is auto-masked and averaged on its
    own instead (every motion must explain its own frame: with random actions the minimum lets
    a motion that fits one source's action hide the other's). Returns (loss, share of pixels the
    warp explained best)."""
    warped, identity = [], []
    for src, T in zip(sources, to_source):
        img, cov = warp_depth(src, depth, K, T)
        warped.append(torch.where(cov > 0.5, photometric_error(img, target), torch.full_like(cov, 1e3)))
        identity.append(photometric_error(src, target) + 1e-5 * torch.randn_like(cov))
    if not source_min:
        cov_w = [torch.where(w < 1e3, w, torch.zeros_like(w)) for w in warped]
        masks = [((w < 1e3) & ~((i < w) & (i < STATIC))).float() for w, i in zip(warped, identity)]
        loss = sum((w * m).sum() / m.sum().clamp_min(1) for w, m in zip(cov_w, masks)) / len(warped)
        return loss, torch.stack([m.mean() for m in masks]).mean()
    warped_min = torch.cat(warped, 1).min(1).values
    identity_min = torch.cat(identity, 1).min(1).values
    best = torch.minimum(warped_min, identity_min)
    return best.mean(), (warped_min < identity_min).float().mean()


def _scaled_K(K: torch.Tensor, f: float) -> torch.Tensor:
    out = K.clone()
    out[:2] = out[:2] * f
    return out


def frames_loss(model: CameraMotion, data: MotionEpisodes, states, e: torch.Tensor, t: torch.Tensor,
                s: torch.Tensor, K: torch.Tensor, scales: int, source_min: bool = False) -> tuple[torch.Tensor, dict]:
    """The self-supervised loss of target frames t (2 <= ... <= length - 2) of episodes e, style s."""
    ups, prevs, heights, _ = states
    tw_in = model.twist(data.actions[e, t], ups[e, t], prevs[e, t], heights[e, t])            # frame t-1 -> t
    tw_out = model.twist(data.actions[e, t + 1], ups[e, t + 1], prevs[e, t + 1], heights[e, t + 1])  # t -> t+1
    to_prev = gl_to_cv(torch.linalg.inv(twist_to_matrix(tw_in)))
    to_next = gl_to_cv(twist_to_matrix(tw_out))
    frames = [data.rgb[e, s, t + k].float() / 255 for k in (-1, 0, 1)]
    total, explained = 0.0, 0.0
    for level in range(scales):
        f = 0.5 ** level
        imgs = [F.interpolate(x, scale_factor=f, mode="area") if level else x for x in frames]
        h, w = imgs[0].shape[-2:]
        depth = model.depth(ups[e, t + 1], h, w)[:, None]
        loss, share = reprojection_loss(imgs[1], [imgs[0], imgs[2]], [to_prev, to_next], depth, _scaled_K(K, f),
                                        source_min)
        total = total + loss / scales
        explained = explained + float(share) / scales
    reg = 1e-2 * model.depth_residual.pow(2).mean()      # keeps the prior's scale where the floor put it
    return total + reg, {"explained": explained}


def poses_loss(model: CameraMotion, data: MotionEpisodes, targets: torch.Tensor, states,
               e: torch.Tensor, t: torch.Tensor, rest_weight: float = 1.0) -> torch.Tensor:
    """Smooth L1 between predicted and recorded twists of rows t, half from recorded states. From
    the model's own rollout (the other half) the target also takes the camera back to the recorded
    height while the recorded camera moves: its translation gains the height error along the new
    camera's world up, so the model learns to hold the floor instead of drifting off it frame by
    frame. A recorded camera at rest stays at rest (a correction there would move a player who
    has stopped), and its samples weigh ``rest_weight``: stops are rare in the data (most frames
    without an action are a jump's flight), and a camera that coasts after a stop shakes a still
    view. A walk row (forward or strafe) whose recorded camera did not move along the floor was
    stopped by the world (a wall), which the rows do not show: such samples weigh nothing. The
    world model's session stops its camera at walls itself (``slide_at_surfaces``,
    ``stay_in_region``); learned from them, the camera would refuse to start a walk the
    recordings often begin against a wall (0.002 m a frame for a strafe right from a stand,
    against the recordings' 0.1)."""
    ups, prevs, heights, _ = states
    rec_up = up_in_camera(data.poses[e, t - 1]).float()
    rec_prev = torch.where((t > 1)[:, None], targets[e, (t - 1).clamp_min(1)], torch.zeros(len(t), 6))
    rec_height = data.heights[e, t - 1]
    own = torch.rand(len(t)) < 0.5
    up = torch.where(own[:, None], ups[e, t], rec_up)
    prev = torch.where(own[:, None], prevs[e, t], rec_prev)
    height = torch.where(own, heights[e, t], rec_height)
    pred = model.twist(data.actions[e, t], up, prev, height)
    target = targets[e, t].clone()
    next_up = up_in_camera(data.poses[e, t]).float()
    moving = targets[e, t].abs().amax(-1) > MOVING
    target[:, 3:] += ((height - rec_height) * (own & moving).float())[:, None] * next_up
    scale = model._scales()
    per_sample = F.smooth_l1_loss(pred / scale, target / scale, beta=0.1, reduction="none").mean(-1)
    weight = torch.where(moving, 1.0, rest_weight)
    weight = torch.where(blocked_walk(data.actions[e, t], targets[e, t], rec_up), 0.0, weight)
    return (weight * per_sample).sum() / weight.sum().clamp_min(1e-6)


def blocked_walk(rows: torch.Tensor, twists: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """(B,) bool: rows (B, 8) asking to walk (forward or strafe) whose recorded twists (B, 6)
    moved the camera less than ``MOVING`` along the floor (the translation off the camera's world
    ``up`` (B, 3)): a collision stopped the player."""
    walk = rows[:, :2].abs().amax(-1) > 0
    shift = twists[:, 3:]
    along_floor = shift - (shift * up).sum(-1, keepdim=True) * up
    return walk & (along_floor.norm(dim=-1) < MOVING)


def _resolve_mode(cfg: MotionTrainConfig, data: MotionEpisodes) -> str:
    if cfg.mode not in MODES:
        raise ValueError(f"motion mode must be one of {MODES}, got {cfg.mode!r}")
    if cfg.mode == "poses" and data.poses is None:
        raise ValueError(f"{cfg.data}: mode 'poses' needs every episode's camera poses (key 'world_to_camera'); "
                         "use mode 'frames' (learned from the frames alone)")
    return cfg.mode if cfg.mode != "auto" else ("poses" if data.poses is not None else "frames")


def train_motion(cfg: MotionTrainConfig) -> CameraMotion:
    """Train on ``cfg.data``'s train split; save to ``cfg.out`` (with the test split's errors
    when it has poses) and write ``config.json`` / ``metrics.jsonl`` in the run folder."""
    tr = cfg.train
    torch.manual_seed(tr.seed)
    if tr.threads:
        torch.set_num_threads(tr.threads)
    probe = EpisodeDataset(cfg.data)
    split = "train" if probe.ids("train") else None
    has_poses = all("world_to_camera" in probe.load(i) for i in probe.ids(split)[:1])
    mode = cfg.mode if cfg.mode != "auto" else ("poses" if has_poses else "frames")
    data = MotionEpisodes(cfg.data, split, frames=mode == "frames")
    mode = _resolve_mode(dataclasses.replace(cfg, mode=mode), data)
    if data.poses is not None and not cfg.model.level:
        rolls = up_in_camera(data.poses.reshape(-1, 4, 4))[:, 0].abs()     # sin(roll) of every recorded camera
        if float(rolls.max()) < math.sin(math.radians(0.5)):
            cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, level=True))
    if data.poses is not None and not cfg.model.still_without_navigation and idle_frames_hold_still(data):
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, still_without_navigation=True))
    flight = recorded_flight(data) if data.poses is not None and cfg.model.flight_rise == 0 else None
    if flight is not None:
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, flight_rise=flight[0],
                                                                 flight_gravity=flight[1]))
    if data.poses is not None and not cfg.model.pitch_held and pitch_needs_input(data):
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, pitch_held=True))
    model = CameraMotion(cfg.model)
    learn_K = data.K is None if cfg.learn_intrinsics is None else cfg.learn_intrinsics
    if data.K is not None and not learn_K:
        model.set_intrinsics(data.K, data.size[0])
    model.log_focal.requires_grad_(learn_K and mode == "frames")
    frames_only = [model.log_far, model.depth_residual]
    if mode == "poses":
        for p in frames_only:
            p.requires_grad_(False)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=tr.lr)
    run = Path(tr.run_dir)
    run.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run / "config.json", json.dumps({**dataclasses.asdict(cfg), "resolved_mode": mode}, indent=2))
    targets = data.targets() if mode == "poses" else None
    lo = 1 if mode == "poses" else 2                         # frames: frames t-1 and t+1 exist
    hi = data.length - (0 if mode == "poses" else 1)         # exclusive
    g = torch.Generator().manual_seed(tr.seed)
    states = None
    log = open(run / "metrics.jsonl", "w")
    bar = tqdm(range(1, tr.steps + 1), desc=f"train motion ({mode})", disable=not tr.progress, dynamic_ncols=True)
    for step in bar:
        if states is None or step % cfg.refresh == 1:
            states = rollout_states(model, data, from_poses=mode == "poses")
        for group in opt.param_groups:
            group["lr"] = tr.lr_at(step - 1)
        e = torch.randint(len(data.actions), (tr.batch_size,), generator=g)
        t = lo + (torch.rand(tr.batch_size, generator=g) * (hi[e] - lo)).long()
        if mode == "poses":
            loss, info = poses_loss(model, data, targets, states, e, t, cfg.rest_weight), {}
        else:
            s = torch.randint(data.rgb.shape[1], (tr.batch_size,), generator=g)
            K = data.K.float() if (data.K is not None and not learn_K) else model.intrinsics(*data.size)
            loss, info = frames_loss(model, data, states, e, t, s, K, cfg.scales, cfg.source_min)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tr.grad_clip)
        opt.step()
        if step % tr.log_every == 0 or step == tr.steps:
            row = {"step": step, "loss": float(loss.detach()), **info,
                   "fov_y_degrees": float(2 * torch.rad2deg(torch.atan(0.5 / model.log_focal.exp())))}
            log.write(json.dumps(row) + "\n")
            log.flush()
            bar.set_postfix(loss=f"{float(loss.detach()):.4f}")
    log.close()
    model.eval()
    metrics = {}
    test = EpisodeDataset(cfg.data).ids("test")
    if test and data.poses is not None:
        metrics = evaluate_motion(model, cfg.data, "test", scale_from=cfg.data if mode == "frames" else None)
    model.save_pretrained(cfg.out, trained={"mode": mode, "data": str(cfg.data), "steps": tr.steps,
                                            "lr": tr.lr, "batch_size": tr.batch_size, "seed": tr.seed,
                                            "episodes": data.ids, "learned_intrinsics": bool(learn_K),
                                            "rest_weight": cfg.rest_weight},
                          metrics=metrics)
    return model

"""``alaya train world``, ``train motion``, ``train effects`` and ``train wall-detail``: their flags on the shared ``alaya
train`` parser (``add_world_train_args``, which ``cli_train.py`` calls) and the runs they start.
Thin dispatch only."""

from __future__ import annotations

import argparse


def train_world_from_args(a: argparse.Namespace, train):
    """``alaya train world``: the world flags of the shared ``train`` parser into a run."""
    from alaya.models.world import WorldModelConfig
    from alaya.train.world import train_world
    from alaya.train.world_config import WorldTrainConfig
    ground = a.ground_warp or a.anchor_warp
    model_cfg = WorldModelConfig(view_warp=a.view_warp or ground, ground_warp=ground, anchor_warp=a.anchor_warp)
    if a.world_widths:
        model_cfg.widths = tuple(int(w) for w in a.world_widths.split(","))
    if a.memory:                       # scene-memory conditioning (docs/world.md, "Memory-conditioned model")
        model_cfg.memory, model_cfg.latent_channels = True, 80
        model_cfg.memory_max_points = a.memory_max_points
        model_cfg.memory_sky_depth = a.memory_sky_depth
        model_cfg.memory_hole_base = a.memory_hole_base or "context"
        model_cfg.memory_fill_disocclusions = a.memory_fill_disocclusions
        model_cfg.memory_fill_strips = a.memory_fill_strips
    if a.world_steps:
        model_cfg.steps = a.world_steps
    model_cfg.position_features = a.position_features
    return train_world(WorldTrainConfig(
        data=a.data, autoencoder=a.autoencoder, init=a.init, hole_base=a.memory_hole_base,
        fill_disocclusions=a.memory_fill_disocclusions or None, fill_strips=a.memory_fill_strips or None, out=a.out or "weights/world_model",
        model=model_cfg, rollout=a.rollout if a.rollout_prob > 0 else 0, rollout_prob=a.rollout_prob,
        context_noise=0.5 if a.context_noise is None else a.context_noise, shared_noise=a.shared_noise, error_prob=a.error_prob,
        still_prob=a.still_prob, one_step_t=a.one_step_t, play_context_noise=a.play_noise,
        unroll=a.unroll, unroll_batch=a.unroll_batch, unroll_weight=a.unroll_weight,
        unroll_still_prob=a.unroll_still_prob, reset_prob=a.reset_prob,
        memory_cached_only=a.memory_cached_only, depth_weight=a.depth_weight, gate_weight=a.gate_weight,
        camera_motion=a.camera_motion, memory_degrade=a.memory_degrade, memory_rollout=a.memory_rollout,
        memory_rollout_prob=a.memory_rollout_prob, memory_lag=a.memory_lag, memory_lag_prob=a.memory_lag_prob,
        action_focus=a.action_focus, action_focus_span=a.action_focus_span,
        novelty_weight=a.novelty_weight, spectrum_weight=a.spectrum_weight, spectrum_patch=a.spectrum_patch,
        meanflow_share=a.meanflow_share,
        adversarial_weight=a.adversarial_weight,
        adversarial_start=a.adversarial_start, train=train))


def train_motion_from_args(a: argparse.Namespace, train):
    """``alaya train motion``: the camera's motion per action (``alaya.train.camera_motion``),
    from recorded poses or from the frames alone (``--motion-mode``)."""
    from alaya.models.camera_motion import CameraMotionConfig
    from alaya.train.camera_motion import MotionTrainConfig, train_motion
    return train_motion(MotionTrainConfig(data=a.data, out=a.out or "weights/camera_motion", mode=a.motion_mode,
                                          rest_weight=a.motion_rest_weight,
                                          model=CameraMotionConfig(fov_y_degrees=a.motion_fov), train=train))


def train_wall_detail_from_args(a: argparse.Namespace, train):
    """``alaya train wall-detail``: the region walls' close-up detail (``alaya.train.wall_detail``),
    cut from the episodes' frames of walls seen close up; the report goes to the run folder and
    the tiles beside a world model's weights (``--out``, default ``weights/world_model/wall_detail``)."""
    import json
    from pathlib import Path

    from alaya.io import atomic_write_text
    from alaya.train.wall_detail import WallDetailFitConfig, fit_wall_detail
    out = a.out or "weights/world_model/wall_detail"
    detail, report = fit_wall_detail(WallDetailFitConfig(data=a.data, seed=a.seed, progress=train.progress))
    Path(a.run_dir).mkdir(parents=True, exist_ok=True)
    atomic_write_text(Path(a.run_dir) / "report.json", json.dumps(report, indent=2))
    detail.save_pretrained(out, trained={"data": str(a.data), **report})
    print(f"{report['tiles']} wall tiles of {report['candidates']} found in {report['frames_searched']} frames")
    return detail


def train_effects_from_args(a: argparse.Namespace, train):
    """``alaya train effects``: what each one-shot action draws over the view
    (``alaya.train.action_effects``), fitted from the episodes' frames; the report goes to the
    run folder and the layer beside a world model's weights (``--out``, default
    ``weights/world_model/action_effects``)."""
    import json
    from pathlib import Path

    from alaya.io import atomic_write_text
    from alaya.train.action_effects import EffectsFitConfig, fit_action_effects
    out = a.out or "weights/world_model/action_effects"
    effects, report = fit_action_effects(EffectsFitConfig(data=a.data, frames=a.frames,
                                                          progress=train.progress))
    Path(a.run_dir).mkdir(parents=True, exist_ok=True)
    atomic_write_text(Path(a.run_dir) / "report.json", json.dumps(report, indent=2))
    effects.save_pretrained(out, trained={"data": str(a.data), **report})
    print(f"presses {report['presses']}; layers for {', '.join(report['fitted'])}")
    return effects


def add_world_train_args(tr: argparse.ArgumentParser) -> None:
    """The ``alaya train`` flags only ``train world`` reads (``train_world_from_args``)."""
    tr.add_argument("--rollout-prob", type=float, default=0.0,
                    help="world: share of batches trained on self-generated context (0 = off)")
    tr.add_argument("--context-noise", type=float, default=None,
                    help="world (default 0.5), student (default 0.1): context noise augmentation level")
    tr.add_argument("--shared-noise", type=float, default=0.5,
                    help="world: share of noised contexts whose noise is the same in every frame")
    tr.add_argument("--error-prob", type=float, default=0.3,
                    help="world: share of contexts carrying the model's own rollout errors (error recycling; 0 = off)")
    tr.add_argument("--still-prob", type=float, default=0.0, help="world: share of samples standing still")
    tr.add_argument("--one-step-t", type=float, default=0.0,
                    help="world, teacher, student: share of samples trained at t = 1 (world: the 1-step sampler's "
                         "only time; teacher, student ar/guidance: the regression every sample starts from)")
    tr.add_argument("--unroll", type=int, default=0,
                    help="world: frames of the unrolled rollout loss, trained through the whole chain (0 = off)")
    tr.add_argument("--unroll-batch", type=int, default=8, help="world: unrolled chains per step")
    tr.add_argument("--unroll-weight", type=float, default=1.0, help="world: weight of the unrolled loss")
    tr.add_argument("--unroll-still-prob", type=float, default=None,
                    help="world: share of the unrolled chains standing still (default: --still-prob)")
    tr.add_argument("--view-warp", action="store_true",
                    help="world: rotate the context into the new view by the turn/pitch actions (also turns it on for --init)")
    tr.add_argument("--ground-warp", action="store_true",
                    help="world: --view-warp plus the walk of forward/strafe actions over a floor at eye height")
    tr.add_argument("--play-noise", type=float, default=None,
                    help="world: the context noise level the model is told at play (default: the model's own)")
    tr.add_argument("--anchor-warp", action="store_true",
                    help="world: --ground-warp plus the anchor seen from the new view at the walked pose")
    tr.add_argument("--world-widths", help="world: widths of a new world model, e.g. 64,96")
    tr.add_argument("--motion-mode", default="auto", choices=["auto", "poses", "frames"],
                    help="motion: learn from recorded poses or self-supervised from the frames (auto: poses "
                         "when every episode has them)")
    tr.add_argument("--motion-fov", type=float, default=60.0,
                    help="motion: the vertical field of view (degrees) the focal length starts from where the "
                         "data has no K")
    tr.add_argument("--motion-rest-weight", type=float, default=30.0,
                    help="motion (poses): weight of the samples whose recorded camera is at rest (stops are rare "
                         "in play data; a camera that coasts after one shakes a still view)")
    tr.add_argument("--memory", action="store_true",
                    help="world: a new model conditioned on the scene memory, generating RGB-D and a blend gate")
    tr.add_argument("--memory-max-points", type=int, default=100_000, help="world --memory: the memory's capacity")
    tr.add_argument("--memory-sky-depth", type=float, default=0.0,
                    help="world --memory, a play setting: the sky a frame shows goes into the memory as a backdrop "
                         "this many metres away (0: the sky is not stored; 25 keeps a 128² frame's corners "
                         "within the memory's 40 m)")
    tr.add_argument("--reset-prob", type=float, default=0.05,
                    help="world --memory: share of samples as a session's start (depth of the start frame)")
    tr.add_argument("--world-steps", type=int, default=None, help="world: sampling steps of a new model")
    tr.add_argument("--depth-weight", type=float, default=1.0, help="world --memory: loss weight of the depth channels")
    tr.add_argument("--gate-weight", type=float, default=0.5, help="world --memory: loss weight of the gate channels")
    tr.add_argument("--camera-motion", default=None,
                    help="world --memory: a learned camera folder (alaya train motion, e.g. weights/camera_motion) "
                         "shipped inside the model folder; play moves the memory's camera by it")
    tr.add_argument("--memory-hole-base", default=None, choices=["context", "inpaint", "far", "mirror"],
                    help="world --memory: the residual's zero in the memory's holes: the newest frame (context, a "
                         "new model's default), the memory pulled in (inpaint), beside a depth edge its far side (far), "
                         "or in the view's side strips the view beside them mirrored (mirror)")
    tr.add_argument("--memory-fill-disocclusions", action="store_true",
                    help="world --memory: the memory render's holes beside a depth edge are shown as memory, filled "
                         "with the far side (with --init, a model without it is fine-tuned into it)")
    tr.add_argument("--memory-fill-strips", action="store_true",
                    help="world --memory: a turn's side strips are shown as memory, the view beside them mirrored "
                         "(with --init, a model without it is fine-tuned into it)")
    tr.add_argument("--memory-rollout", type=int, default=0,
                    help="world --memory: the model plays up to this many frames before the trained one, so its "
                         "own frames fill the memory's holes and the context as in play (0: off)")
    tr.add_argument("--memory-rollout-prob", type=float, default=0.5,
                    help="world --memory-rollout: the share of steps trained so")
    tr.add_argument("--memory-lag", type=int, default=0,
                    help="world --memory: render the memory also this many frames behind (cached beside the rolling "
                         "renders) for --memory-lag-prob")
    tr.add_argument("--memory-lag-prob", type=float, default=0.0,
                    help="world --memory-lag: share of samples whose memory and context are the lagged renders "
                         "(the floor walked up to magnified, the last frames' new view as holes)")
    tr.add_argument("--memory-degrade", type=float, default=0.0,
                    help="world --memory: share of samples whose memory shows, at a random side, what play's memory "
                         "holds there (the model's own blurred, misplaced, pinholed frames)")
    tr.add_argument("--position-features", type=int, default=0,
                    help="world: octaves of the frame-position input (where each pixel lies in the view), so an "
                         "action's effect can show at its place; with --init, a model without it is given it "
                         "(the new input layer starts at zero)")
    tr.add_argument("--action-focus", type=float, default=0.0,
                    help="world --memory: share of the trained frames drawn from the frames just after a one-shot "
                         "action (jump, attack, spell, summon), whose effects uniform draws rarely show")
    tr.add_argument("--action-focus-span", type=int, default=2,
                    help="world --action-focus: frames from the one-shot action on that count as just after it (the "
                         "first is the one drawn from the action alone)")
    tr.add_argument("--novelty-weight", type=float, default=0.0,
                    help="world --memory: extra loss weight on the pixels where the frame is not the memory's render "
                         "(its holes, an action's blade or orb), each frame's weights scaled to mean 1; 0: off")
    tr.add_argument("--spectrum-weight", type=float, default=0.0,
                    help="world --memory: weight of a loss on the 1-step frames (needs --one-step-t) asking for the "
                         "true frame's patch amplitude spectra where the memory does not show it: detail, not the "
                         "mean; 0: off")
    tr.add_argument("--spectrum-patch", type=int, default=16, help="world --spectrum-weight: tile size in pixels")
    tr.add_argument("--meanflow-share", type=float, default=0.0,
                    help="world --memory: share of samples trained for the average velocity over an interval "
                         "(MeanFlow), so that one step lands on a sample, not on the mean; 0: off")
    tr.add_argument("--memory-cached-only", action="store_true",
                    help="world --memory: train on the episodes whose memory renders are cached, render no more")

"""The typed configuration of ``alaya train world`` (``WorldTrainConfig``): the data, the model,
the loss terms and the training loop, checked when built."""

from __future__ import annotations

from dataclasses import dataclass, field

from alaya.models.world import WorldModelConfig
from alaya.train.loop import TrainConfig


@dataclass
class WorldTrainConfig:
    data: str
    autoencoder: str = "weights/autoencoder"
    init: str | None = None              # continue from these world-model weights
    hole_base: str | None = None         # with init: the memory_hole_base to fine-tune into (None: the init's)
    fill_disocclusions: bool | None = None   # with init: the memory_fill_disocclusions to fine-tune into (None: the init's)
    fill_strips: bool | None = None          # with init: the memory_fill_strips to fine-tune into (None: the init's)
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
    memory_lag: int = 0                  # memory model: frames behind of the lagged renders (0: none cached)
    memory_lag_prob: float = 0.0         # ... share of the samples whose memory and context are such renders: the
                                         # floor walked up to magnified, the last frames' new view as holes
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
    meanflow_share: float = 0.0          # memory model: share of samples trained for the average velocity over an
                                         # interval (MeanFlow; half of them the play step r = 0, t = 1), which
                                         # makes the model an average-velocity one (alaya.train.world_meanflow); 0: off
    meanflow_max_frequency: float | None = 64.0   # ... du/dt leaves out the time embedding's faster phases
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
        if not 0.0 <= self.meanflow_share <= 1.0:
            raise ValueError(f"meanflow_share must be in [0, 1], got {self.meanflow_share}")
        if self.meanflow_max_frequency is not None and not self.meanflow_max_frequency > 0:
            raise ValueError(f"meanflow_max_frequency must be > 0 or None, got {self.meanflow_max_frequency}")
        if not 0.0 <= self.novelty_weight < 1e4:
            raise ValueError(f"novelty_weight must be in [0, 1e4), got {self.novelty_weight}")
        if not 0.0 <= self.spectrum_weight < 1e4:
            raise ValueError(f"spectrum_weight must be in [0, 1e4), got {self.spectrum_weight}")
        if self.spectrum_weight > 0 and self.one_step_t <= 0:
            raise ValueError("spectrum_weight: the loss is on the 1-step frames of the samples at t = 1; "
                             "set one_step_t (--one-step-t) above 0")
        if not 0 <= self.memory_lag <= 1000:
            raise ValueError(f"memory_lag must be in [0, 1000] frames, got {self.memory_lag}")
        if not 0.0 <= self.memory_lag_prob <= 1.0:
            raise ValueError(f"memory_lag_prob must be in [0, 1], got {self.memory_lag_prob}")
        if self.memory_lag_prob > 0 and self.memory_lag < 2:
            raise ValueError("memory_lag_prob: the lagged samples need renders at least 2 frames behind; "
                             f"set memory_lag (--memory-lag) to 2 or more, got {self.memory_lag}")
        if self.spectrum_patch < 2:
            raise ValueError(f"spectrum_patch must be at least 2 pixels, got {self.spectrum_patch}")

"""The training run of a memory-conditioned world model (``WorldModelConfig.memory``), which
``alaya.train.world.train_world`` hands it to: the cached rolling memory renders per split
(``alaya.train.world_memory``; lagged ones too with ``memory_lag``), the loss (``alaya.train.world_memory_loss``), the optional patch
critic (``alaya.train.world_critic``), and the learned camera shipped inside the saved folder
(``ship_camera_motion``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from alaya.codecs.patch import PatchCodec, PatchCodecConfig
from alaya.data.episodes import EpisodeDataset
from alaya.data.start_frames import write_start_frames
from alaya.models.camera_motion import CAMERA_MOTION_DIR, CameraMotion
from alaya.models.memory_conditioning import memory_config
from alaya.models.world import WorldModel
from alaya.text import PromptEncoder
from alaya.train.loop import Trainer
from alaya.train.world_critic import WorldWithCritic, world_of
from alaya.train.world_data import LatentEpisodes
from alaya.train.world_memory import MemoryEpisodes, cache_memory, cached_ids, restrict
from alaya.train.world_memory_loss import channel_weights, memory_world_loss


def ship_camera_motion(source: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """A learned camera (a ``CameraMotion`` folder; loaded first, so a bad one fails here) copied
    into the model folder ``out`` as ``camera_motion/``: the session's camera moves by it."""
    CameraMotion.from_pretrained(source)
    target = Path(out) / CAMERA_MOTION_DIR
    shutil.copytree(source, target, dirs_exist_ok=True)
    return target


def train_memory_world(model: WorldModel, cfg) -> WorldModel:
    """``train_world`` for a memory model (``cfg``: its ``WorldTrainConfig``; the sample and the
    loss: ``alaya.train.world_memory_loss``): the rolling memory renders are cached first
    (``cache_memory``); no error bank or unrolled loss."""
    if cfg.unroll > 0 or cfg.error_prob > 0 or cfg.rollout > 0:
        raise ValueError("a memory model trains without unroll, error recycling or self-rollout: set "
                         "--unroll 0 --error-prob 0 --rollout-prob 0")
    m, tc = cfg.model, cfg.train
    memory_cfg = memory_config(m)
    ds = EpisodeDataset(cfg.data)
    held_out = next((s for s in ("val", "test") if ds.ids(s)), None)
    encoder, patch = PromptEncoder(), PatchCodec(PatchCodecConfig(factor=4))
    splits = {}
    for split in ("train", held_out) if held_out else ("train",):
        data = LatentEpisodes(cfg.data, None, split, encoder, patch)
        if cfg.memory_cached_only:
            try:
                folder, ids = cached_ids(cfg.data, memory_cfg, data.ids, m.memory_sky_depth)
            except FileNotFoundError:
                if split == "train":
                    raise
                held_out = None                  # none of the held-out episodes rendered yet: no validation
                continue
            data = restrict(data, ids)
        else:
            folder = cache_memory(cfg.data, memory_cfg, data.ids, progress=tc.progress, styles=cfg.memory_styles,
                                  sky_depth=m.memory_sky_depth)
        lagged = None
        if cfg.memory_lag_prob > 0:          # rendered here even with memory_cached_only: the episodes trained on
            lagged = cache_memory(cfg.data, memory_cfg, data.ids, progress=tc.progress, styles=cfg.memory_styles,
                                  sky_depth=m.memory_sky_depth, lag=cfg.memory_lag)
        splits[split] = data, MemoryEpisodes(cfg.data, data.ids, folder, data.shape[2], lagged)
    weights = channel_weights(cfg)
    if cfg.adversarial_weight > 0:
        if cfg.one_step_t <= 0:
            raise ValueError("adversarial_weight: the critic judges the 1-step frames of the samples at t = 1; "
                             "set one_step_t (--one-step-t) above 0")
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:     # the critic runs outside the DDP module's forward
            raise ValueError("adversarial_weight: the world model's critic trains in one process only "
                             "(under torchrun its gradients would not be averaged); run without torchrun")
        model = WorldWithCritic(model)

    def loss_fn(mod, index):
        return memory_world_loss(mod, *splits["train"], cfg, weights, index, tc.batch_size, tc.seed)

    def validate(mod):
        return {"loss": float(np.mean([memory_world_loss(world_of(mod), *splits[held_out], cfg, weights, 10_000_000 + i,
                                                         cfg.val_batch_size, 1234)[0].item()
                                       for i in range(cfg.val_batches)]))}

    describe = {"world": json.loads(json.dumps(cfg.__dict__, default=lambda o: getattr(o, "__dict__", str(o))))}
    model = world_of(Trainer(model, tc, loss_fn, validate if held_out else None, describe).run())
    model.save_pretrained(cfg.out, trained={"data": cfg.data, "steps": tc.steps, "run_dir": tc.run_dir,
                                            "memory": True, "init": cfg.init, "camera_motion": cfg.camera_motion,
                                            "adversarial_weight": cfg.adversarial_weight,
                                            "spectrum_weight": cfg.spectrum_weight})
    if cfg.camera_motion:
        ship_camera_motion(cfg.camera_motion, cfg.out)
    if cfg.starts > 0:
        write_start_frames(cfg.data, cfg.out, count=cfg.starts)
    return model

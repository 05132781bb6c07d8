"""World-model training (``alaya train world``): builds the model (from scratch or from
``init``, grown into the inputs the config asks for) and trains it with the memory loss
(``alaya.train.world_memory_train``, ``--memory``) or the latent loss
(``alaya.train.world_latent_loss``, whose docstring describes a sample), then writes the weights
and the start frames play begins from. The config is ``alaya.train.world_config``.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import torch

from alaya.codecs.autoencoder import Autoencoder
from alaya.codecs.patch import PatchCodec, PatchCodecConfig
from alaya.data.episodes import EpisodeDataset
from alaya.data.start_frames import write_start_frames
from alaya.models.world import WorldModel
from alaya.nn.pretrained import copy_matching
from alaya.text import PromptEncoder
from alaya.train.loop import Trainer
from alaya.train.teacher import latent_channel_weights
from alaya.train.world_config import WorldTrainConfig
from alaya.train.world_data import LatentEpisodes, encode_episodes
from alaya.train.world_latent_loss import ErrorBank, unroll_loss, world_loss
from alaya.train.world_memory_train import train_memory_world


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
    if cfg.init and cfg.hole_base and cfg.hole_base != model.config.memory_hole_base:   # fine-tune into it
        model.config = dataclasses.replace(model.config, memory_hole_base=cfg.hole_base)
    if cfg.meanflow_share > 0 and not model.config.memory:
        raise ValueError("meanflow_share: MeanFlow training is built for memory models (--memory)")
    if cfg.meanflow_share > 0:                   # an average-velocity model from here on
        model.to_average_velocity()
    if cfg.init and cfg.fill_disocclusions is not None:
        model.config = dataclasses.replace(model.config, memory_fill_disocclusions=cfg.fill_disocclusions)
    if cfg.init and cfg.fill_strips is not None:
        model.config = dataclasses.replace(model.config, memory_fill_strips=cfg.fill_strips)
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

"""The world model's training data: recorded gameplay episodes of one split in memory (frames as
patch latents or cached autoencoder latents, actions, camera pitch, dead-reckoned poses, style
phrasings), and the lookups a training sample is built from (action rows, pitches, anchor
poses, a recorded context), and the context noise and flow times both world losses draw
(``add_context_noise``, ``training_times``). ``alaya.train.world`` builds samples from them.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from tqdm import tqdm

from alaya.codecs.autoencoder import Autoencoder
from alaya.codecs.latent_cache import codec_id
from alaya.codecs.patch import PatchCodec
from alaya.data.actions import ONE_SHOT
from alaya.data.episodes import EpisodeDataset
from alaya.data.geometry import view_pitch_degrees
from alaya.diffusion.flow import logit_normal_t, with_share_at_one
from alaya.io import atomic_save_tensors
from alaya.models.student import push_context
from alaya.models.view_warp import dead_reckon
from alaya.models.world import WorldModelConfig
from alaya.text import PromptEncoder


@torch.no_grad()
def encode_episodes(root: str, ae: Autoencoder, progress: bool = True, batch: int = 64) -> Path:
    """Encode every episode's frames (all styles) into ``root/latents/<codec>/<id>.safetensors``
    (``rgb`` (S, T, C, h, w) float16), skipping those already there; returns the folder."""
    ds = EpisodeDataset(root)
    folder = Path(root) / "latents" / codec_id(ae)
    folder.mkdir(parents=True, exist_ok=True)
    ae = ae.eval()
    for eid in tqdm(ds.ids(), desc="encoding episodes", disable=not progress):
        path = folder / f"{eid}.safetensors"
        if path.exists():
            continue
        rgb = ds.load(eid)["rgb"]
        S, T = rgb.shape[:2]
        x = torch.from_numpy(rgb.reshape(S * T, *rgb.shape[2:])).permute(0, 3, 1, 2).float() / 255
        z = torch.cat([ae.encode(x[i:i + batch]) for i in range(0, len(x), batch)])
        atomic_save_tensors(path, {"rgb": z.reshape(S, T, *z.shape[1:]).half()})
    return folder


class LatentEpisodes:
    """One split's episodes in memory, actions (N, T, 8), camera pitch (N, T) in degrees (``pitch``,
    None if the episodes have no ``world_to_camera``) and each style's phrasing embeddings,
    plus either cached autoencoder latents (N, S, T, C, h, w) float16 (``folder``) or the frames
    themselves, uint8 (N, S, T, H, W, 3), encoded on the fly by a ``PatchCodec`` (``patch``)."""

    def __init__(self, root: str, folder: Path | None, split: str, encoder: PromptEncoder,
                 patch: PatchCodec | None = None):
        if (folder is None) == (patch is None):
            raise ValueError("LatentEpisodes needs exactly one of a latent cache folder and a patch codec")
        ds = EpisodeDataset(root)
        ids = ds.ids(split)
        if not ids:
            raise ValueError(f"{root}: no episodes in split {split!r}")
        lat, acts, pitches, styles = [], [], [], None
        for eid in ids:
            ep = ds.load(eid)
            names = [str(s) for s in ep["styles"]]
            if styles is None:
                styles = names
            elif names != styles:
                raise ValueError(f"{ds.path(eid)}: key 'styles' is {names}, other episodes have {styles}")
            lat.append(torch.from_numpy(ep["rgb"]) if patch is not None
                       else load_file(str(folder / f"{eid}.safetensors"))["rgb"])
            acts.append(torch.from_numpy(ep["actions"]))
            pitches.append(torch.from_numpy(view_pitch_degrees(ep["world_to_camera"])) if "world_to_camera" in ep else None)
        T = min(x.shape[1] for x in lat)
        self.store = torch.stack([x[:, :T] for x in lat])
        self.patch = patch
        self.actions = torch.stack([a[:T] for a in acts])
        # camera pitch per frame (degrees), for ground_warp; None unless every episode has its poses
        self.pitch = None if any(p is None for p in pitches) else torch.stack([p[:T] for p in pitches])
        self.styles = styles
        self.phrasings = [encoder.encode(list(ds.meta.styles[s])) for s in styles]
        self.ids = ids
        self._poses: tuple[tuple[float, float], torch.Tensor] | None = None   # (rates, poses), see poses()

    def poses(self, model: WorldModelConfig) -> torch.Tensor:
        """(N, T, 3) dead-reckoned poses [x, y, yaw] of every frame (``view_warp.dead_reckon``
        at the model's turn and walk rates), computed once."""
        rates = (model.turn_degrees, model.move_metres)
        if self._poses is None or self._poses[0] != rates:
            self._poses = rates, dead_reckon(self.actions, math.radians(model.turn_degrees), model.move_metres)
        return self._poses[1]

    @property
    def shape(self) -> tuple[int, int, int]:
        """(episodes, styles, frames)."""
        return tuple(self.store.shape[:3])

    def latent(self, e, st, idx) -> torch.Tensor:
        """Latents (B, C, h, w) float32 of frames ``idx`` of episodes ``e`` in styles ``st``."""
        x = self.store[e, st, idx]
        if self.patch is None:
            return x.float()
        return self.patch.encode(x.permute(0, 3, 1, 2).float() / 255)

    def sample(self, size: int, seed: int, index: int, text_noise: float):
        n, s, T = self.shape
        rng = np.random.default_rng([seed, index])
        e, st = rng.integers(n, size=size), rng.integers(s, size=size)
        return rng, e, st, T


def action_rows(data: LatentEpisodes, e, n, history: int) -> torch.Tensor:
    """(B, history, 8) action rows n, n-1, ... of episodes ``e`` (zero before frame 1: frame 0
    has no action that led to it)."""
    return torch.stack([torch.where(torch.from_numpy(n - a >= 1)[:, None], data.actions[e, np.maximum(n - a, 0)],
                                    torch.zeros(len(e), data.actions.shape[-1])) for a in range(history)], 1)


def draw_frames(data: LatentEpisodes, rng: np.random.Generator, e, low: int, T: int, focus: float = 0.0,
                span: int = 2) -> np.ndarray:
    """Frame indices (B,) in [low, T) of episodes ``e``, uniform; on a share ``focus`` of them,
    one of the ``span`` frames from a one-shot action on (``ONE_SHOT``), where the episode has
    one: a one-shot action is ~1% of recorded rows, and what it shows (a blade, an orb, a body
    falling into place) lasts a few frames, too rare in uniform draws to be learned. ``focus``
    0 draws exactly as ``rng.integers(low, T)`` does."""
    n = rng.integers(low, T, size=len(e))
    if focus <= 0:
        return n
    shots = (data.actions[:, :, -len(ONE_SHOT):] != 0).any(-1).numpy()
    for b in np.flatnonzero(rng.random(len(e)) < focus):
        frames = (np.flatnonzero(shots[e[b]])[:, None] + np.arange(span)).ravel()
        frames = frames[(frames >= low) & (frames < T)]
        if frames.size:
            n[b] = rng.choice(frames)
    return n


def frame_pitch(data: LatentEpisodes, e, n) -> torch.Tensor | None:
    """(B,) camera pitch in degrees of frames ``n`` of episodes ``e`` (frame 0's before it), or None
    without recorded poses."""
    return None if data.pitch is None else data.pitch[e, np.maximum(n, 0)]


def anchor_poses(data: LatentEpisodes, model: WorldModelConfig, e, anchor_idx, frame_idx):
    """``WorldModel.sample``'s ``poses`` for anchors ``anchor_idx`` seen from frames ``frame_idx`` of
    episodes ``e`` (None unless ``anchor_warp``)."""
    if not model.anchor_warp:
        return None
    if data.pitch is None:
        raise ValueError("anchor_warp needs every episode's camera poses (key 'world_to_camera')")
    P = data.poses(model)
    a, f = np.maximum(anchor_idx, 0), np.maximum(frame_idx, 0)
    return P[e, a], data.pitch[e, a], P[e, f]


def real_context(data: LatentEpisodes, e, st, newest, K: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Recorded frames newest, newest-1, ... (K of them, newest first) as a context (B, K, C, h, w)
    and its validity (B, K, 1, h, w): invalid before the episode's start."""
    frames = [newest - j for j in range(K - 1, -1, -1)]         # oldest first, newest ends in front
    latents = [data.latent(e, st, np.maximum(f, 0)) for f in frames]
    ctx, valid = torch.zeros(len(e), K, *latents[0].shape[1:]), torch.zeros(len(e), K, 1, *latents[0].shape[2:])
    for f, latent in zip(frames, latents):
        ctx, valid = push_context(ctx, valid, latent)
        valid[torch.from_numpy(f < 0), 0] = 0
    return ctx, valid


def add_context_noise(ctx: torch.Tensor, valid: torch.Tensor, cfg,
                      rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian noise of a level ~ U(0, ``cfg.context_noise``) on ``cfg.noise_prob`` of the contexts
    (B, K, ...), the same draw in every frame on ``cfg.shared_noise`` of them; zero where not
    ``valid``. Returns (noisy context, level (B,)). Shared by the plain and the memory model's loss."""
    B = ctx.shape[0]
    level = rng.uniform(0, cfg.context_noise, B) * (rng.random(B) < cfg.noise_prob)
    level = torch.from_numpy(level).float()
    eps = torch.from_numpy(rng.standard_normal(ctx.shape)).float()
    shared = torch.from_numpy(rng.random(B) < cfg.shared_noise).view(B, 1, 1, 1, 1)
    eps = torch.where(shared, eps[:, :1].expand_as(eps), eps)     # static noise: one draw for all K frames
    noisy = ctx + level.view(B, 1, 1, 1, 1) * eps
    return noisy * valid, level


def training_times(B: int, cfg, rng: np.random.Generator) -> torch.Tensor:
    """(B,) flow times: logit-normal, ``cfg.uniform_t`` of them uniform in [0.02, 1], then
    ``cfg.one_step_t`` of them exactly 1."""
    t = logit_normal_t(B, torch.Generator().manual_seed(int(rng.integers(2**31))))
    uniform = torch.from_numpy(rng.random(B) < cfg.uniform_t)
    t = torch.where(uniform, torch.from_numpy(rng.uniform(0.02, 1.0, B)).float(), t)
    return with_share_at_one(t, cfg.one_step_t, rng)

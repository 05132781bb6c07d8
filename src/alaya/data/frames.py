"""In-memory frame banks for training image models (codecs): every RGB style frame of a split
plus the raw G-buffer of each frame, sampled deterministically by (seed, step).

Deterministic sampling by step means a resumed run sees exactly the batches it would have seen.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from alaya.data.dataset import ClipDataset

GBUFFER_KEYS = ("depth", "normal", "albedo", "roughness", "metallic")


@dataclass
class FrameBank:
    rgb: np.ndarray          # (N_clips, S, T, H, W, 3) uint8
    gbuffer: dict[str, np.ndarray]   # key -> (N_clips, T, H, W, ...)
    styles: list[str]

    @classmethod
    def load(cls, root: str | os.PathLike, split: str, max_clips: int | None = None,
             gbuffer: bool = True) -> "FrameBank":
        ds = ClipDataset(root)
        ids = ds.ids(split)[:max_clips]
        if not ids:
            raise ValueError(f"{root}: split '{split}' has no clips")
        keys = ["rgb", "styles"] + (list(GBUFFER_KEYS) if gbuffer else [])
        clips = [ds.load(cid, keys=keys) for cid in ids]
        styles = [str(s) for s in clips[0]["styles"]]
        for cid, c in zip(ids, clips):
            if [str(s) for s in c["styles"]] != styles:
                raise ValueError(f"{root}: clip {cid} has styles {list(c['styles'])}, expected {styles}")
        rgb = np.stack([c["rgb"] for c in clips])
        gb = {k: np.stack([c[k] for c in clips]) for k in GBUFFER_KEYS} if gbuffer else {}
        return cls(rgb, gb, styles)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        n, s, t, h, w, _ = self.rgb.shape
        return n, s, t, h, w

    def __len__(self) -> int:
        n, s, t, _, _ = self.shape
        return n * s * t

    def sample_indices(self, batch: int, seed: int, step: int) -> tuple[np.ndarray, ...]:
        """(clip, style, frame) indices of one batch, a pure function of (seed, step)."""
        n, s, t, _, _ = self.shape
        rng = np.random.default_rng([seed, step])
        return rng.integers(n, size=batch), rng.integers(s, size=batch), rng.integers(t, size=batch)

    def crop_offsets(self, batch: int, crop: int | None, seed: int, step: int, align: int = 8):
        _, _, _, h, w = self.shape
        if crop is None or crop >= min(h, w):
            return np.zeros(batch, int), np.zeros(batch, int), h, w
        rng = np.random.default_rng([seed, step, 1])
        ys = rng.integers(0, (h - crop) // align + 1, size=batch) * align
        xs = rng.integers(0, (w - crop) // align + 1, size=batch) * align
        return ys, xs, crop, crop

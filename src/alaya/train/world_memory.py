"""Rolling scene-memory renders of recorded episodes: what a memory-conditioned world model sees.

For every frame n of an episode, in every style: the ``SceneMemory`` holding the recorded frames
0 ... n-1 (their true depth and camera), rendered at frame n's recorded camera, before frame n goes
in (the rolling setting of docs/world.md, "Scene memory"; frame 0 sees an empty memory). Play
renders, then inserts, the same way (``WorldSession``), only with generated frames.

Computed once per episode and memory config into ``<root>/memory/<key>/<episode>.{rgb,coverage,depth}.npy``
(uint8 (S, T, H, W, 3), uint8 (S, T, H, W), float16 (S, T, H, W) metres, 0 where not covered),
read back memory-mapped (``MemoryRenders``). About 30 ms a frame and style at 128² on one core.

``memory_world_loss`` (in ``alaya.train.world_memory_loss``) builds a training sample from them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from alaya.data.episodes import EpisodeDataset
from alaya.io import atomic_path
from alaya.models.scene_memory import SceneMemory, SceneMemoryConfig

PARTS = ("rgb", "coverage", "depth")


_LATER = {"see_through": True}     # fields added after caches were made count only when not at their default


def memory_key(config: SceneMemoryConfig) -> str:
    """A short hash of the memory's config: renders of another config are another cache."""
    fields = {k: v for k, v in dataclasses.asdict(config).items() if _LATER.get(k, object()) != v}
    text = json.dumps(fields, sort_keys=True)
    return "mem-" + hashlib.sha1(text.encode()).hexdigest()[:10]


@torch.no_grad()
def rolling_renders(episode: dict[str, np.ndarray], config: SceneMemoryConfig,
                    styles: int | None = None) -> dict[str, np.ndarray]:
    """The renders of one episode (``read_episode``'s arrays: needs rgb, depth, K and
    world_to_camera): per style (the first ``styles``; default all), frame n rendered from the
    memory of frames < n."""
    for key in ("rgb", "depth", "K", "world_to_camera"):
        if key not in episode:
            raise ValueError(f"episode: the scene memory needs key {key!r} (recorded depth and camera)")
    S, T, H, W, _ = episode["rgb"].shape
    S = S if styles is None else min(S, styles)
    out = {"rgb": np.zeros((S, T, H, W, 3), np.uint8), "coverage": np.zeros((S, T, H, W), np.uint8),
           "depth": np.zeros((S, T, H, W), np.float16)}
    K = episode["K"].astype(np.float32)
    for s in range(S):
        memory = SceneMemory(config)
        for t in range(T):
            view = episode["world_to_camera"][t].astype(np.float32)
            if t:
                r = memory.render(K, view, H, W)
                out["rgb"][s, t] = (r.rgb.permute(1, 2, 0) * 255).round().clamp(0, 255).to(torch.uint8).numpy()
                out["coverage"][s, t] = r.coverage[0].numpy().astype(np.uint8)
                out["depth"][s, t] = r.depth[0].numpy().astype(np.float16)
            memory.insert(episode["rgb"][s, t], episode["depth"][t].astype(np.float32), K, view, time=t)
    return out


def cache_memory(root: str, config: SceneMemoryConfig, ids: list[str] | None = None,
                 progress: bool = True, styles: int | None = None) -> Path:
    """Render every episode in ``ids`` (default: all) not yet cached, in its first ``styles``
    styles (default all; 1 halves the ~30 ms a frame); returns the cache folder."""
    ds = EpisodeDataset(root)
    folder = Path(root) / "memory" / memory_key(config)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(dataclasses.asdict(config), indent=1))
    for eid in tqdm(ds.ids() if ids is None else ids, desc="memory renders", disable=not progress):
        if all((folder / f"{eid}.{p}.npy").exists() for p in PARTS):
            continue
        renders = rolling_renders(ds.load(eid), config, styles)
        for part in PARTS:                 # each file complete or absent
            with atomic_path(folder / f"{eid}.{part}.npy", keep_suffix=True) as tmp:
                np.save(tmp, renders[part])
    return folder


def cached_ids(root: str, config: SceneMemoryConfig, ids: list[str]) -> tuple[Path, list[str]]:
    """The cache folder and those of ``ids`` whose renders are complete there."""
    folder = Path(root) / "memory" / memory_key(config)
    done = [e for e in ids if all((folder / f"{e}.{p}.npy").exists() for p in PARTS)]
    if not done:
        raise FileNotFoundError(f"{folder}: no memory renders of these episodes yet (cache_memory)")
    return folder, done


def restrict(data, ids: list[str]):
    """``LatentEpisodes`` ``data`` cut down to the episodes ``ids`` (in its order)."""
    keep = [data.ids.index(e) for e in ids]
    data.store, data.actions = data.store[keep], data.actions[keep]
    data.pitch = None if data.pitch is None else data.pitch[keep]
    data.ids, data._poses = list(ids), None
    return data


class MemoryRenders:
    """The cached renders of some episodes, memory-mapped: ``get(e, st, n)`` gives frames ``n`` of
    episodes ``e`` (indices into ``ids``) in styles ``st`` as (rgb (B, 3, H, W) in [0, 1],
    coverage (B, 1, H, W), depth (B, 1, H, W) metres)."""

    def __init__(self, folder: str | os.PathLike, ids: list[str]):
        folder = Path(folder)
        missing = [e for e in ids if not (folder / f"{e}.depth.npy").exists()]
        if missing:
            raise FileNotFoundError(f"{folder}: no memory renders for {missing[:3]} (run cache_memory)")
        self.parts = {p: [np.load(folder / f"{e}.{p}.npy", mmap_mode="r") for e in ids] for p in PARTS}
        self.styles = min(a.shape[0] for a in self.parts["depth"])      # styles rendered in every episode

    def get(self, e, st, n) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        rgb = np.stack([self.parts["rgb"][i][s, t] for i, s, t in zip(e, st, n)])
        cov = np.stack([self.parts["coverage"][i][s, t] for i, s, t in zip(e, st, n)])
        depth = np.stack([self.parts["depth"][i][s, t] for i, s, t in zip(e, st, n)])
        return (torch.from_numpy(rgb).permute(0, 3, 1, 2).float() / 255, torch.from_numpy(cov)[:, None].float(),
                torch.from_numpy(depth.astype(np.float32))[:, None])


class MemoryEpisodes:
    """Beside a split's ``LatentEpisodes`` (same episodes, same order): each frame's recorded depth
    (N, T, H, W) float16 and the rolling memory renders (``MemoryRenders``)."""

    def __init__(self, root: str, ids: list[str], folder: Path, frames: int):
        ds = EpisodeDataset(root)
        depths = []
        for eid in ids:
            ep = ds.load(eid)
            if "depth" not in ep:
                raise ValueError(f"{ds.path(eid)}: a memory model trains on recorded depth (key 'depth')")
            depths.append(torch.from_numpy(ep["depth"][:frames]))
        self.depth = torch.stack(depths)
        self.renders = MemoryRenders(folder, ids)

    def frame(self, data, e, st, idx) -> tuple[torch.Tensor, torch.Tensor]:
        """Recorded rgb (B, 3, H, W) in [0, 1] and depth (B, 1, H, W) metres of frames ``idx``."""
        idx = np.maximum(idx, 0)
        rgb = data.store[e, st, idx].permute(0, 3, 1, 2).float() / 255
        return rgb, self.depth[e, idx].float()[:, None]

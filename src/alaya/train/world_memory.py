"""Rolling scene-memory renders of recorded episodes: what a memory-conditioned world model sees.

For every frame n of an episode, in every style: the ``SceneMemory`` holding the recorded frames
0 ... n-1 (their true depth and camera), rendered at frame n's recorded camera, before frame n goes
in (the rolling setting of docs/world.md, "Scene memory"; frame 0 sees an empty memory). Play
renders, then inserts, the same way (``WorldSession``), only with generated frames.

Lagged renders (``lag`` L > 1): the memory holding only frames 0 ... n-L, rendered at frame n's
camera: what play's memory shows after L frames that added nothing to it (the model kept what the
memory showed): the floor walked up to magnified from where it was seen far away, what L frames
of walking or turning uncover left as holes (``memory_lag`` in ``world_memory_loss``).

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
from alaya.models.memory_conditioning import as_context, frame_image, to_latent
from alaya.models.scene_memory import SceneMemory, SceneMemoryConfig
from alaya.models.student import push_context

PARTS = ("rgb", "coverage", "depth")


_LATER = {"see_through": True, "sky_dome": 0.0, "sky_cells_per_degree": 3.0, "tent": 1.0, "tent_min_radius": 1.0,
          "sky_extend": False}     # fields added after caches were made count only when not at their default


def memory_key(config: SceneMemoryConfig, sky_depth: float = 0.0, lag: int = 1) -> str:
    """A short hash of the memory's config (and the sky backdrop's distance, when one is stored,
    and the lag, when not 1): renders of another config are another cache."""
    fields = {k: v for k, v in dataclasses.asdict(config).items() if _LATER.get(k, object()) != v}
    if sky_depth > 0:
        fields["sky_depth"] = float(sky_depth)
    if lag != 1:
        fields["lag"] = int(lag)
    text = json.dumps(fields, sort_keys=True)
    return "mem-" + hashlib.sha1(text.encode()).hexdigest()[:10]


@torch.no_grad()
def rolling_renders(episode: dict[str, np.ndarray], config: SceneMemoryConfig,
                    styles: int | None = None, sky_depth: float = 0.0, lag: int = 1) -> dict[str, np.ndarray]:
    """The renders of one episode (``read_episode``'s arrays: needs rgb, depth, K and
    world_to_camera): per style (the first ``styles``; default all), frame n rendered from the
    memory of frames <= n - ``lag`` (1: the frames before n). ``sky_depth`` > 0: each frame's sky
    goes in as a backdrop that far away, as play stores it (``WorldModelConfig.memory_sky_depth``)."""
    for key in ("rgb", "depth", "K", "world_to_camera"):
        if key not in episode:
            raise ValueError(f"episode: the scene memory needs key {key!r} (recorded depth and camera)")
    if lag < 1:
        raise ValueError(f"lag must be >= 1, got {lag}")
    S, T, H, W, _ = episode["rgb"].shape
    S = S if styles is None else min(S, styles)
    out = {"rgb": np.zeros((S, T, H, W, 3), np.uint8), "coverage": np.zeros((S, T, H, W), np.uint8),
           "depth": np.zeros((S, T, H, W), np.float16)}
    K = episode["K"].astype(np.float32)
    views = episode["world_to_camera"].astype(np.float32)
    for s in range(S):
        memory = SceneMemory(config)
        for t in range(T):
            f = t - lag                                  # the newest frame the memory holds at t
            if f >= 0:
                depth = episode["depth"][f].astype(np.float32)
                if sky_depth > 0:
                    depth = np.where(depth > 0, depth, np.float32(sky_depth))
                memory.insert(episode["rgb"][s, f], depth, K, views[f], time=f)
                r = memory.render(K, views[t], H, W)
                out["rgb"][s, t] = (r.rgb.permute(1, 2, 0) * 255).round().clamp(0, 255).to(torch.uint8).numpy()
                out["coverage"][s, t] = r.coverage[0].numpy().astype(np.uint8)
                out["depth"][s, t] = r.depth[0].numpy().astype(np.float16)
    return out


def cache_memory(root: str, config: SceneMemoryConfig, ids: list[str] | None = None,
                 progress: bool = True, styles: int | None = None, sky_depth: float = 0.0, lag: int = 1) -> Path:
    """Render every episode in ``ids`` (default: all) not yet cached, in its first ``styles``
    styles (default all; 1 halves the ~30 ms a frame), the sky as a backdrop ``sky_depth`` away
    (0: not stored), ``lag`` frames behind (``rolling_renders``); returns the cache folder."""
    ds = EpisodeDataset(root)
    folder = Path(root) / "memory" / memory_key(config, sky_depth, lag)
    folder.mkdir(parents=True, exist_ok=True)
    described = dataclasses.asdict(config) | {"sky_depth": sky_depth} | ({"lag": lag} if lag != 1 else {})
    (folder / "config.json").write_text(json.dumps(described, indent=1))
    for eid in tqdm(ds.ids() if ids is None else ids, desc=f"memory renders{f' (lag {lag})' if lag != 1 else ''}",
                    disable=not progress):
        if all((folder / f"{eid}.{p}.npy").exists() for p in PARTS):
            continue
        renders = rolling_renders(ds.load(eid), config, styles, sky_depth, lag)
        for part in PARTS:                 # each file complete or absent
            with atomic_path(folder / f"{eid}.{part}.npy", keep_suffix=True) as tmp:
                np.save(tmp, renders[part])
    return folder


def cached_ids(root: str, config: SceneMemoryConfig, ids: list[str],
               sky_depth: float = 0.0) -> tuple[Path, list[str]]:
    """The cache folder and those of ``ids`` whose renders are complete there."""
    folder = Path(root) / "memory" / memory_key(config, sky_depth)
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
    (N, T, H, W) float16 and camera (``K`` (N, 3, 3), ``views`` (N, T, 4, 4) world_to_camera), and
    the rolling memory renders (``MemoryRenders``), and ``lagged``: the folder of lagged renders
    of the same episodes, when training asks for them (``rolling_renders``' ``lag``)."""

    def __init__(self, root: str, ids: list[str], folder: Path, frames: int, lagged: Path | None = None):
        ds = EpisodeDataset(root)
        depths, Ks, views = [], [], []
        for eid in ids:
            ep = ds.load(eid)
            for key in ("depth", "K", "world_to_camera"):
                if key not in ep:
                    raise ValueError(f"{ds.path(eid)}: a memory model trains on recorded depth and cameras (key {key!r})")
            depths.append(torch.from_numpy(ep["depth"][:frames]))
            Ks.append(torch.from_numpy(np.asarray(ep["K"], np.float32)))
            views.append(torch.from_numpy(np.asarray(ep["world_to_camera"][:frames], np.float32)))
        self.depth, self.K, self.views = torch.stack(depths), torch.stack(Ks), torch.stack(views)   # (N, T, H, W), (N, 3, 3), (N, T, 4, 4)
        self.renders = MemoryRenders(folder, ids)
        self.lagged = None if lagged is None else MemoryRenders(lagged, ids)

    def frame(self, data, e, st, idx) -> tuple[torch.Tensor, torch.Tensor]:
        """Recorded rgb (B, 3, H, W) in [0, 1] and depth (B, 1, H, W) metres of frames ``idx``."""
        idx = np.maximum(idx, 0)
        rgb = data.store[e, st, idx].permute(0, 3, 1, 2).float() / 255
        return rgb, self.depth[e, idx].float()[:, None]

    def shown_frame(self, data, e, st, idx, lagged: np.ndarray | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``frame``, and for the samples ``lagged`` (B,) bool as a session that kept its memory's
        render shows it: the lagged render (the memory ``lag`` frames behind) where that covers, the
        true frame elsewhere, with the render's depth where it covers (the sky's stays unknown)."""
        rgb, depth = self.frame(data, e, st, idx)
        if lagged is None or not lagged.any():
            return rgb, depth
        mrgb, mcov, mdepth = self.lagged.get(e, st, np.maximum(idx, 0))
        covered = (mcov > 0.5) & torch.from_numpy(lagged).view(-1, 1, 1, 1)
        return torch.where(covered, mrgb, rgb), torch.where(covered & (depth > 0), mdepth, depth)

    def memory(self, e, st, n, lagged: np.ndarray | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The rolling memory renders of frames ``n`` (``MemoryRenders.get``), the lagged ones for
        the samples ``lagged`` (B,) bool."""
        rgb, cov, depth = self.renders.get(e, st, n)
        if lagged is not None and lagged.any():
            b = torch.from_numpy(lagged)
            rgb[b], cov[b], depth[b] = self.lagged.get(e[lagged], st[lagged], n[lagged])
        return rgb, cov, depth

    def context(self, data, e, st, n, K: int, lagged: np.ndarray | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The true frames n-K ... n-1 (for the samples ``lagged``: as ``shown_frame`` shows them) as
        RGB-D latents, newest first: context (B, K, 80, h, w) and valid (B, K, 1, h, w) (0 before frame 0)."""
        ctx, valid = None, None
        for f in [n - 1 - j for j in range(K - 1, -1, -1)]:                    # oldest first
            rgb, depth = self.shown_frame(data, e, st, f, lagged)
            lat = as_context(to_latent(frame_image(rgb, depth)))
            if ctx is None:
                ctx = torch.zeros(len(e), K, *lat.shape[1:])
                valid = torch.zeros(len(e), K, 1, *lat.shape[2:])
            ctx, valid = push_context(ctx, valid, lat)
            valid[torch.from_numpy(f < 0), 0] = 0
        return ctx, valid

"""Start frames of a world model, what a session starts from, taken from an episodes dataset:
``write_start_frames`` writes them to ``<folder>/starts/`` (with the recorded depth and camera of
each, and the region the recordings' players stood in), ``read_start_depth`` and
``read_start_view`` read a start frame's recorded depth and camera back."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from alaya.data.clipio import ClipError
from alaya.data.episodes import EPISODES_FILE, EpisodeDataset
from alaya.io import atomic_path
from alaya.data.walkable_region import REGION_FILE, FlatRegionError, WalkableRegion

STARTS_DIR = "starts"


def write_start_frames(root: str | os.PathLike[str], folder: str | os.PathLike[str], count: int = 6,
                       split: str = "test", style: str | None = None) -> list[Path]:
    """The start frames of a world model (what ``alaya play --world`` and ``WorldModelEnv`` start
    a session from): frame 0 (the player's spawn view) of the first ``count`` episodes, by id, of
    ``split`` (if it has none: val, test, then train) in ``style`` (default: the first
    style of episodes.json), written as ``<folder>/starts/NN_<episode>_<style>.png`` (atomically),
    with its recorded depth beside it as ``NN_<episode>_<style>.depth.npy`` (float16 metres, 0 on
    the sky) where the episode has depth: a memory model starts from it. Where the episodes have
    cameras, each start's ``world_to_camera`` goes beside it as ``.view.npy`` (float64 (4, 4))
    and the training split's camera centres bound ``starts/region.json`` (``WalkableRegion``):
    a session started with that view keeps its camera inside the region. Start frames already in
    ``starts/`` are replaced. Returns the PNG paths written."""
    from PIL import Image

    ds = EpisodeDataset(root)
    style = style or next(iter(ds.meta.styles))
    if style not in ds.meta.styles:
        raise KeyError(f"{Path(root) / EPISODES_FILE}: no style {style!r} (styles: {list(ds.meta.styles)})")
    order = [split] + [s for s in ("val", "test", "train") if s != split]
    ids = next((ds.ids(s) for s in order if ds.ids(s)), [])[:count]
    if not ids:
        raise ValueError(f"{Path(root) / EPISODES_FILE}: no episodes to take start frames from")
    out = Path(folder) / STARTS_DIR
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("*.png"), *out.glob("*.depth.npy"), *out.glob("*.view.npy"), *out.glob(REGION_FILE)]:
        old.unlink()
    paths = []
    for i, eid in enumerate(ids):
        ep = ds.load(eid)
        styles = [str(s) for s in ep["styles"]]
        if style not in styles:
            raise ClipError(ds.path(eid), "styles", f"no style {style!r} in this episode ({styles})")
        path = out / f"{i:02d}_{eid}_{style}.png"
        with atomic_path(path, keep_suffix=True) as tmp:
            Image.fromarray(ep["rgb"][styles.index(style), 0]).save(tmp)
        if "depth" in ep:
            with atomic_path(path.with_suffix(".depth.npy"), keep_suffix=True) as tmp, open(tmp, "wb") as f:
                np.save(f, np.asarray(ep["depth"][0], np.float16), allow_pickle=False)
        if "world_to_camera" in ep:
            with atomic_path(path.with_suffix(".view.npy"), keep_suffix=True) as tmp, open(tmp, "wb") as f:
                np.save(f, np.asarray(ep["world_to_camera"][0], np.float64), allow_pickle=False)
        paths.append(path)
    region = recorded_region(ds, ("train", "val", "test"))
    if region is not None:
        region[0].save(out / REGION_FILE, frames=region[1])
    return paths


def recorded_region(ds: EpisodeDataset, splits) -> tuple[WalkableRegion, int] | None:
    """(the region the cameras of the first of ``splits`` that has episodes stood in, how many
    camera positions bound it), or None when its episodes have no cameras or their cameras bound
    no area (all on one line: the recordings do not say how wide the world is)."""
    ids = next((ds.ids(s) for s in splits if ds.ids(s)), [])
    views = [ds.load(eid).get("world_to_camera") for eid in ids]
    if not views or any(v is None for v in views):
        return None
    views = np.concatenate([np.asarray(v, np.float64) for v in views])
    try:
        return WalkableRegion.from_cameras(views), len(views)
    except FlatRegionError:
        return None


def read_start_depth(start: str | os.PathLike[str], size: int | None = None) -> np.ndarray | None:
    """The recorded depth shipped beside a start frame ``NN_<episode>_<style>.png``
    (``write_start_frames``' ``.depth.npy``) as float32 (H, W) metres, None if there is none;
    checked: 2-D, ``size`` x ``size`` if given, finite, >= 0."""
    f = Path(start).with_suffix(".depth.npy")
    if not f.exists():
        return None
    d = np.load(f, allow_pickle=False).astype(np.float32)
    if d.ndim != 2 or (size is not None and d.shape != (size, size)) or not np.isfinite(d).all() or (d < 0).any():
        raise ValueError(f"{f}: expected finite depth >= 0 of shape {(size, size) if size else '(H, W)'}, got {d.shape}")
    return d


def read_start_view(start: str | os.PathLike[str]) -> np.ndarray | None:
    """The recorded camera shipped beside a start frame (``write_start_frames``' ``.view.npy``) as
    float64 (4, 4) world_to_camera, None if there is none; checked: finite and rigid."""
    f = Path(start).with_suffix(".view.npy")
    return rigid_view(np.load(f, allow_pickle=False), str(f)) if f.exists() else None


def rigid_view(value, name: str = "view") -> np.ndarray:
    """``value`` as float64 (4, 4) world_to_camera, checked finite and rigid (an orthonormal
    rotation, last row 0 0 0 1); a ValueError names ``name`` otherwise."""
    m = np.asarray(value, dtype=np.float64)
    if m.shape != (4, 4) or not np.isfinite(m).all() or np.abs(m[3] - [0, 0, 0, 1]).max() > 1e-6 \
            or np.abs(m[:3, :3] @ m[:3, :3].T - np.eye(3)).max() > 1e-4 or np.linalg.det(m[:3, :3]) <= 0:
        raise ValueError(f"{name}: expected a finite rigid (4, 4) world_to_camera, got shape {m.shape}")
    return m

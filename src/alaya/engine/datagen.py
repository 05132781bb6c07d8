"""``alaya datagen``: render a dataset of clips from procedural scenes.

The dataset's ``dataset.json`` is written first, listing every planned clip; each clip file is
then written atomically. A killed run leaves only complete clips (plus ignorable dot-files), and
running the same command again skips the clips that are already there and valid, so it resumes
where it stopped. The settings of an existing dataset must match, or the run refuses to mix them.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import numpy as np
from tqdm import tqdm

from alaya.data.clipio import ClipError, read_clip, write_clip
from alaya.data.contract import SCHEMA_VERSION
from alaya.data.dataset import DatasetMeta, read_meta, splits_for_seeds, write_meta
from alaya.engine.camera import RIGS
from alaya.engine.materials import library_json
from alaya.engine.styles import STYLE_NAMES, get_style


@dataclass
class DatagenConfig:
    out: str
    clips: int = 8
    frames: int = 16
    size: int = 128
    styles: tuple[str, ...] = STYLE_NAMES
    rigs: tuple[str, ...] = RIGS
    seed: int = 0
    workers: int = 1
    fps: float = 30.0
    name: str = "alaya-procedural"
    resume: bool = True

    def check(self) -> None:
        if self.clips < 1 or self.frames < 1:
            raise ValueError("--clips and --frames must be >= 1")
        if self.size <= 0 or self.size % 16:
            raise ValueError(f"--size must be a positive multiple of 16, got {self.size}")
        for s in self.styles:
            get_style(s)
        for r in self.rigs:
            if r not in RIGS:
                raise ValueError(f"unknown rig {r!r}; choose from {RIGS}")
        if self.workers < 1:
            raise ValueError("--workers must be >= 1")


def clip_plan(cfg: DatagenConfig) -> dict[str, dict]:
    """clip id -> {seed, rig, split}: scene seeds derive from the run seed and the clip index;
    splits follow the scene seed (``splits_for_seeds``: a small dataset still gets a test clip,
    and a val clip from 3 clips on)."""
    seeds = {f"clip_{i:05d}": cfg.seed * 1_000_003 + i for i in range(cfg.clips)}
    splits = splits_for_seeds(seeds)
    plan = {}
    for cid, scene_seed in seeds.items():
        rig = cfg.rigs[int(np.random.default_rng([scene_seed, 5]).integers(len(cfg.rigs)))]
        plan[cid] = {"seed": scene_seed, "rig": rig, "split": splits[cid]}
    return plan


def _generator_settings(cfg: DatagenConfig) -> dict:
    return {"tool": "alaya datagen", "seed": cfg.seed, "clips": cfg.clips, "frames": cfg.frames,
            "size": cfg.size, "styles": list(cfg.styles), "rigs": list(cfg.rigs), "fps": cfg.fps}


def build_meta(cfg: DatagenConfig) -> DatasetMeta:
    plan = clip_plan(cfg)
    splits = {s: [cid for cid, c in plan.items() if c["split"] == s] for s in ("train", "val", "test")}
    return DatasetMeta(
        schema_version=SCHEMA_VERSION, name=cfg.name, height=cfg.size, width=cfg.size,
        fps=cfg.fps, frames=cfg.frames,
        styles={s: get_style(s).to_json() for s in cfg.styles},
        materials=library_json(), splits=splits, clips=plan, actions=None,
        generator=_generator_settings(cfg),
    )


def _clip_is_complete(path: Path) -> bool:
    if not path.exists():
        return False
    try:
        read_clip(path)
        return True
    except ClipError:
        return False


def _render_and_write(args: tuple) -> str:
    clip_id, path, seed, rig, frames, size, styles, fps, threads = args
    os.environ.setdefault("LP_NUM_THREADS", str(threads))
    from alaya.engine.stream import StreamConfig, render_clip   # imported in the worker
    clip = render_clip(seed, frames, tuple(styles), StreamConfig(size=size, rig=rig, fps=fps))
    write_clip(path, clip)
    return clip_id


def generate_dataset(cfg: DatagenConfig, progress: bool = True) -> Path:
    """Render (or finish rendering) the dataset described by ``cfg``; returns its root."""
    cfg.check()
    root = Path(cfg.out)
    clips_dir = root / "clips"
    meta = build_meta(cfg)
    if (root / "dataset.json").exists():
        if not cfg.resume:
            raise FileExistsError(f"{root}/dataset.json exists; pass --resume or choose a new --out")
        old = read_meta(root)
        if old.generator != meta.generator:
            raise ValueError(f"{root}/dataset.json was generated with other settings "
                             f"({old.generator}); use a new --out to generate these")
    clips_dir.mkdir(parents=True, exist_ok=True)
    for stale in clips_dir.glob(".*.tmp"):          # leftovers of a killed writer
        stale.unlink(missing_ok=True)
    write_meta(root, meta)
    todo = [(cid, clips_dir / f"{cid}.npz", c) for cid, c in meta.clips.items()
            if not _clip_is_complete(clips_dir / f"{cid}.npz")]
    threads = max(1, (os.cpu_count() or 1) // cfg.workers)
    jobs = [(cid, str(path), c["seed"], c["rig"], cfg.frames, cfg.size, list(cfg.styles), cfg.fps,
             threads) for cid, path, c in todo]
    bar = tqdm(total=len(meta.clips), initial=len(meta.clips) - len(todo), unit="clip",
               desc=f"datagen {root.name}", disable=not progress)
    if cfg.workers == 1:
        for job in jobs:
            _render_and_write(job)
            bar.update()
    else:
        with ProcessPoolExecutor(cfg.workers, mp_context=get_context("spawn")) as pool:
            for fut in as_completed([pool.submit(_render_and_write, j) for j in jobs]):
                fut.result()
                bar.update()
    bar.close()
    return root

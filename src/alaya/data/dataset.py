"""A dataset folder: ``dataset.json`` plus ``clips/<clip_id>.npz`` (see DESIGN.md).

``DatasetMeta`` mirrors ``dataset.json``; ``read_meta`` validates it field by field (errors name
``dataset.json`` and the field), ``write_meta`` writes it atomically with sorted keys.
``split_for_seed`` assigns a scene seed to train/val/test by hash, independent of how many
clips exist. ``ClipDataset`` lists and loads clips.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from alaya.data.clipio import read_clip
from alaya.data.contract import SCHEMA_VERSION
from alaya.data.meta_files import (MISSING, ListedFolder, MetaError, Problems, build_meta, is_int, is_num,
                                   need, parse_json, read_meta_file, write_meta_file)

META_FILE = "dataset.json"
CLIPS_DIR = "clips"
SPLITS = ("train", "val", "test")
CLIP_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass
class DatasetMeta:
    """Everything ``dataset.json`` holds.

    styles: style name -> {"description": str, "phrasings": [str, ...] (>= 3)}.
    materials: [{"id": 1-based int, "name", "albedo": sRGB [r, g, b] in 0..1, "roughness",
    "metallic", "emission": [r, g, b], ...extra keys allowed}], ids exactly 1..len.
    splits: "train"/"val"/"test" -> clip ids. clips: clip id -> {"seed", "split", "rig", ...}.
    actions: names of the ``actions`` columns, or None when clips carry no actions.
    """

    schema_version: int
    name: str
    height: int
    width: int
    fps: float
    frames: int
    styles: dict[str, dict]
    materials: list[dict]
    splits: dict[str, list[str]]
    clips: dict[str, dict]
    actions: list[str] | None
    generator: dict

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (deep copy)."""
        return json.loads(json.dumps(asdict(self)))

    @classmethod
    def from_dict(cls, data: Any, path: str = META_FILE) -> DatasetMeta:
        """Validate ``data`` (parsed JSON) and build the meta; raises ``MetaError`` (the first
        problem; its ``problems`` lists every one)."""
        return build_meta(cls, data, path, meta_problems)

    def to_json(self) -> str:
        """The canonical ``dataset.json`` text: sorted keys, indent 2, trailing newline."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, path: str = META_FILE) -> DatasetMeta:
        """Parse and validate ``dataset.json`` text."""
        return cls.from_dict(parse_json(text, path), path)


def _is_rgb(x: Any, lo: float, hi: float) -> bool:
    return isinstance(x, list) and len(x) == 3 and all(is_num(c) and lo <= c <= hi for c in x)


def _validate_style(name: str, style: Any, path: str) -> None:
    f = f"styles.{name}"
    need(bool(name), f, "empty style name", path)
    need(isinstance(style, dict), f, "expected an object", path)
    need(isinstance(style.get("description"), str), f"{f}.description", "expected a string",
         path)
    ph = style.get("phrasings")
    need(isinstance(ph, list) and all(isinstance(s, str) and s for s in ph),
         f"{f}.phrasings", "expected a list of non-empty strings", path)
    need(len(ph) >= 3, f"{f}.phrasings", f"expected at least 3 phrasings, got {len(ph)}",
         path)


def _validate_material(i: int, m: Any, path: str) -> None:
    f = f"materials[{i}]"
    need(isinstance(m, dict), f, "expected an object", path)
    need(m.get("id") == i + 1 and is_int(m.get("id")), f"{f}.id",
         f"ids must be 1, 2, ... in order; expected {i + 1}, got {m.get('id')!r}", path)
    need(isinstance(m.get("name"), str) and m["name"] != "", f"{f}.name",
         "expected a non-empty string", path)
    need(_is_rgb(m.get("albedo"), 0.0, 1.0), f"{f}.albedo", "expected [r, g, b] in 0..1",
         path)
    for key in ("roughness", "metallic"):
        need(is_num(m.get(key)) and 0 <= m[key] <= 1, f"{f}.{key}", "expected 0..1", path)
    need(_is_rgb(m.get("emission"), 0.0, float("inf")), f"{f}.emission",
         "expected [r, g, b] >= 0", path)


def _validate_split(split: str, ids: Any, clips: dict, seen: dict[str, str], path: str) -> None:
    need(isinstance(ids, list), f"splits.{split}", "expected a list of clip ids", path)
    for cid in ids:
        need(isinstance(cid, str) and cid in clips, f"splits.{split}",
             f"clip {cid!r} is not in 'clips'", path)
        need(cid not in seen, f"splits.{split}", f"clip {cid!r} is also in '{seen.get(cid)}'",
             path)
        seen[cid] = split


def _validate_clip(cid: str, info: Any, seen: dict[str, str] | None, path: str) -> None:
    f = f"clips.{cid}"
    need(bool(CLIP_ID_RE.match(cid)), f, "clip ids must match [A-Za-z0-9][A-Za-z0-9_.-]*",
         path)
    need(isinstance(info, dict), f, "expected an object", path)
    need(is_int(info.get("seed")), f"{f}.seed", "expected an integer", path)
    need(isinstance(info.get("rig"), str), f"{f}.rig", "expected a string", path)
    need(info.get("split") in SPLITS, f"{f}.split", f"expected one of {list(SPLITS)}", path)
    if seen is not None:                 # None: the splits are broken, reported on their own
        need(seen.get(cid) == info["split"], f"{f}.split",
             f"says {info['split']!r} but splits list it under {seen.get(cid)!r}", path)


def _clip_problems(meta: DatasetMeta, path: str, problems: Problems) -> None:
    if meta.clips is MISSING or not isinstance(meta.clips, dict):
        if meta.clips is not MISSING:
            problems.append(MetaError("clips", "expected an object", path))
        return
    seen: dict[str, str] | None = None
    if meta.splits is not MISSING:
        if not (isinstance(meta.splits, dict) and sorted(meta.splits) == sorted(SPLITS)):
            problems.append(MetaError("splits", f"expected exactly the keys {list(SPLITS)}", path))
        else:
            seen = {}
            before = len(problems)
            for split, ids in meta.splits.items():
                problems.check(_validate_split, split, ids, meta.clips, seen, path)
            if len(problems) > before:
                seen = None
    for cid, info in meta.clips.items():
        problems.check(_validate_clip, cid, info, seen, path)


def _positive_int(meta: DatasetMeta, key: str, path: str) -> None:
    value = getattr(meta, key)
    need(is_int(value) and value > 0, key, f"expected a positive integer, got {value!r}", path)


def meta_problems(meta: DatasetMeta, path: str = META_FILE) -> Problems:
    """Every problem of ``meta``, each a ``MetaError`` naming its field (none: valid). Fields
    are checked independently (each style, material, split and clip on its own); a field set
    to ``MISSING`` (absent from the file, reported by ``from_dict``) is skipped."""
    p = Problems()

    def has(key: str) -> bool:
        return getattr(meta, key) is not MISSING

    if has("schema_version"):
        p.check(need, meta.schema_version == SCHEMA_VERSION, "schema_version",
                f"expected {SCHEMA_VERSION}, got {meta.schema_version!r}", path)
    if has("name"):
        p.check(need, isinstance(meta.name, str) and meta.name != "", "name",
                "expected a non-empty string", path)
    for key in ("height", "width", "frames"):
        if has(key):
            p.check(_positive_int, meta, key, path)
    if has("fps"):
        p.check(need, is_num(meta.fps) and meta.fps > 0, "fps",
                f"expected a positive number, got {meta.fps!r}", path)
    if has("styles"):
        if isinstance(meta.styles, dict) and meta.styles:
            for name, style in meta.styles.items():
                p.check(_validate_style, name, style, path)
        else:
            p.append(MetaError("styles", "expected a non-empty object", path))
    if has("materials"):
        if isinstance(meta.materials, list):
            for i, m in enumerate(meta.materials):
                p.check(_validate_material, i, m, path)
        else:
            p.append(MetaError("materials", "expected a list", path))
    _clip_problems(meta, path, p)
    if has("actions"):
        p.check(need, meta.actions is None or (isinstance(meta.actions, list)
                                               and all(isinstance(a, str) for a in meta.actions)
                                               and len(meta.actions) > 0),
                "actions", "expected null or a non-empty list of column names", path)
    if has("generator"):
        p.check(need, isinstance(meta.generator, dict), "generator", "expected an object", path)
    return p


def write_meta(root: str | os.PathLike[str], meta: DatasetMeta) -> Path:
    """Validate and write ``root/dataset.json`` atomically; returns its path."""
    return write_meta_file(Path(root) / META_FILE, meta, meta_problems)


def read_meta(root: str | os.PathLike[str]) -> DatasetMeta:
    """Read and validate ``root/dataset.json``; raises ``MetaError`` naming the field."""
    return read_meta_file(Path(root) / META_FILE, DatasetMeta.from_json)


def _seed_position(seed: int) -> float:
    """A blake2b hash of the scene seed, uniform in [0, 1): what ``split_for_seed`` cuts."""
    digest = hashlib.blake2b(f"alaya-split:{int(seed)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2.0**64


def splits_for_seeds(seeds: dict[str, int]) -> dict[str, str]:
    """The split of every clip (clip id -> scene seed) of one dataset: ``split_for_seed``, except
    that a small dataset gets at least one test clip (2 clips or more) and one val clip (3 or
    more), and always keeps a train clip. Those taken come from the largest split that can spare
    one, the clips whose hash lies highest first, so the result is deterministic; a dataset whose
    hash split already has them (any but the smallest) keeps ``split_for_seed`` unchanged."""
    split = {cid: split_for_seed(seed) for cid, seed in seeds.items()}
    n = len(split)
    required = {"train": n >= 1, "test": n >= 2, "val": n >= 3}
    for want in ("test", "val"):
        counts = {s: sum(v == s for v in split.values()) for s in SPLITS}
        if not required[want] or counts[want]:
            continue
        donors = [s for s in SPLITS if s != want and (counts[s] > 1 or not required[s])
                  and counts[s] > 0]
        donor = max(donors, key=lambda s: (counts[s], s == "train"))
        cid = max((c for c, s in split.items() if s == donor),
                  key=lambda c: (_seed_position(seeds[c]), c))
        split[cid] = want
    return split


def split_for_seed(seed: int, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> str:
    """'train', 'val' or 'test' for a scene seed, by a blake2b hash of the seed.

    The same seed always lands in the same split, whatever else is in the dataset.
    """
    if len(fractions) != 3 or min(fractions) < 0 or abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(f"fractions must be 3 non-negative numbers summing to 1, got {fractions}")
    x = _seed_position(seed)
    if x < fractions[0]:
        return "train"
    if x < fractions[0] + fractions[1]:
        return "val"
    return "test" if fractions[2] > 0 else ("val" if fractions[1] > 0 else "train")


class ClipDataset(ListedFolder):
    """A dataset folder opened for reading: ids, paths and validated clip loads.

    Iterating yields clip ids (sorted); ``items`` yields (clip id, arrays).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.meta = read_meta(self.root)

    def ids(self, split: str | None = None) -> list[str]:
        """Clip ids of one split (in the order dataset.json lists them) or all (sorted)."""
        if split is None:
            return sorted(self.meta.clips)
        if split not in self.meta.splits:
            raise KeyError(f"unknown split {split!r}; expected one of {list(SPLITS)}")
        return list(self.meta.splits[split])

    def path(self, clip_id: str) -> Path:
        """Path of a clip listed in dataset.json."""
        if clip_id not in self.meta.clips:
            raise KeyError(f"{self.root / META_FILE}: no clip {clip_id!r}")
        return self.root / CLIPS_DIR / f"{clip_id}.npz"

    def load(self, clip_id: str, keys: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """Read one clip (all keys, or just ``keys``) with ``read_clip``'s checks."""
        return read_clip(self.path(clip_id), keys)

    def items(
        self, split: str | None = None, keys: Iterable[str] | None = None
    ) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
        """Yield (clip id, arrays) for every clip of ``split`` (all clips if None)."""
        keys = None if keys is None else list(keys)
        for cid in self.ids(split):
            yield cid, self.load(cid, keys)

    def _entries(self) -> dict[str, dict]:
        return self.meta.clips

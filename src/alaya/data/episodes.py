"""Episode files: gameplay for the world model (issue #7), see docs/episodes.md.

An episodes dataset is a folder::

    ROOT/episodes.json               # resolution, fps, styles + prompts, columns, source, episodes
    ROOT/episodes/<episode_id>.npz   # one file per episode (``EPISODE_ARRAYS``), written atomically

An episode of T frames at H x W in S styles holds ``rgb`` (S, T, H, W, 3), ``styles`` (S,) and
``actions`` (T, 8) (``alaya.data.actions``: ``actions[t]`` took frame t-1 to frame t, so
``actions[0]`` is all zero), and optionally the camera (``world_to_camera``, ``K``), the
frames' ``depth``, the game's ``events``, and for recorded environments the ``reward`` and the
source's raw ``env_action``. Episodes written before ``depth`` existed still load.

Episode files share the clip files' deterministic atomic writer and contract checks
(``clipio.write_npz``, ``clipio.check_contract`` with ``EPISODE_ARRAYS``); ``read_episode``
checks keys, dtypes, shapes and the semantics below before returning, and every error is a
``ClipError`` naming the file and the key. ``episodes.json`` is validated field by field
(``MetaError`` names the field) and written atomically. A file in ``episodes/`` that
``episodes.json`` does not list (a recorder killed between the two writes) is not part of the
dataset.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from alaya.data.actions import ACTION_COLUMNS, ACTION_DIM, ActionError, check_actions
from alaya.data.clipio import ClipError, check_contract, read_npz, write_npz
from alaya.data.dataset import CLIP_ID_RE, SPLITS, split_for_seed
from alaya.data.meta_files import (MISSING, ListedFolder, MetaError, Problems, build_meta, is_int, need,
                                   parse_json, read_meta_file, write_meta_file)

EPISODES_FILE = "episodes.json"
EPISODES_DIR = "episodes"
SCHEMA_VERSION = 1
KIND = "episodes"
# What the last action caused, counted per frame (the game's ``events``).
EVENT_COLUMNS = ("hit", "burst", "summoned", "landed")

# key -> (dtype, shape symbols), as ``contract.CLIP_ARRAYS``; E is the width of the raw action.
EPISODE_ARRAYS: dict[str, tuple[str, tuple[str, ...]]] = {
    "rgb": ("uint8", ("S", "T", "H", "W", "3")),
    "styles": ("<U", ("S",)),
    "actions": ("float32", ("T", str(ACTION_DIM))),
    "world_to_camera": ("float32", ("T", "4", "4")),
    "K": ("float32", ("3", "3")),
    "depth": ("float16", ("T", "H", "W")),     # metres along the view axis, 0 on background
    "events": ("uint8", ("T", str(len(EVENT_COLUMNS)))),
    "reward": ("float32", ("T",)),
    "env_action": ("float32", ("T", "E")),
}
EPISODE_REQUIRED = ("rgb", "styles", "actions")


def _fail_at(path: str | os.PathLike[str], key: str, bad: np.ndarray, what: str) -> None:
    """Raise a ClipError if any element of ``bad`` is set, with a count and the first index."""
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ClipError(path, key, f"{what} ({int(np.count_nonzero(bad))} values, first at {first})")


def check_episode(arrays: Mapping[str, np.ndarray],
                  path: str | os.PathLike[str] = "<memory>") -> dict[str, int]:
    """Check an episode's keys, dtypes, shapes and semantics; raise ``ClipError`` naming the key.

    Semantics: unique non-empty style names; ``actions`` pass ``check_actions`` (finite,
    navigation in [-1, 1], one-shot columns 0/1, at most one per frame) and row 0 is all zero;
    ``world_to_camera`` finite and rigid (orthonormal rotation, det > 0, last row 0 0 0 1);
    ``K`` finite with last row 0 0 1 and fx, fy > 0; ``depth`` finite and >= 0; ``reward`` and
    ``env_action`` finite.
    Returns the bound shape symbols (S, T, H, W, and E when present).
    """
    dims = check_contract(arrays, path, require=EPISODE_REQUIRED, spec=EPISODE_ARRAYS)
    styles = [str(s) for s in arrays["styles"]]
    if any(not s for s in styles) or len(set(styles)) != len(styles):
        raise ClipError(path, "styles", f"style names must be non-empty and unique, got {styles}")
    try:
        check_actions(arrays["actions"], "actions")
    except ActionError as err:
        raise ClipError(path, "actions", str(err).removeprefix("actions:").strip()) from None
    _fail_at(path, "actions", arrays["actions"][0] != 0,
             "frame 0 must be all zero (no action led to the first frame)")
    if "world_to_camera" in arrays:
        m = arrays["world_to_camera"].astype(np.float64)
        _fail_at(path, "world_to_camera", ~np.isfinite(m), "NaN or inf")
        _fail_at(path, "world_to_camera", np.abs(m[:, 3] - [0, 0, 0, 1]) > 1e-6,
                 "last row must be (0, 0, 0, 1)")
        R = m[:, :3, :3]
        _fail_at(path, "world_to_camera",
                 np.abs(R @ R.transpose(0, 2, 1) - np.eye(3)).max(axis=(1, 2)) > 1e-3,
                 "rotation part not orthonormal")
        _fail_at(path, "world_to_camera", np.linalg.det(R) <= 0, "rotation part is a reflection")
    if "K" in arrays:
        K = arrays["K"].astype(np.float64)
        _fail_at(path, "K", ~np.isfinite(K), "NaN or inf")
        if not np.array_equal(K[2], [0.0, 0.0, 1.0]) or not (K[0, 0] > 0 and K[1, 1] > 0):
            raise ClipError(path, "K", f"expected last row (0, 0, 1) and fx, fy > 0, got {K.tolist()}")
    for key in ("depth", "reward", "env_action"):
        if key in arrays:
            _fail_at(path, key, ~np.isfinite(arrays[key]), "NaN or inf")
    if "depth" in arrays:
        _fail_at(path, "depth", arrays["depth"] < 0, "negative depth (0 marks background)")
    return dims


def write_episode(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> Path:
    """``check_episode``, then write a deterministic ``.npz`` atomically (nothing on failure)."""
    path = Path(path)
    check_episode(arrays, path)
    write_npz(path, arrays)
    return path


def read_episode(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Load one episode file (``allow_pickle=False``) and ``check_episode`` it before returning.

    Unreadable or truncated files, unknown or missing keys, wrong dtypes or shapes and bad
    values all raise ``ClipError`` naming the file and the key.
    """
    arrays = read_npz(path, spec=EPISODE_ARRAYS, required=EPISODE_REQUIRED)
    check_episode(arrays, path)
    return arrays


# -- episodes.json ----------------------------------------------------------------------------

@dataclass
class EpisodesMeta:
    """Everything ``episodes.json`` holds.

    resolution: [H, W]. styles: style name -> prompt phrasings (>= 1). action_columns /
    event_columns: the column names of ``actions`` / ``events`` (fixed by this schema version).
    source: where the episodes come from ("alaya-game", "gymnasium:CartPole-v1", "video", ...).
    generator: free-form settings of whatever wrote them. episodes: id -> {"split", "frames",
    "seed" (int or null)}.
    """

    schema_version: int
    kind: str
    resolution: list[int]
    fps: float
    styles: dict[str, list[str]]
    action_columns: list[str]
    event_columns: list[str]
    source: str
    generator: dict
    episodes: dict[str, dict]

    @classmethod
    def new(cls, *, resolution: tuple[int, int], fps: float, styles: Mapping[str, list[str]],
            source: str, generator: Mapping[str, Any] | None = None) -> EpisodesMeta:
        """An empty dataset's meta with this schema's columns (validated)."""
        meta = cls(SCHEMA_VERSION, KIND, [int(v) for v in resolution], float(fps),
                   {k: list(v) for k, v in styles.items()}, list(ACTION_COLUMNS),
                   list(EVENT_COLUMNS), source, dict(generator or {}), {})
        validate_meta(meta, "<new episodes.json>")
        return meta

    def to_json(self) -> str:
        """The canonical text: sorted keys, indent 2, trailing newline."""
        return json.dumps(asdict(self), sort_keys=True, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, path: str = EPISODES_FILE) -> EpisodesMeta:
        """Parse and validate ``episodes.json`` text; raises ``MetaError`` naming the field."""
        return build_meta(cls, parse_json(text, path), path, meta_problems)


def _check_style(name: str, prompts: Any, path: str) -> None:
    need(bool(name), "styles", "empty style name", path)
    need(isinstance(prompts, list) and len(prompts) > 0
         and all(isinstance(q, str) and q.strip() for q in prompts), f"styles.{name}",
         f"expected a non-empty list of non-empty prompt strings, got {prompts!r}", path)


def _check_episode_entry(eid: str, info: Any, path: str) -> None:
    f = f"episodes.{eid}"
    need(bool(CLIP_ID_RE.match(eid)), f, "episode ids must match [A-Za-z0-9][A-Za-z0-9_.-]*",
         path)
    need(isinstance(info, dict) and sorted(info) == ["frames", "seed", "split"], f,
         f"expected exactly the keys frames, seed, split, got {info!r}", path)
    need(info["split"] in SPLITS, f"{f}.split",
         f"expected one of {list(SPLITS)}, got {info['split']!r}", path)
    need(is_int(info["frames"]) and info["frames"] > 0, f"{f}.frames",
         f"expected a positive integer, got {info['frames']!r}", path)
    need(info["seed"] is None or is_int(info["seed"]), f"{f}.seed",
         f"expected an integer or null, got {info['seed']!r}", path)


def meta_problems(meta: EpisodesMeta, path: str = EPISODES_FILE) -> Problems:
    """Every problem of ``meta``, each a ``MetaError`` naming its field (none: valid); each field,
    style and episode entry is checked on its own. Fields absent from the file are skipped."""
    p = Problems()

    def has(key: str) -> bool:
        return getattr(meta, key) is not MISSING

    checks = {
        "schema_version": (meta.schema_version == SCHEMA_VERSION,
                           f"expected {SCHEMA_VERSION}, got {meta.schema_version!r}"),
        "kind": (meta.kind == KIND, f"expected {KIND!r}, got {meta.kind!r}"),
        "resolution": (isinstance(meta.resolution, list) and len(meta.resolution) == 2
                       and all(is_int(v) and v > 0 for v in meta.resolution),
                       f"expected [H, W] with positive integers, got {meta.resolution!r}"),
        "fps": (isinstance(meta.fps, (int, float)) and not isinstance(meta.fps, bool)
                and bool(np.isfinite(meta.fps)) and meta.fps > 0,
                f"expected a positive number, got {meta.fps!r}"),
        "action_columns": (meta.action_columns == list(ACTION_COLUMNS),
                           f"expected {list(ACTION_COLUMNS)}, got {meta.action_columns!r}"),
        "event_columns": (meta.event_columns == list(EVENT_COLUMNS),
                          f"expected {list(EVENT_COLUMNS)}, got {meta.event_columns!r}"),
        "source": (isinstance(meta.source, str) and meta.source != "", "expected a non-empty string"),
        "generator": (isinstance(meta.generator, dict), "expected an object"),
    }
    for key, (ok, message) in checks.items():
        if has(key) and not ok:
            p.append(MetaError(key, message, path))
    if has("styles"):
        if not (isinstance(meta.styles, dict) and meta.styles):
            p.append(MetaError("styles", "expected a non-empty object", path))
        else:
            for name, prompts in meta.styles.items():
                p.check(_check_style, name, prompts, path)
    if has("episodes"):
        if not isinstance(meta.episodes, dict):
            p.append(MetaError("episodes", "expected an object", path))
        else:
            for eid, info in meta.episodes.items():
                p.check(_check_episode_entry, eid, info, path)
    return p


def validate_meta(meta: EpisodesMeta, path: str = EPISODES_FILE) -> None:
    """Check every field of ``meta``; raises ``MetaError`` naming the first bad one (its
    ``problems`` lists them all)."""
    meta_problems(meta, path).raise_first()


def write_meta(root: str | os.PathLike[str], meta: EpisodesMeta) -> Path:
    """Validate and write ``root/episodes.json`` atomically (temp file, fsync, rename)."""
    return write_meta_file(Path(root) / EPISODES_FILE, meta, meta_problems)


def read_meta(root: str | os.PathLike[str]) -> EpisodesMeta:
    """Read and validate ``root/episodes.json``; raises ``MetaError`` naming the field."""
    return read_meta_file(Path(root) / EPISODES_FILE, EpisodesMeta.from_json)


def episode_split(episode_id: str, seed: int | None = None) -> str:
    """The split of an episode: ``split_for_seed(seed)`` when it has a seed (episodes of one
    world seed share a split), else the same 80/10/10 blake2b split of the id."""
    if seed is not None:
        return split_for_seed(seed)
    digest = hashlib.blake2b(f"alaya-episode:{episode_id}".encode(), digest_size=8).digest()
    x = int.from_bytes(digest, "little") / 2.0**64
    return "train" if x < 0.8 else ("val" if x < 0.9 else "test")


# -- the dataset --------------------------------------------------------------------------------

class EpisodeDataset(ListedFolder):
    """An episodes folder opened for reading. Iterating yields episode ids (sorted)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.meta = read_meta(self.root)

    def ids(self, split: str | None = None) -> list[str]:
        """Sorted episode ids, of one split or all."""
        if split is not None and split not in SPLITS:
            raise KeyError(f"unknown split {split!r}; expected one of {list(SPLITS)}")
        return sorted(e for e, info in self.meta.episodes.items()
                      if split is None or info["split"] == split)

    def path(self, episode_id: str) -> Path:
        if episode_id not in self.meta.episodes:
            raise KeyError(f"{self.root / EPISODES_FILE}: no episode {episode_id!r}")
        return self.root / EPISODES_DIR / f"{episode_id}.npz"

    def load(self, episode_id: str) -> dict[str, np.ndarray]:
        """``read_episode``, plus agreement with episodes.json (resolution, frames, styles)."""
        path = self.path(episode_id)
        arrays = read_episode(path)
        _, T, H, W, _ = arrays["rgb"].shape
        if [H, W] != self.meta.resolution:
            raise ClipError(path, "rgb", f"{H}x{W} (HxW) but {EPISODES_FILE} says "
                            f"{self.meta.resolution[0]}x{self.meta.resolution[1]}")
        if T != self.meta.episodes[episode_id]["frames"]:
            raise ClipError(path, "rgb", f"{T} frames but {EPISODES_FILE} says "
                            f"{self.meta.episodes[episode_id]['frames']}")
        unknown = sorted(set(str(s) for s in arrays["styles"]) - set(self.meta.styles))
        if unknown:
            raise ClipError(path, "styles", f"{unknown} not among the styles of {EPISODES_FILE}")
        return arrays

    def items(self, split: str | None = None) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
        for eid in self.ids(split):
            yield eid, self.load(eid)

    def _entries(self) -> dict[str, dict]:
        return self.meta.episodes


def validate_episodes(root: str | os.PathLike[str]) -> list[str]:
    """Every problem of an episodes folder (every field of episodes.json at once, then each
    listed episode with ``read_episode``'s checks and its agreement with episodes.json; with a
    broken episodes.json, each file in episodes/ on its own); [] when valid."""
    try:
        ds = EpisodeDataset(root)
    except MetaError as e:              # every problem of episodes.json, then each file alone
        errors = [str(p) for p in e.problems]
        folder = Path(root) / EPISODES_DIR
        for path in sorted(folder.glob("*.npz")) if folder.is_dir() else ():
            if not path.name.startswith("."):
                try:
                    read_episode(path)
                except ClipError as err:
                    errors.append(str(err))
        return errors
    errors = []
    for eid in ds:
        try:
            ds.load(eid)
        except ClipError as e:
            errors.append(str(e))
    return errors

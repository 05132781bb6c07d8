"""Recording episodes frame by frame into an episodes folder (``episodes.py``).

::

    rec = EpisodeRecorder("data/play", styles={"day": ["a sunny day"]}, fps=30.0,
                          source="alaya-game", generator={"game": ...}, size=(64, 64))
    with rec.begin("ep00001", seed=1) as ep:      # finishes on success, discards on an exception
        for frame in ...:
            ep.add(rgb, action, world_to_camera=view, K=K, events=events, depth=depth)

Each ``add`` checks the frame at once (shape, dtype, style set, the action row, and that the
optional fields are given on every frame or on none), raising ``RecordError`` naming the episode,
the frame and the field. Nothing touches the disk before ``finish``, which writes the episode file
atomically and only then lists it in ``episodes.json`` (atomically too), both under an exclusive
lock on ``ROOT/.episodes.lock`` so several processes can record into one folder. A process killed
at any point leaves a valid dataset: at worst an unlisted ``.npz`` or a dot-file, neither of which
is part of it.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from alaya.data.actions import ACTION_DIM, ActionError, check_actions
from alaya.data.dataset import CLIP_ID_RE, SPLITS
from alaya.data.episodes import (
    EPISODES_DIR, EPISODES_FILE, EVENT_COLUMNS, EpisodesMeta, episode_split, read_meta,
    write_episode, write_meta,
)

LOCK_FILE = ".episodes.lock"


class RecordError(ValueError):
    """A frame (or episode) the recorder refuses; names the episode, the frame and the field."""


def fit_frame(rgb: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Centre-crop an (h, w, 3|4) or (h, w) uint8 image to the aspect of ``size`` = (H, W), then
    area-resize it (PIL ``BOX``) to (H, W, 3). Alpha is dropped, grey is repeated."""
    img = np.asarray(rgb)
    if img.dtype != np.uint8:
        raise RecordError(f"fit_frame: expected uint8 pixels, got {img.dtype}")
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=-1)
    if img.ndim != 3 or img.shape[-1] not in (3, 4):
        raise RecordError(f"fit_frame: expected an (h, w, 3) image, got shape {img.shape}")
    H, W = size
    h, w = img.shape[:2]
    ch, cw = (h, round(h * W / H)) if w * H >= h * W else (round(w * H / W), w)
    top, left = (h - ch) // 2, (w - cw) // 2
    img = np.ascontiguousarray(img[top:top + ch, left:left + cw, :3])
    if (ch, cw) == (H, W):
        return img
    return np.asarray(Image.fromarray(img).resize((W, H), Image.BOX))


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``root/.episodes.lock`` (released when the process dies)."""
    with open(root / LOCK_FILE, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class EpisodeRecorder:
    """Opens (or creates) an episodes folder for appending episodes.

    ``styles`` maps style name -> prompt phrasings; every recorded frame has one image per style,
    in this order. ``size`` is (H, W) or one int for square frames. An existing folder must have
    the same resolution, fps, styles and source (else ``RecordError`` says which differs); its
    ``generator`` is kept.
    """

    def __init__(self, root: str | os.PathLike[str], styles: Mapping[str, list[str]], fps: float,
                 source: str, generator: Mapping[str, Any] | None = None,
                 size: int | tuple[int, int] = (64, 64)) -> None:
        self.root = Path(root)
        H, W = (size, size) if isinstance(size, int) else size
        new = EpisodesMeta.new(resolution=(H, W), fps=fps, styles=styles, source=source,
                               generator=generator)
        self.size = (H, W)
        self.styles = list(new.styles)
        self.fps = new.fps
        self._open: set[str] = set()
        (self.root / EPISODES_DIR).mkdir(parents=True, exist_ok=True)
        with _locked(self.root):
            if not (self.root / EPISODES_FILE).exists():
                write_meta(self.root, new)
                return
            old = read_meta(self.root)
        for field in ("resolution", "fps", "styles", "source"):
            if getattr(old, field) != getattr(new, field):
                raise RecordError(f"{self.root / EPISODES_FILE}: field '{field}' is "
                                  f"{getattr(old, field)!r}, but this recorder has "
                                  f"{getattr(new, field)!r}; record into another folder")

    def begin(self, episode_id: str, seed: int | None = None,
              split: str | None = None) -> EpisodeWriter:
        """Start an episode. ``split`` defaults to ``episode_split(episode_id, seed)``."""
        if not isinstance(episode_id, str) or not CLIP_ID_RE.match(episode_id):
            raise RecordError(f"episode id {episode_id!r} must match [A-Za-z0-9][A-Za-z0-9_.-]*")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise RecordError(f"episode '{episode_id}': seed must be an integer or None, got {seed!r}")
        if split is not None and split not in SPLITS:
            raise RecordError(f"episode '{episode_id}': split must be one of {list(SPLITS)}, "
                              f"got {split!r}")
        if episode_id in self._open:
            raise RecordError(f"episode '{episode_id}' is already being recorded")
        if episode_id in read_meta(self.root).episodes:
            raise RecordError(f"episode '{episode_id}' is already in {self.root / EPISODES_FILE}")
        self._open.add(episode_id)
        seed = None if seed is None else int(seed)
        return EpisodeWriter(self, episode_id, seed, split or episode_split(episode_id, seed))

    def _commit(self, writer: EpisodeWriter, arrays: dict[str, np.ndarray]) -> Path:
        """Write the episode file, then list it in episodes.json, under the folder's lock."""
        path = self.root / EPISODES_DIR / f"{writer.episode_id}.npz"
        with _locked(self.root):
            meta = read_meta(self.root)
            if writer.episode_id in meta.episodes:
                raise RecordError(f"episode '{writer.episode_id}' was added to "
                                  f"{self.root / EPISODES_FILE} by another writer")
            write_episode(path, arrays)
            meta.episodes[writer.episode_id] = {
                "split": writer.split, "frames": int(arrays["rgb"].shape[1]), "seed": writer.seed}
            write_meta(self.root, meta)
        return path


# optional per-frame fields, in the order ``add`` takes them
OPTIONAL_FIELDS = ("world_to_camera", "K", "events", "reward", "env_action", "depth")
DEPTH_MAX = float(np.finfo(np.float16).max)     # depth is stored as float16


class EpisodeWriter:
    """One episode being recorded (from ``EpisodeRecorder.begin``); frames live in memory until
    ``finish``."""

    def __init__(self, recorder: EpisodeRecorder, episode_id: str, seed: int | None,
                 split: str) -> None:
        self.recorder, self.episode_id, self.seed, self.split = recorder, episode_id, seed, split
        self._frames: dict[str, list[np.ndarray]] = {"rgb": [], "actions": []}
        self._has: dict[str, bool] = {}
        self._closed: str | None = None
        self.path: Path | None = None          # the episode file, once finished

    @property
    def frames(self) -> int:
        return len(self._frames["rgb"])

    def _error(self, field: str, message: str) -> RecordError:
        return RecordError(f"episode '{self.episode_id}' frame {self.frames}: field '{field}': "
                           f"{message}")

    def add(self, rgb: np.ndarray | Mapping[str, np.ndarray], action=None, world_to_camera=None,
            K=None, events=None, *, reward: float | None = None, env_action=None,
            depth=None) -> None:
        """Append frame t = ``self.frames``. ``rgb`` is (S, H, W, 3) uint8 in the recorder's style
        order or {style: (H, W, 3) uint8}; ``action`` the (8,) row that led here (None or zeros
        at frame 0); ``world_to_camera`` (4, 4) rigid; ``K`` (3, 3), the same on every frame;
        ``events`` (4,) counts or {event: count}; ``reward`` a number; ``env_action`` a flat array
        of one width; ``depth`` (H, W) metres along the view axis, >= 0 (0 = background), stored
        as float16. Optional fields must be given on every frame or on none."""
        if self._closed:
            raise RecordError(f"episode '{self.episode_id}' was {self._closed}; begin a new one")
        t = self.frames
        values = {"rgb": self._check_rgb(rgb), "actions": self._check_action(action)}
        given = dict(zip(OPTIONAL_FIELDS, (world_to_camera, K, events, reward, env_action, depth)))
        for field, value in given.items():
            if t > 0 and self._has[field] != (value is not None):
                raise self._error(field, "given at frame 0, so every frame needs it"
                                  if self._has[field] else
                                  "not given at frame 0, so no frame may have it")
            if value is not None:
                values[field] = getattr(self, f"_check_{field}")(value)
        if t == 0:
            self._has = {field: value is not None for field, value in given.items()}
        for field, value in values.items():
            self._frames.setdefault(field, []).append(value)

    def _check_rgb(self, rgb) -> np.ndarray:
        styles, (H, W) = self.recorder.styles, self.recorder.size
        if isinstance(rgb, Mapping):
            if set(rgb) != set(styles):
                raise self._error("rgb", f"styles {sorted(rgb)} but the recorder has {styles}")
            for name in styles:
                self._check_image(f"rgb[{name}]", rgb[name], (H, W, 3))
            return np.stack([rgb[name] for name in styles])
        self._check_image("rgb", rgb, (len(styles), H, W, 3), f" for styles {styles}")
        return rgb.copy()

    def _check_image(self, field: str, img, shape: tuple[int, ...], note: str = "") -> None:
        if not isinstance(img, np.ndarray):
            raise self._error(field, f"expected a numpy array, got {type(img).__name__}")
        if img.dtype != np.uint8:
            raise self._error(field, f"expected dtype uint8, got {img.dtype}")
        if img.shape != shape:
            raise self._error(field, f"expected shape {shape}{note}, got {img.shape}")

    def _check_action(self, action) -> np.ndarray:
        if action is None:
            if self.frames > 0:
                raise self._error("action", "required after frame 0")
            return np.zeros(ACTION_DIM, np.float32)
        try:
            row = check_actions(action, "action")
        except ActionError as err:
            raise self._error("action", str(err).removeprefix("action:").strip()) from None
        if row.shape != (ACTION_DIM,):
            raise self._error("action", f"expected one row of shape ({ACTION_DIM},), got {row.shape}")
        if self.frames == 0 and row.any():
            raise self._error("action", "must be all zero at frame 0 (no action led to the "
                              "first frame); pass None")
        return row.copy()

    def _numbers(self, field: str, value, shape: tuple[int, ...] | None) -> np.ndarray:
        try:
            a = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise self._error(field, f"not numeric ({err})") from None
        if shape is not None and a.shape != shape:
            raise self._error(field, f"expected shape {shape}, got {a.shape}")
        if not np.isfinite(a).all():
            raise self._error(field, "NaN or inf")
        return a

    def _check_world_to_camera(self, value) -> np.ndarray:
        m = self._numbers("world_to_camera", value, (4, 4))
        R = m[:3, :3]
        if (np.abs(m[3] - [0, 0, 0, 1]).max() > 1e-6 or np.abs(R @ R.T - np.eye(3)).max() > 1e-3
                or np.linalg.det(R) <= 0):
            raise self._error("world_to_camera", "not a rigid view matrix (rotation orthonormal "
                              "with det > 0, last row 0 0 0 1)")
        return m.astype(np.float32)

    def _check_K(self, value) -> np.ndarray:
        K = self._numbers("K", value, (3, 3)).astype(np.float32)
        if self.frames > 0 and not np.array_equal(K, self._frames["K"][0]):
            raise self._error("K", "differs from frame 0 (an episode has one K)")
        return K

    def _check_events(self, value) -> np.ndarray:
        if isinstance(value, Mapping):
            unknown = sorted(set(value) - set(EVENT_COLUMNS))
            if unknown:
                raise self._error("events", f"unknown events {unknown}; known: {list(EVENT_COLUMNS)}")
            value = [value.get(name, 0) for name in EVENT_COLUMNS]
        e = self._numbers("events", value, (len(EVENT_COLUMNS),))
        if (e != np.round(e)).any() or (e < 0).any() or (e > 255).any():
            raise self._error("events", f"counts must be integers in 0..255, got {e.tolist()}")
        return e.astype(np.uint8)

    def _check_reward(self, value) -> np.ndarray:
        if isinstance(value, bool):
            raise self._error("reward", f"expected a number, got {value!r}")
        return self._numbers("reward", value, ()).astype(np.float32)

    def _check_env_action(self, value) -> np.ndarray:
        a = self._numbers("env_action", value, None).reshape(-1)
        if a.size == 0:
            raise self._error("env_action", "empty")
        if self.frames > 0 and a.shape != self._frames["env_action"][0].shape:
            raise self._error("env_action", f"width {a.size} but frame 0 had "
                              f"{self._frames['env_action'][0].size}")
        return a.astype(np.float32)

    def _check_depth(self, value) -> np.ndarray:
        d = self._numbers("depth", value, self.recorder.size)
        if (d < 0).any():
            raise self._error("depth", "negative depth (0 marks background)")
        if (d > DEPTH_MAX).any():
            raise self._error("depth", f"beyond float16's range ({DEPTH_MAX:g}); use 0 for background")
        return d.astype(np.float16)

    def finish(self) -> Path:
        """Write the episode (atomically) and list it in episodes.json; returns its path."""
        if self._closed:
            raise RecordError(f"episode '{self.episode_id}' was {self._closed}")
        if self.frames == 0:
            raise RecordError(f"episode '{self.episode_id}': no frames to write")
        f = self._frames
        arrays = {"rgb": np.stack(f["rgb"], axis=1),              # (S, T, H, W, 3)
                  "styles": np.array(self.recorder.styles),
                  "actions": np.stack(f["actions"])}
        for field in OPTIONAL_FIELDS:
            if self._has.get(field):
                arrays[field] = f[field][0] if field == "K" else np.stack(f[field])
        try:
            path = self.recorder._commit(self, arrays)
        except BaseException:
            self._close("abandoned by a failed finish")
            raise
        self._close("finished")
        self.path = path
        return path

    def discard(self) -> None:
        """Drop the frames; nothing was written."""
        if not self._closed:
            self._close("discarded")

    def _close(self, how: str) -> None:
        self._closed = how
        self._frames = {}
        self.recorder._open.discard(self.episode_id)

    def __enter__(self) -> EpisodeWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None and not self._closed:
            self.finish()
        else:
            self.discard()

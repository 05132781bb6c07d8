"""Importing game captures: a video plus a per-frame camera-pose log -> one episode.

Game-capture datasets ship a video and a pose per frame. The pose log is either

* a CSV with the header ``frame,x,y,z,qw,qx,qy,qz``: frame t's camera-to-world transform as the
  camera position (x, y, z) and a unit Hamilton quaternion (w, x, y, z) rotating camera axes into
  world axes; frames numbered 0..T-1 in order; or
* a ``.npy`` of (T, 4, 4) world-to-camera matrices.

Both use OpenGL camera axes (the camera looks down its -z, y up) in a z-up world, as the engine.

The navigation actions are the inverse of the game's (``alaya.engine.game``: turn and pitch
first, then the move along the new heading), from consecutive poses with
``alaya.data.actions.NavigationScale``::

    heading(t) = yaw of the view direction (counter-clockwise from +x), pitch(t) its elevation
    forward[t] = (p[t] - p[t-1])_xy . (cos yaw[t], sin yaw[t])  / (move_speed / fps)
    strafe[t]  = (p[t] - p[t-1])_xy . (sin yaw[t], -cos yaw[t]) / (move_speed / fps)
    turn[t]    = wrap(yaw[t] - yaw[t-1]) / (turn_rate / fps)       (+ = left)
    pitch[t]   = (pitch[t] - pitch[t-1]) / (pitch_rate / fps)      (+ = up)

clipped to [-1, 1] (``VideoImport.clipped`` counts the clipped values per column); vertical
motion (jumps, stairs) is not an action, ``actions[0]`` is zero and the one-shot columns are 0.
Frames are centre-cropped to a square and area-resized (``recorder.fit_frame``).
``export_video`` is the inverse: an episode file -> video + pose CSV.
"""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import imageio.v3 as iio
import numpy as np

from alaya.data.actions import ACTION_DIM, NAVIGATION, NavigationScale
from alaya.data.clipio import ClipError
from alaya.io import atomic_path, atomic_write_text
from alaya.data.episodes import EPISODES_FILE, read_episode, read_meta
from alaya.data.recorder import EpisodeRecorder, fit_frame

POSE_COLUMNS = ("frame", "x", "y", "z", "qw", "qx", "qy", "qz")
QUATERNION_TOLERANCE = 1e-3        # | |q| - 1 | above this is an error, not rounding


class VideoImportError(ValueError):
    """A video or pose log that cannot be imported; names the file (and line or frame)."""


@dataclass
class VideoImport:
    """What ``import_video`` did: the episode file, its frames and fps, and how many navigation
    values were clipped to [-1, 1] per column (motion faster than the ``NavigationScale``)."""
    path: Path
    frames: int
    fps: float
    clipped: dict[str, int]


# -- poses ------------------------------------------------------------------------------------

def quaternion_to_matrix(q: np.ndarray) -> np.ndarray:
    """(..., 4) unit quaternions (w, x, y, z) -> (..., 3, 3) rotation matrices."""
    w, x, y, z = np.moveaxis(np.asarray(q, np.float64), -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], -2)


def matrix_to_quaternion(R: np.ndarray) -> np.ndarray:
    """A (3, 3) rotation matrix -> unit quaternion (w, x, y, z) with w >= 0 (Shepperd's method)."""
    R = np.asarray(R, np.float64)
    tr = np.trace(R)
    if tr > 0:
        s = 2 * math.sqrt(tr + 1)
        q = [s / 4, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s]
    elif R[0, 0] > R[1, 1] and R[0, 0] > R[2, 2]:
        s = 2 * math.sqrt(1 + R[0, 0] - R[1, 1] - R[2, 2])
        q = [(R[2, 1] - R[1, 2]) / s, s / 4, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s]
    elif R[1, 1] > R[2, 2]:
        s = 2 * math.sqrt(1 + R[1, 1] - R[0, 0] - R[2, 2])
        q = [(R[0, 2] - R[2, 0]) / s, (R[0, 1] + R[1, 0]) / s, s / 4, (R[1, 2] + R[2, 1]) / s]
    else:
        s = 2 * math.sqrt(1 + R[2, 2] - R[0, 0] - R[1, 1])
        q = [(R[1, 0] - R[0, 1]) / s, (R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, s / 4]
    q = np.array(q) / np.linalg.norm(q)
    return -q if q[0] < 0 else q


def invert_rigid(m: np.ndarray) -> np.ndarray:
    """(..., 4, 4) rigid transforms -> their inverses (R^T, -R^T t)."""
    m = np.asarray(m, np.float64)
    out = np.zeros_like(m)
    Rt = np.swapaxes(m[..., :3, :3], -1, -2)
    out[..., :3, :3] = Rt
    out[..., :3, 3] = -(Rt @ m[..., :3, 3, None])[..., 0]
    out[..., 3, 3] = 1.0
    return out


def _read_pose_csv(path: Path) -> np.ndarray:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError) as e:
        raise VideoImportError(f"{path}: cannot read ({e})") from e
    header = [c.strip() for c in rows[0]] if rows else []
    if header != list(POSE_COLUMNS):
        raise VideoImportError(f"{path}: line 1: header must be {','.join(POSE_COLUMNS)}, "
                               f"got {','.join(header) or '(empty file)'}")
    c2w = np.zeros((len(rows) - 1, 4, 4))
    for t, row in enumerate(rows[1:]):
        where = f"{path}: line {t + 2}"
        if len(row) != len(POSE_COLUMNS):
            raise VideoImportError(f"{where}: expected {len(POSE_COLUMNS)} values, got {len(row)}")
        try:
            values = [float(v) for v in row]
        except ValueError as e:
            raise VideoImportError(f"{where}: not a number ({e})") from None
        for name, v in zip(POSE_COLUMNS, values):
            if not math.isfinite(v):
                raise VideoImportError(f"{where}: column '{name}' is {v} (must be finite)")
        if values[0] != t:
            raise VideoImportError(f"{where}: column 'frame' is {row[0]}, expected {t} "
                                   "(frames 0..T-1 in order)")
        q = np.array(values[4:])
        norm = float(np.linalg.norm(q))
        if abs(norm - 1) > QUATERNION_TOLERANCE:
            raise VideoImportError(f"{where}: quaternion (qw, qx, qy, qz) has norm {norm:.6g}, "
                                   f"not 1 (tolerance {QUATERNION_TOLERANCE})")
        c2w[t, :3, :3] = quaternion_to_matrix(q / norm)
        c2w[t, :3, 3] = values[1:4]
        c2w[t, 3, 3] = 1.0
    if len(c2w) == 0:
        raise VideoImportError(f"{path}: no poses after the header")
    return invert_rigid(c2w)


def _read_pose_npy(path: Path) -> np.ndarray:
    try:
        m = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise VideoImportError(f"{path}: not a readable .npy array ({type(e).__name__}: {e})") from e
    if not isinstance(m, np.ndarray) or m.ndim != 3 or m.shape[1:] != (4, 4) or len(m) == 0:
        raise VideoImportError(f"{path}: expected (T, 4, 4) world_to_camera matrices, "
                               f"got {getattr(m, 'shape', type(m).__name__)}")
    m = m.astype(np.float64)
    bad = ~np.isfinite(m).all(axis=(1, 2))
    R = m[:, :3, :3]
    bad |= np.abs(R @ R.transpose(0, 2, 1) - np.eye(3)).max(axis=(1, 2)) > 1e-3
    bad |= np.linalg.det(R) <= 0
    bad |= np.abs(m[:, 3] - [0, 0, 0, 1]).max(axis=1) > 1e-6
    if bad.any():
        raise VideoImportError(f"{path}: frame {int(np.flatnonzero(bad)[0])}: not a finite rigid "
                               f"view matrix ({int(bad.sum())} such frames)")
    return m


def read_poses(path: str | os.PathLike[str]) -> np.ndarray:
    """A pose log (``.csv`` or ``.npy``, see the module doc) -> (T, 4, 4) float64 world_to_camera."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        return _read_pose_csv(path)
    if path.suffix.lower() == ".npy":
        return _read_pose_npy(path)
    raise VideoImportError(f"{path}: pose logs must be .csv or .npy")


def write_pose_csv(path: str | os.PathLike[str], world_to_camera: np.ndarray) -> Path:
    """(T, 4, 4) world_to_camera -> a pose CSV (camera-to-world position + quaternion), atomically."""
    c2w = invert_rigid(world_to_camera)
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(POSE_COLUMNS)
    for t, m in enumerate(c2w):
        out.writerow([t, *(f"{v:.9g}" for v in (*m[:3, 3], *matrix_to_quaternion(m[:3, :3])))])
    return atomic_write_text(path, buf.getvalue())


def actions_from_poses(world_to_camera: np.ndarray, fps: float,
                       scale: NavigationScale = NavigationScale()) -> tuple[np.ndarray, dict[str, int]]:
    """(T, 4, 4) world_to_camera -> ((T, 8) float32 action rows, clipped count per column),
    by the formulas of the module doc. A camera looking straight up or down has no heading;
    its yaw is then taken from the camera's up vector."""
    c2w = invert_rigid(world_to_camera)
    pos = c2w[:, :3, 3]
    look = -c2w[:, :3, 2]                                     # (T, 3) view direction
    flat = np.hypot(look[:, 0], look[:, 1])
    up = c2w[:, :3, 1]
    yaw = np.where(flat > 1e-6, np.arctan2(look[:, 1], look[:, 0]),
                   np.arctan2(up[:, 1] * -np.sign(look[:, 2]), up[:, 0] * -np.sign(look[:, 2])))
    pitch = np.arctan2(look[:, 2], flat)
    d = np.diff(pos[:, :2], axis=0)                           # (T-1, 2)
    c, s = np.cos(yaw[1:]), np.sin(yaw[1:])
    step = scale.move_speed / fps
    nav = np.stack([
        (d[:, 0] * c + d[:, 1] * s) / step,
        (d[:, 0] * s - d[:, 1] * c) / step,
        np.remainder(np.diff(yaw) + np.pi, 2 * np.pi) - np.pi,
        np.diff(pitch),
    ], axis=1)
    nav[:, 2] /= scale.turn_rate / fps
    nav[:, 3] /= scale.pitch_rate / fps
    over = np.abs(nav) > 1.0 + 1e-3      # float32 poses: tiny overshoots are not clipping
    clipped = {name: int(n) for name, n in zip(NAVIGATION, over.sum(axis=0))}
    actions = np.zeros((len(pos), ACTION_DIM), np.float32)
    actions[1:, :len(NAVIGATION)] = np.clip(nav, -1.0, 1.0)
    return actions, clipped


# -- video ------------------------------------------------------------------------------------

def _video_fps(path: Path) -> float | None:
    try:
        meta = iio.immeta(path)
    except (OSError, ValueError, RuntimeError, KeyError):    # no metadata: fps unknown
        return None
    if meta.get("fps") and math.isfinite(meta["fps"]):
        return float(meta["fps"])
    if meta.get("duration"):                                  # GIF: ms per frame
        return 1000.0 / float(meta["duration"])
    return None


def import_video(video: str | os.PathLike[str], poses: str | os.PathLike[str],
                 root: str | os.PathLike[str], episode_id: str, size: int = 64,
                 fps: float | None = None, style: str = "video",
                 scale: NavigationScale = NavigationScale(), prompts: list[str] | None = None,
                 seed: int | None = None) -> VideoImport:
    """Import one video (mp4, gif, whatever imageio reads) and its pose log into the episodes
    folder ``root`` as ``episode_id``. ``fps`` defaults to the video's (GIF frame durations are
    rounded to 10 ms, so pass it for GIFs). The frame count must equal the pose count."""
    video, poses = Path(video), Path(poses)
    w2c = read_poses(poses)
    frames = []
    try:
        for frame in iio.imiter(video):
            frames.append(fit_frame(np.asarray(frame), (size, size)))
    except FileNotFoundError:
        raise VideoImportError(f"{video}: file not found") from None
    except (OSError, ValueError, RuntimeError) as e:
        raise VideoImportError(f"{video}: cannot decode ({type(e).__name__}: {e})") from e
    if len(frames) != len(w2c):
        raise VideoImportError(f"{video} has {len(frames)} frames but the pose log {poses} has "
                               f"{len(w2c)} poses; they must match one to one")
    fps = fps or _video_fps(video)
    if not fps or not math.isfinite(fps) or fps <= 0:
        raise VideoImportError(f"{video}: frame rate unknown ({fps!r}); pass fps=")
    actions, clipped = actions_from_poses(w2c, fps, scale)
    recorder = EpisodeRecorder(
        root, styles={style: prompts or ["first-person gameplay footage"]}, fps=fps,
        source="video", size=size,
        generator={"importer": "alaya.data.video_import", "navigation_scale": asdict(scale),
                   "resize": "centre-crop to square, PIL BOX"})
    with recorder.begin(episode_id, seed=seed) as ep:
        for t, frame in enumerate(frames):
            ep.add(frame[None], None if t == 0 else actions[t], world_to_camera=w2c[t])
    return VideoImport(path=ep.path, frames=len(frames), fps=float(fps), clipped=clipped)


def export_video(episode_npz: str | os.PathLike[str], out_video: str | os.PathLike[str],
                 out_poses_csv: str | os.PathLike[str], style_index: int = 0,
                 fps: float | None = None, quality: float = 9.0) -> None:
    """Write one style of an episode as a video (by the suffix: .mp4, .gif, ...) and its poses as
    a pose CSV, the inverse of ``import_video``. ``fps`` defaults to the fps of the folder's
    episodes.json. mp4 (H.264, yuv420p) needs even frame sizes; ``quality`` is imageio's 0..10."""
    path, out_video = Path(episode_npz), Path(out_video)
    arrays = read_episode(path)
    if "world_to_camera" not in arrays:
        raise ClipError(path, "world_to_camera", "missing: the episode has no camera poses")
    styles = [str(s) for s in arrays["styles"]]
    if not 0 <= style_index < len(styles):
        raise ClipError(path, "styles", f"style_index {style_index} out of range for {styles}")
    if fps is None:
        fps = read_meta(path.parent.parent).fps if (path.parent.parent / EPISODES_FILE).exists() else None
        if fps is None:
            raise VideoImportError(f"{path}: no {EPISODES_FILE} beside its folder; pass fps=")
    frames = arrays["rgb"][style_index]                       # (T, H, W, 3)
    suffix = out_video.suffix.lower()
    if suffix == ".gif":
        kwargs = {"duration": 1000.0 / fps, "loop": 0}
    else:
        if frames.shape[1] % 2 or frames.shape[2] % 2:
            raise VideoImportError(f"{out_video}: {suffix} (yuv420p) needs even frame sizes, "
                                   f"got {frames.shape[1]}x{frames.shape[2]}; write a .gif")
        kwargs = {"fps": fps, "codec": "libx264", "quality": quality, "macro_block_size": 2}
    with atomic_path(out_video, keep_suffix=True) as tmp:
        iio.imwrite(tmp, frames, **kwargs)
    write_pose_csv(out_poses_csv, arrays["world_to_camera"])

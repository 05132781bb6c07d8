"""Import G-buffers rendered elsewhere into the clip contract (see ``docs/import.md``).

Input: a folder ``SRC`` holding ``gbuffers.json`` and, per channel, a sub-folder of per-frame
files (``.png`` 8/16-bit, ``.npy``, or ``.exr`` with the optional OpenEXR module; frames in
sorted file-name order) or one stacked array of every frame (``{"file": "depth.npy"}``, or
``{"file": "all.npz", "key": "depth"}``; ``framefiles.open_channel``)::

    {"fps": 30, "width": 128, "height": 128, "clip_length": 16,
     "camera": {"K": [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]   # or "fov_y_degrees": 60
                "world_to_camera": "poses.json"},  # N OpenGL view matrices; omitted: identity
     "channels": {
       "depth": {"dir": "depth", "units": "metres", "kind": "linear", "near": 0.1, "far": 100},
       "normal": {"dir": "normal", "space": "camera", "encoding": "unsigned"},
       "albedo": {"dir": "albedo"}, "roughness": {"dir": "roughness"},
       "metallic": {"dir": "metallic"}, "material": {"dir": "material"},
       "instance": {"dir": "instance"},
       "motion": {"dir": "motion", "convention": "backward", "units": "pixels"},
       "rgb": {"dir": "rgb", "style": "imported"}}}   # or a list of such, one per style

Only ``depth`` and at least one ``rgb`` style are required; ``"mask": {"dir": ...}`` gives the
geometry explicitly, ``camera.up_axis`` (or ``up_axis=``) "y" turns a y-up world's poses into the
contract's z-up one (``Y_UP_TO_Z_UP``), and a given motion's background must be the flow of
points at infinity (computed where it is NaN, or everywhere with ``"background": "compute"``;
``gbuffer_convert.settle_background_motion``). Defaults: mask = valid depth;
normals derived from depth (``geometry.normals_from_depth``); roughness/metallic 0;
material and instance 1 on geometry; motion = static-scene reprojection between the camera
poses (``geometry.reproject_flow``; zero when the poses are identity). The N frames are cut
into N // clip_length clips (clip_length defaults to N; leftover frames are dropped), each
clip's first frame gets zero motion, and ``dataset.json`` is written with one material per
id (mean albedo/roughness/metallic of its pixels). Errors name the file, channel and frame.
"""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path

import numpy as np

from alaya.data.clipio import check_invariants, write_clip
from alaya.data.contract import SCHEMA_VERSION
from alaya.data.dataset import CLIPS_DIR, META_FILE, DatasetMeta, splits_for_seeds, write_meta
from alaya.data.framefiles import GBufferImportError, open_channel, to_u8
from alaya.data.gbuffer_convert import (
    backward_from_forward, colour_u8, convert_depth, convert_ids, convert_mask, convert_motion,
    convert_normal, rotation_degrees, settle_background_motion, single_channel,
)
from alaya.data.geometry import normals_from_depth, reproject_flow

SPEC_FILE = "gbuffers.json"
CHANNELS = ("depth", "mask", "normal", "albedo", "roughness", "metallic", "material", "instance",
            "motion", "rgb")
UP_AXES = ("z", "y")
# A y-up source world into the contract's z-up one: (x, y, z) -> (x, -z, y), a +90 degree turn
# about x (source up +y becomes +z, the source's -z forward becomes +y).
Y_UP_TO_Z_UP = np.array([[1.0, 0, 0, 0], [0, 0, -1, 0], [0, 1, 0, 0], [0, 0, 0, 1]])


def _load_spec(src: Path, require_rgb: bool = True) -> dict:
    path = src / SPEC_FILE
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise GBufferImportError(path, f"cannot read ({e})") from e
    for key in ("width", "height"):
        if not (isinstance(spec.get(key), int) and spec[key] > 0):
            raise GBufferImportError(path, f"'{key}' must be a positive integer")
    if not (isinstance(spec.get("fps"), (int, float)) and spec["fps"] > 0):
        raise GBufferImportError(path, "'fps' must be a positive number")
    channels = spec.get("channels")
    if not isinstance(channels, dict) or "depth" not in channels:
        raise GBufferImportError(path, "'channels' must be an object with at least 'depth'")
    for name in channels:
        if name not in CHANNELS:
            raise GBufferImportError(path, f"unknown channel (expected {list(CHANNELS)})",
                                     channel=name)
    if require_rgb and not channels.get("rgb"):
        raise GBufferImportError(path, "at least one rgb style is required", channel="rgb")
    return spec


def _intrinsics(camera: dict, H: int, W: int, path: Path) -> np.ndarray:
    if "K" in camera:
        K = np.asarray(camera["K"], dtype=np.float64)
        if K.shape != (3, 3):
            raise GBufferImportError(path, f"camera.K must be 3x3, got shape {K.shape}")
        return K
    if "fov_y_degrees" in camera:
        fy = H / 2 / np.tan(np.radians(float(camera["fov_y_degrees"])) / 2)
        return np.array([[fy, 0, W / 2], [0, fy, H / 2], [0, 0, 1]])
    raise GBufferImportError(path, "camera needs 'K' or 'fov_y_degrees'")


def _poses(camera: dict, src: Path, n: int) -> np.ndarray:
    if camera.get("world_to_camera") is None:
        return np.repeat(np.eye(4)[None], n, axis=0)
    path = src / camera["world_to_camera"]
    try:
        w2c = np.asarray(json.loads(path.read_text(encoding="utf-8")), dtype=np.float64)
    except (OSError, ValueError) as e:
        raise GBufferImportError(path, f"cannot read poses ({e})") from e
    if w2c.shape != (n, 4, 4):
        raise GBufferImportError(path, f"expected {n} 4x4 matrices (one per frame), "
                                 f"got shape {w2c.shape}")
    return w2c


def _up_axis(camera: dict, override: str | None, path: Path) -> str:
    up = override if override is not None else camera.get("up_axis", "z")
    if up not in UP_AXES:
        raise GBufferImportError(path, f"up axis must be one of {list(UP_AXES)}, got {up!r}")
    return up


class _Source:
    """The parsed input folder: spec, camera (poses in the contract's z-up world), and the
    frames of every channel (per-frame files or stacked arrays)."""

    def __init__(self, src: Path, require_rgb: bool = True, up_axis: str | None = None) -> None:
        self.src = src
        self.spec = _load_spec(src, require_rgb)
        self.H, self.W = self.spec["height"], self.spec["width"]
        ch = self.spec["channels"]
        rgb = ch.get("rgb") or []
        rgb = rgb if isinstance(rgb, list) else [rgb]
        self.channels = {k: v for k, v in ch.items() if k != "rgb"}
        self.styles = [str(r.get("style", "imported")) for r in rgb]
        if len(set(self.styles)) != len(self.styles):
            raise GBufferImportError(src / SPEC_FILE, f"duplicate styles {self.styles}",
                                     channel="rgb")
        for i, style in enumerate(self.styles):
            self.channels[f"rgb:{style}"] = rgb[i]
        self.frames = {k: open_channel(src, cfg, k, k.split(":")[-1] if k.startswith("rgb:") else k)
                       for k, cfg in self.channels.items()}
        self.n = len(self.frames["depth"])
        for k, frames in self.frames.items():
            if len(frames) != self.n:
                raise GBufferImportError(frames.source, f"{len(frames)} frames but depth has {self.n}",
                                         channel=k)
        camera = self.spec.get("camera", {})
        self.K = _intrinsics(camera, self.H, self.W, src / SPEC_FILE)
        self.up_axis = _up_axis(camera, up_axis, src / SPEC_FILE)
        # world -> camera rotations as given (world-space normals are rotated by these), and the
        # poses in the contract's z-up world: w2c_source @ inverse(Y_UP_TO_Z_UP) for a y-up source
        self.w2c_source = _poses(camera, src, self.n)
        self.w2c = self.w2c_source @ np.linalg.inv(Y_UP_TO_Z_UP) if self.up_axis == "y" else self.w2c_source

    def read(self, channel: str, i: int) -> tuple[np.ndarray, partial]:
        """Raw frame ``i`` of a channel, size-checked, plus its error factory."""
        frames = self.frames[channel]
        where = partial(GBufferImportError, frames.where(i), channel=channel, frame=i)
        raw = frames.read(i)
        if raw.shape[:2] != (self.H, self.W):
            raise where(f"expected {self.H}x{self.W} (HxW), got shape {raw.shape}")
        return raw, where


def _frame_gbuffer(s: _Source, i: int) -> dict[str, np.ndarray]:
    """All contract G-buffer channels of source frame ``i`` except motion."""
    ch = s.channels
    raw, where = s.read("depth", i)
    depth, mask = convert_depth(raw, ch["depth"], where)
    if "mask" in ch:                      # explicit: geometry where it says, and depth must be there
        raw, where = s.read("mask", i)
        given = convert_mask(raw, ch["mask"], where)
        holes = given & ~mask
        if holes.any():
            first = tuple(int(j) for j in np.argwhere(holes)[0])
            raise where(f"the mask says geometry on {int(holes.sum())} pixels where depth has no valid "
                        f"value (first at {first})")
        mask = given
        depth = np.where(mask, depth, 0.0).astype(np.float32)
    out: dict[str, np.ndarray] = {"depth": depth, "mask": mask.astype(np.uint8)}
    if "normal" in ch:
        raw, where = s.read("normal", i)
        out["normal"] = convert_normal(raw, ch["normal"], mask, depth, s.K, s.w2c_source[i][:3, :3],
                                       where)
    else:
        out["normal"] = normals_from_depth(depth, s.K).astype(np.float16)
    out["albedo"] = np.zeros((s.H, s.W, 3), np.uint8)
    if "albedo" in ch:
        raw, where = s.read("albedo", i)
        out["albedo"] = np.where(mask[..., None], colour_u8(raw, where), 0).astype(np.uint8)
    for key in ("roughness", "metallic"):
        out[key] = np.zeros((s.H, s.W), np.uint8)
        if key in ch:
            raw, where = s.read(key, i)
            out[key] = np.where(mask, to_u8(single_channel(raw, where)), 0).astype(np.uint8)
    for key in ("material", "instance"):
        ids = mask.astype(np.uint16)
        if key in ch:
            raw, where = s.read(key, i)
            ids = np.where(mask, convert_ids(raw, where), 0).astype(np.uint16)
            if key == "material" and (ids[mask] == 0).any():
                raise where("material 0 (none) on pixels where depth says there is geometry")
        out[key] = ids
    for style in s.styles:
        raw, where = s.read(f"rgb:{style}", i)
        out[f"rgb:{style}"] = colour_u8(raw, where)
    return out


def _motion(s: _Source, i: int, depth_t: np.ndarray, depth_prev: np.ndarray, mask_t: np.ndarray,
            mask_prev: np.ndarray) -> np.ndarray:
    """Backward flow (H, W, 2) of source frame i (not the first of its clip), in pixels; on the
    background the flow of points at infinity (computed, or the input's, checked)."""
    cfg = s.channels.get("motion")
    bound = 4 * max(s.H, s.W) - 1
    if cfg is None:
        flow = reproject_flow(depth_t, s.K, s.w2c[i], s.w2c[i - 1])
        return np.clip(np.nan_to_num(flow, nan=0.0), -bound, bound)
    convention = cfg.get("convention", "backward")
    if convention == "backward":
        raw, where = s.read("motion", i)
        flow = convert_motion(raw, cfg, where, missing_ok=~mask_t)
    elif convention == "forward":
        raw, where = s.read("motion", i - 1)
        flow = backward_from_forward(convert_motion(raw, cfg, where, missing_ok=~mask_prev), depth_prev)
        if np.isnan(flow[mask_t]).any():
            raise where("forward flow of the frame before leaves geometry of this frame without motion")
    else:
        raise GBufferImportError(s.src / SPEC_FILE, f"unknown motion convention {convention!r}; "
                                 "expected 'backward' or 'forward'", channel="motion")
    at_infinity = reproject_flow(np.zeros((s.H, s.W)), s.K, s.w2c[i], s.w2c[i - 1])
    flow = settle_background_motion(flow, ~mask_t, np.clip(at_infinity, -bound, bound),
                                    cfg.get("background", "check"), rotation_degrees(s.w2c[i], s.w2c[i - 1]),
                                    where)
    return flow


def _build_clip(s: _Source, start: int, length: int) -> dict[str, np.ndarray]:
    frames = [_frame_gbuffer(s, i) for i in range(start, start + length)]
    clip = {k: np.stack([f[k] for f in frames]) for k in frames[0] if not k.startswith("rgb:")}
    if s.styles:
        clip["rgb"] = np.stack([np.stack([f[f"rgb:{st}"] for f in frames]) for st in s.styles])
        clip["styles"] = np.array(s.styles, dtype=np.str_)
    motion = np.zeros((length, s.H, s.W, 2), np.float64)
    for t in range(1, length):
        motion[t] = _motion(s, start + t, clip["depth"][t], clip["depth"][t - 1], clip["mask"][t] == 1,
                            clip["mask"][t - 1] == 1)
    clip["motion"] = motion.astype(np.float16)
    clip["K"] = s.K.astype(np.float32)
    clip["world_to_camera"] = s.w2c[start:start + length].astype(np.float32)
    return clip


def _material_library(sums: np.ndarray, counts: np.ndarray) -> list[dict]:
    """One material per id 1..max: mean sRGB albedo, roughness, metallic of its pixels."""
    out = []
    for mid in range(1, len(counts)):
        mean = sums[mid] / counts[mid] if counts[mid] else np.array([0.5, 0.5, 0.5, 0.5, 0.0])
        out.append({"id": mid, "name": f"imported_{mid}",
                    "albedo": [round(float(c), 4) for c in mean[:3]],
                    "roughness": round(float(mean[3]), 4), "metallic": round(float(mean[4]), 4),
                    "emission": [0.0, 0.0, 0.0]})
    return out


def read_gbuffers(src: str | os.PathLike[str], *, up_axis: str | None = None) -> dict[str, np.ndarray]:
    """Every frame of a G-buffer folder as one clip's G-buffer arrays, converted exactly as
    ``import_gbuffers`` does but with no RGB needed: what ``alaya render --gbuffers`` renders."""
    s = _Source(Path(src), require_rgb=False, up_axis=up_axis)
    clip = _build_clip(s, 0, s.n)
    errors = check_invariants(clip, path=s.src)
    if errors:
        raise GBufferImportError(s.src, "the converted frames break the contract:\n" + "\n".join(errors))
    return clip


def import_gbuffers(
    src: str | os.PathLike[str], out: str | os.PathLike[str], *, dataset_name: str | None = None,
    up_axis: str | None = None,
) -> Path:
    """Convert the G-buffer folder ``src`` into a dataset folder ``out``; returns ``out``.

    ``up_axis`` ("z" or "y"): the source world's up axis, overriding ``camera.up_axis`` of
    gbuffers.json (default "z"); a y-up world's poses are turned into the contract's z-up world.
    ``out`` must not hold a dataset yet. Raises ``GBufferImportError`` naming the file,
    channel and frame at fault; every clip is checked with ``check_invariants`` before writing.
    """
    src, out = Path(src), Path(out)
    s = _Source(src, up_axis=up_axis)
    length = int(s.spec.get("clip_length", s.n))
    if not 0 < length <= s.n:
        raise GBufferImportError(src / SPEC_FILE, f"clip_length {length} must be in 1..{s.n} "
                                 "(the number of frames)")
    if (out / META_FILE).exists():
        raise FileExistsError(f"{out / META_FILE} already exists; import into a new folder")
    (out / CLIPS_DIR).mkdir(parents=True, exist_ok=True)
    sums, counts = np.zeros((65536, 5)), np.zeros(65536)
    clips: dict[str, dict] = {}
    splits: dict[str, list[str]] = {"train": [], "val": [], "test": []}
    split_of = splits_for_seeds({f"import_{k:05d}": k for k in range(s.n // length)})
    for k in range(s.n // length):
        start = k * length
        clip = _build_clip(s, start, length)
        cid = f"import_{k:05d}"
        path = out / CLIPS_DIR / f"{cid}.npz"
        errors = check_invariants(clip, path=path)
        if errors:
            raise GBufferImportError(src, f"source frames {start}..{start + length - 1} break "
                                     "the contract:\n" + "\n".join(errors))
        write_clip(path, clip)
        fg = clip["mask"] == 1
        ids = clip["material"][fg]
        feats = np.concatenate([clip["albedo"][fg], clip["roughness"][fg][:, None],
                                clip["metallic"][fg][:, None]], axis=1) / 255.0
        for j in range(feats.shape[1]):
            sums[:, j] += np.bincount(ids, weights=feats[:, j], minlength=65536)
        counts += np.bincount(ids, minlength=65536)
        split = split_of[cid]
        splits[split].append(cid)
        clips[cid] = {"seed": k, "split": split, "rig": "imported",
                      "source_frames": [start, start + length]}
    top = int(np.nonzero(counts)[0].max()) if counts.any() else 1
    styles = {st: {"description": f"RGB imported from {src.name}",
                   "phrasings": [f"{st} style", f"rendered in {st} style",
                                 f"a scene in the {st} look"]} for st in s.styles}
    meta = DatasetMeta(
        schema_version=SCHEMA_VERSION, name=dataset_name or src.resolve().name,
        height=s.H, width=s.W, fps=float(s.spec["fps"]), frames=length, styles=styles,
        materials=_material_library(sums[:top + 1], counts[:top + 1]), splits=splits,
        clips=clips, actions=None,
        generator={"tool": "alaya.data.importer", "source": str(src), "spec": s.spec,
                   "up_axis": s.up_axis, "frames_total": s.n, "frames_dropped": s.n % length},
    )
    write_meta(out, meta)
    return out

"""Per-frame conversions from foreign G-buffer encodings to the clip contract (see importer).

Each function takes one raw frame (as read by ``framefiles.read_frame``) and its channel
settings from ``gbuffers.json`` and returns contract dtypes; ``where`` (a callable making a
``GBufferImportError`` for this file, channel and frame) reports bad input.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from alaya.data.framefiles import GBufferImportError, to_u8, to_unit
from alaya.data.geometry import normals_from_depth

Where = Callable[[str], GBufferImportError]
UNIT_SCALE = {"metres": 1.0, "meters": 1.0, "centimetres": 0.01, "centimeters": 0.01,
              "millimetres": 0.001, "millimeters": 0.001}


def single_channel(raw: np.ndarray, where: Where) -> np.ndarray:
    """(H, W) from (H, W) or (H, W, C) (first channel)."""
    if raw.ndim == 3:
        return raw[..., 0]
    if raw.ndim != 2:
        raise where(f"expected an (H, W) image, got shape {raw.shape}")
    return raw


def colour_u8(raw: np.ndarray, where: Where) -> np.ndarray:
    """(H, W, 3) uint8 sRGB from grey, RGB or RGBA in uint8/uint16/float 0..1."""
    if raw.ndim == 2:
        raw = np.repeat(raw[..., None], 3, axis=-1)
    if raw.ndim != 3 or raw.shape[-1] < 3:
        raise where(f"expected an RGB image, got shape {raw.shape}")
    rgb = raw[..., :3]
    if rgb.dtype.kind == "f" and not np.isfinite(rgb).all():
        raise where("NaN or inf in colour values")
    return to_u8(rgb)


def convert_depth(raw: np.ndarray, cfg: dict, where: Where) -> tuple[np.ndarray, np.ndarray]:
    """Linear depth in metres (float32, 0 for background) and the mask (bool).

    kind "linear": values in ``units`` (integers are raw counts, e.g. 16-bit millimetres);
    background is 0, non-finite or >= ``far`` (metres) when ``far`` is given.
    kind "ndc": OpenGL NDC z in [-1, 1] (integer images are read as window depth 0..1);
    kind "window": depth-buffer values in [0, 1] (z_ndc = 2 w - 1). Both need ``near`` and
    ``far`` (metres); z_ndc >= 1 (the far plane) is background.
    """
    raw = single_channel(raw, where)
    kind = cfg.get("kind", "linear")
    far = cfg.get("far")
    if kind == "linear":
        units = cfg.get("units", "metres")
        if units not in UNIT_SCALE:
            raise where(f"unknown depth units {units!r}; expected one of {sorted(UNIT_SCALE)}")
        d = raw.astype(np.float64) * UNIT_SCALE[units]
        valid = np.isfinite(d) & (d > 0)
        if far is not None:
            valid &= d < float(far)
    elif kind in ("ndc", "window"):
        near = cfg.get("near")
        if near is None or far is None or not 0 < float(near) < float(far):
            raise where(f"depth kind {kind!r} needs 0 < near < far, got near={near}, far={far}")
        n, f = float(near), float(far)
        z = to_unit(raw) * 2 - 1 if (kind == "window" or raw.dtype.kind in "ui") else (
            raw.astype(np.float64))
        with np.errstate(divide="ignore", invalid="ignore"):
            d = 2 * n * f / (f + n - z * (f - n))
        valid = np.isfinite(z) & (z < 1) & np.isfinite(d) & (d > 0)
    else:
        raise where(f"unknown depth kind {kind!r}; expected 'linear', 'ndc' or 'window'")
    if not valid.any():
        raise where("no valid depth in this frame (all background)")
    return np.where(valid, d, 0.0).astype(np.float32), valid


def convert_normal(
    raw: np.ndarray, cfg: dict, mask: np.ndarray, depth: np.ndarray, K: np.ndarray,
    R: np.ndarray, where: Where,
) -> np.ndarray:
    """Camera-space unit normals (float16); pixels with unusable input fall back to normals
    derived from depth. encoding "unsigned" means n * 0.5 + 0.5 (the default for integer
    images), "signed" means n (the default for float files). space "world" is rotated into
    camera space by ``R`` (the frame's world_to_camera rotation)."""
    if raw.ndim != 3 or raw.shape[-1] < 3:
        raise where(f"expected an (H, W, 3) normal image, got shape {raw.shape}")
    encoding = cfg.get("encoding", "unsigned" if raw.dtype.kind in "ui" else "signed")
    space = cfg.get("space", "camera")
    if encoding not in ("signed", "unsigned"):
        raise where(f"unknown normal encoding {encoding!r}; expected 'signed' or 'unsigned'")
    if space not in ("camera", "world"):
        raise where(f"unknown normal space {space!r}; expected 'camera' or 'world'")
    n = to_unit(raw[..., :3])
    if encoding == "unsigned":
        n = n * 2 - 1
    if space == "world":
        n = n @ np.asarray(R, np.float64).T
    length = np.linalg.norm(n, axis=-1)
    good = mask & np.isfinite(length) & (length > 0.5)
    n = n / np.where(good, length, 1.0)[..., None]
    if not good[mask].all():
        n = np.where(good[..., None], n, normals_from_depth(depth, K))
    n[~mask] = 0
    return n.astype(np.float16)


def convert_ids(raw: np.ndarray, where: Where) -> np.ndarray:
    """uint16 ids from integer or integral float images."""
    ids = single_channel(raw, where)
    if ids.dtype.kind == "f":
        if not np.isfinite(ids).all() or (ids != np.round(ids)).any():
            raise where("ids must be whole numbers")
    elif ids.dtype.kind not in "ui":
        raise where(f"ids must be integers, got dtype {ids.dtype}")
    if ids.min() < 0 or ids.max() > 65535:
        raise where(f"ids must be in 0..65535, got {ids.min()}..{ids.max()}")
    return ids.astype(np.uint16)


def convert_mask(raw: np.ndarray, cfg: dict, where: Where) -> np.ndarray:
    """An explicit geometry mask (bool (H, W)): integer or bool images are geometry where
    non-zero, float ones where > 0.5; ``"invert": true`` for masks that mark the background
    (a sky mask)."""
    m = single_channel(raw, where)
    if m.dtype.kind == "f":
        if not np.isfinite(m).all():
            raise where("NaN or inf in the mask")
        geometry = m > 0.5
    elif m.dtype.kind in "uib":
        geometry = m != 0
    else:
        raise where(f"a mask must be integers, bools or floats, got dtype {m.dtype}")
    invert = cfg.get("invert", False)
    if not isinstance(invert, bool):
        raise where(f"\"invert\" must be true or false, got {invert!r}")
    return ~geometry if invert else geometry


def convert_motion(raw: np.ndarray, cfg: dict, where: Where,
                   missing_ok: np.ndarray | None = None) -> np.ndarray:
    """Flow in pixels (H, W, 2) float64, +x right, +y down; units "ndc" are scaled by
    (W / 2, -H / 2) since NDC y points up. The convention is handled by the caller. Non-finite
    values are refused, except where ``missing_ok`` (H, W) is set (the background, whose flow
    the caller computes); they stay NaN there."""
    if raw.ndim != 3 or raw.shape[-1] < 2:
        raise where(f"expected an (H, W, 2) flow image, got shape {raw.shape}")
    if raw.dtype.kind not in "f":
        raise where(f"flow must be stored as floats (.npy/.exr), got dtype {raw.dtype}")
    m = raw[..., :2].astype(np.float64)
    units = cfg.get("units", "pixels")
    if units == "ndc":
        H, W = m.shape[:2]
        m = m * np.array([W / 2, -H / 2])
    elif units != "pixels":
        raise where(f"unknown motion units {units!r}; expected 'pixels' or 'ndc'")
    bad = ~np.isfinite(m).all(axis=-1)
    if missing_ok is not None:
        bad &= ~missing_ok
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise where(f"NaN or inf in motion on geometry ({int(bad.sum())} pixels, first at {first})")
    return np.where(np.isfinite(m).all(axis=-1, keepdims=True), m, np.nan)


def rotation_degrees(w2c_t: np.ndarray, w2c_prev: np.ndarray) -> float:
    """The camera's turn between two view matrices, in degrees."""
    R = np.asarray(w2c_t, np.float64)[:3, :3] @ np.asarray(w2c_prev, np.float64)[:3, :3].T
    return float(np.degrees(np.arccos(np.clip((np.trace(R) - 1) / 2, -1.0, 1.0))))


def settle_background_motion(flow: np.ndarray, background: np.ndarray, at_infinity: np.ndarray,
                             mode: str, turn_degrees: float, where: Where) -> np.ndarray:
    """The contract's motion on the background (``background``, (H, W) bool): the flow of
    points at infinity, ``at_infinity`` (H, W, 2; the camera's rotation only, NaN where it has
    none). mode "compute" writes it on every background pixel; mode "check" (the default)
    writes it where the input has none (NaN) and checks the input elsewhere: more than 1% of the
    background off by more than 0.5 px + 10% is refused, with its own message when the input is 0
    there (an engine that writes no motion for the sky) while the camera turns."""
    if mode not in ("check", "compute"):
        raise where(f"unknown motion \"background\" {mode!r}; expected 'check' or 'compute'")
    expected = np.nan_to_num(at_infinity, nan=0.0)
    given = background & np.isfinite(flow).all(axis=-1)
    fill = background if mode == "compute" else background & ~given
    out = np.where(fill[..., None], expected, flow)
    if mode == "compute" or not given.any():
        return out
    size = np.linalg.norm(expected, axis=-1)
    err = np.linalg.norm(flow - expected, axis=-1)
    bad = given & np.isfinite(at_infinity).all(axis=-1) & (err > 0.5 + 0.1 * size)
    if bad.sum() <= 0.01 * given.sum():
        return out
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    fix = ("set \"background\": \"compute\" in the motion channel of gbuffers.json to have the importer "
           "compute it from K and the camera poses, or export the background's motion")
    if (np.linalg.norm(flow[bad], axis=-1) < 1e-3).all():
        raise where(f"motion is 0 on {int(bad.sum())} of the {int(background.sum())} background pixels "
                    f"(mask 0; first at {first}), but the camera turns by {turn_degrees:.2f} degrees since the "
                    f"frame before: the contract wants the flow of points at infinity there (up to "
                    f"{float(size[background].max()):.2f} px in this frame; docs/dataset.md); {fix}")
    raise where(f"motion on {int(bad.sum())} of the {int(background.sum())} background pixels (mask 0; first "
                f"at {first}) is not the flow of points at infinity (camera rotation only): off by a median "
                f"of {float(np.median(err[bad])):.2f} px; {fix}")


def backward_from_forward(fwd_prev: np.ndarray, depth_prev: np.ndarray) -> np.ndarray:
    """Backward flow of frame t from the forward flow of frame t-1 (both (H, W, 2) pixels).

    Each pixel p of frame t-1 is splatted to q = round(p + f(p)) in frame t with backward flow
    -f(p); where several land on one pixel the nearest (smallest depth_prev) wins; pixels that
    nothing reaches (disocclusions) take -f at the same position. NaN input (no flow there) is
    not splatted.
    """
    H, W = depth_prev.shape
    v, u = np.mgrid[0:H, 0:W]
    finite = np.isfinite(fwd_prev).all(axis=-1)          # NaN: no input there (background)
    safe = np.where(finite[..., None], fwd_prev, 0.0)
    tx = np.rint(u + safe[..., 0]).astype(np.int64)
    ty = np.rint(v + safe[..., 1]).astype(np.int64)
    ok = finite & (tx >= 0) & (tx < W) & (ty >= 0) & (ty < H)
    back = -fwd_prev.astype(np.float64)
    key = np.where(depth_prev > 0, depth_prev, np.inf)[ok]
    target = (ty * W + tx)[ok]
    values = -fwd_prev[ok]
    if target.size == 0:
        return back
    order = np.lexsort((key, target))  # by target pixel, then nearest first
    first = np.r_[True, target[order][1:] != target[order][:-1]]
    chosen = order[first]
    back.reshape(-1, 2)[target[chosen]] = values[chosen]
    return back

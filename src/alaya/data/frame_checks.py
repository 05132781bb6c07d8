"""The value checks of G-buffer frames: one set of rules and messages for clip files
(``clipio.check_invariants``, hence ``alaya validate``), for live frames (``RenderSession._check``)
and for the gRPC server's frames.

Arrays may carry any leading axes: a clip's (T, H, W, ...) or one frame's (H, W, ...). Each
error names the key, what is wrong, how many values and the first index:
``key 'depth': depth must be >= 0 (0: background) (3 values, first at (4, 7))``.

A clip has a ``mask``; a live frame need not, and then its background is where depth is 0
(the contract's convention, ``contract.py``). Floats are checked as float32, what the models read
(a float64 1e300 is an infinity there).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

NORMAL_TOLERANCE = 1e-2          # | |n| - 1 | on the foreground
POSE_TOLERANCE = 1e-3            # max |R R^T - I| of world_to_camera's rotation
MAX_TRANSLATION = 1e6            # metres: a camera further from the origin is a unit error or garbage
MOTION_BOUND = 4                 # |motion| < MOTION_BOUND * max(H, W) pixels
FLOAT_KEYS = ("depth", "normal", "motion", "K", "world_to_camera")


class FrameValueError(ValueError):
    """A frame whose values break the clip contract; the message names the key."""


def report(errors: list[str], where: str, key: str, bad: np.ndarray, what: str) -> None:
    """Append an error if any element of ``bad`` is set, with a count and the first index."""
    n = int(np.count_nonzero(bad))
    if n:
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        errors.append(f"{where}key '{key}': {what} ({n} values, first at {first})")


def _float32(a: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.asarray(a, np.float32)


def gbuffer_value_errors(arrays: Mapping[str, np.ndarray], mask: np.ndarray | None = None,
                         where: str = "") -> list[str]:
    """Every broken value rule among ``depth``, ``normal``, ``motion``, ``world_to_camera`` and ``K``
    (those present): not finite; depth > 0 on the foreground and 0 on the background; unit
    normals on the foreground, 0 on the background; |motion| < 4 max(H, W) px; a rigid camera pose
    (last row (0, 0, 0, 1), orthonormal rotation without reflection, |translation| < 1e6 m); a
    pinhole K (last row (0, 0, 1), positive focal lengths, principal point in the image).
    ``mask``: 1 on the foreground; None: the foreground is where depth > 0. ``where``: a prefix
    for every message (a clip's ``"path: "``)."""
    a = {k: _float32(arrays[k]) for k in FLOAT_KEYS if k in arrays}
    errors: list[str] = []
    finite = {}
    for key, values in a.items():
        finite[key] = np.isfinite(values)
        report(errors, where, key, ~finite[key], "NaN or inf")
    depth = a.get("depth")
    if mask is not None:
        fg, bg, fg_says, bg_says = mask == 1, mask == 0, "where mask == 1", "where mask == 0"
    elif depth is not None:
        fg, bg, fg_says, bg_says = depth > 0, depth == 0, "where depth > 0", "where depth == 0"
    else:
        fg = bg = None
    if depth is not None:
        if mask is None:
            report(errors, where, "depth", depth < 0, "depth must be >= 0 (0: background)")
        else:
            report(errors, where, "depth", fg & ~(depth > 0), f"depth must be > 0 {fg_says}")
            report(errors, where, "depth", bg & (depth != 0), f"depth must be 0 {bg_says}")
    if "normal" in a and fg is not None and fg.shape == a["normal"].shape[:-1]:
        with np.errstate(over="ignore", invalid="ignore"):
            length = np.sqrt(np.einsum("...c,...c->...", a["normal"], a["normal"]))
        report(errors, where, "normal", fg & finite["normal"].all(-1) & ~(np.abs(length - 1) < NORMAL_TOLERANCE),
               f"normals must be unit length {fg_says}")
        report(errors, where, "normal", bg & (length != 0), f"normals must be 0 {bg_says}")
    if "motion" in a and a["motion"].ndim >= 3:
        bound = MOTION_BOUND * max(a["motion"].shape[-3:-1])
        report(errors, where, "motion", finite["motion"] & (np.abs(a["motion"]) >= bound),
               f"|motion| must be < {bound} pixels")
    if "world_to_camera" in a and finite["world_to_camera"].all():
        errors += pose_errors(a["world_to_camera"], where)
    if "K" in a and finite["K"].all():
        size = next((arrays[k].shape[-2:] for k in ("depth", "mask", "material") if k in arrays), None)
        errors += intrinsics_errors(a["K"], size, where)
    return errors


def pose_errors(world_to_camera: np.ndarray, where: str = "") -> list[str]:
    """A finite (..., 4, 4) world -> camera matrix that is not a rigid motion."""
    m = np.asarray(world_to_camera, np.float64).reshape(-1, 4, 4)
    errors: list[str] = []
    key = "world_to_camera"
    report(errors, where, key, np.abs(m[:, 3] - [0, 0, 0, 1]) > 1e-6, "last row must be (0, 0, 0, 1)")
    R = m[:, :3, :3]
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.abs(R @ R.transpose(0, 2, 1) - np.eye(3)).max(axis=(1, 2))
    report(errors, where, key, err > POSE_TOLERANCE, "rotation part not orthonormal")
    report(errors, where, key, np.linalg.det(R) <= 0, "rotation part is a reflection (det <= 0)")
    report(errors, where, key, np.abs(m[:, :3, 3]) >= MAX_TRANSLATION,
           f"translation must be < {MAX_TRANSLATION:g} m")
    return errors


def intrinsics_errors(K: np.ndarray, size: tuple[int, int] | None = None, where: str = "") -> list[str]:
    """A finite (3, 3) ``K`` that is not a pinhole camera for an image of ``size`` (H, W)."""
    K = np.asarray(K, np.float64)
    errors: list[str] = []
    if not np.array_equal(K[2], [0.0, 0.0, 1.0]):
        errors.append(f"{where}key 'K': last row must be (0, 0, 1), got {K[2].tolist()}")
    if not (K[0, 0] > 0 and K[1, 1] > 0):
        errors.append(f"{where}key 'K': fx, fy must be > 0, got {K[0, 0]}, {K[1, 1]}")
    if size is not None:
        H, W = size
        if not (0 <= K[0, 2] <= W and 0 <= K[1, 2] <= H):
            errors.append(f"{where}key 'K': principal point ({K[0, 2]}, {K[1, 2]}) outside the {W}x{H} image")
    return errors


def check_frame(frame: Mapping[str, np.ndarray]) -> None:
    """Raise ``FrameValueError`` naming every broken value rule of one live frame (clip-contract
    arrays without the T axis; ``mask`` optional), as ``alaya validate`` would name them."""
    errors = gbuffer_value_errors(frame, frame.get("mask"))
    if errors:
        raise FrameValueError("; ".join(errors))

"""Where a world session's camera is against the game's, frame by frame (``alaya eval world
--live``): both cameras taken relative to their own start camera, so the two worlds' origins do
not matter, and compared by the distance between the camera centres (metres, in the start
camera's frame) and the angle between their rotations (degrees).

Why: the live evaluation compares the session's frames with the game's at the same moment. That
is a like-for-like comparison only while both players stand in the same place. The game's
collisions stop its player at walls the session may not know (unseen ground it draws open), and
the session's learned camera stops at surfaces it draws where the game has none; from then on
the frames are of different places. This names when that happens.
"""

from __future__ import annotations

import numpy as np


def relative_cameras(world_to_camera: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(centres (T, 3), rotations (T, 3, 3)) of cameras (T, 4, 4) world-to-camera, each in the
    first camera's frame: camera t's centre as the first camera sees it, and the rotation from
    camera t's axes to the first one's."""
    views = np.asarray(world_to_camera, np.float64)
    if views.ndim != 3 or views.shape[1:] != (4, 4) or len(views) == 0:
        raise ValueError(f"world_to_camera: expected (T, 4, 4) with T >= 1, got {views.shape}")
    if not np.isfinite(views).all():
        raise ValueError("world_to_camera: not finite")
    to_world = np.linalg.inv(views)                      # camera t -> world
    in_first = views[0] @ to_world                       # camera t -> first camera
    return in_first[:, :3, 3], in_first[:, :3, :3]


def camera_errors(generated: np.ndarray, real: np.ndarray) -> dict[str, np.ndarray]:
    """Per frame of two camera paths (T, 4, 4) world-to-camera from the same start, each in its
    own world: ``position`` (T,) metres between the centres, ``rotation`` (T,) degrees between
    the orientations (frame 0: both 0 by construction)."""
    generated, real = np.asarray(generated), np.asarray(real)
    if generated.shape != real.shape:
        raise ValueError(f"camera paths disagree: generated {generated.shape}, real {real.shape}")
    (cg, rg), (cr, rr) = relative_cameras(generated), relative_cameras(real)
    position = np.linalg.norm(cg - cr, axis=1)
    cos = (np.einsum("tij,tij->t", rg, rr) - 1) / 2    # trace(rg^T rr) = 1 + 2 cos(angle)
    rotation = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
    return {"position": position, "rotation": rotation}

"""What a world model's folder ships beside its network, loaded: its learned camera
(``camera_motion/``), its one-shot actions' effect layers (``action_effects/``), its walls'
close-up detail (``wall_detail/``), and its start
frames (``starts/*.png`` with their recorded depth, camera and the walkable region), which play,
the Gymnasium env, the evaluations and the bench start from."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from alaya.data.walkable_region import REGION_FILE, WalkableRegion
from alaya.models.action_effects import ACTION_EFFECTS_DIR, ActionEffects
from alaya.models.camera_motion import CAMERA_MOTION_DIR, CameraMotion
from alaya.models.wall_detail import WALL_DETAIL_DIR, WallDetail


def load_camera_motion(weights) -> CameraMotion | None:
    """The learned camera shipped inside a world model's folder (``<weights>/camera_motion/``), or None."""
    folder = Path(weights) / CAMERA_MOTION_DIR
    return CameraMotion.from_pretrained(folder) if (folder / "config.json").exists() else None


def load_action_effects(weights) -> ActionEffects | None:
    """The one-shot actions' effect layer inside a world model's folder (``<weights>/action_effects/``), or None."""
    folder = Path(weights) / ACTION_EFFECTS_DIR
    return ActionEffects.from_pretrained(folder) if (folder / "config.json").exists() else None


def load_wall_detail(weights) -> WallDetail | None:
    """The walls' close-up detail inside a world model's folder (``<weights>/wall_detail/``), or None."""
    folder = Path(weights) / WALL_DETAIL_DIR
    return WallDetail.from_pretrained(folder) if (folder / "config.json").exists() else None


def load_region(weights) -> WalkableRegion | None:
    """The region recorded players stood in, shipped with a world model's start frames
    (``<weights>/starts/region.json``), or None."""
    path = Path(weights) / "starts" / REGION_FILE
    return WalkableRegion.load(path) if path.exists() else None


def load_start_depths(folder, size: int | None = None) -> list[np.ndarray | None]:
    """The recorded depth of each start frame (``load_start_frames``' order): float32 (H, W) metres
    from ``<stem>.depth.npy`` beside ``<stem>.png`` (``write_start_frames`` writes them where the
    episodes have depth), None where there is none (the memory model then predicts it)."""
    from alaya.data.start_frames import read_start_depth
    return [read_start_depth(p, size) for p in sorted((Path(folder) / "starts").glob("*.png"))]


def load_start_views(folder) -> list[np.ndarray | None]:
    """The recorded camera of each start frame (``load_start_frames``' order): float64 (4, 4)
    world_to_camera from ``<stem>.view.npy``, None where there is none."""
    from alaya.data.start_frames import read_start_view
    return [read_start_view(p) for p in sorted((Path(folder) / "starts").glob("*.png"))]


def load_start_frames(folder, size: int | None = None) -> list[np.ndarray]:
    """The start frames shipped beside a world model (``<folder>/starts/*.png``, sorted by name),
    as uint8 (H, W, 3) arrays; ``size`` checks they are size x size."""
    from PIL import Image
    paths = sorted((Path(folder) / "starts").glob("*.png"))
    if not paths:
        raise FileNotFoundError(f"{Path(folder) / 'starts'}: no start frames (*.png)")
    frames = []
    for p in paths:
        a = np.asarray(Image.open(p).convert("RGB"))
        if size is not None and a.shape != (size, size, 3):
            raise ValueError(f"{p}: start frame is {a.shape[1]}x{a.shape[0]}, expected {size}x{size}")
        frames.append(a)
    return frames


def shipped_size(weights) -> int:
    """The size of the start frames shipped with ``weights`` (``<weights>/starts/*.png``): the
    model's own play size."""
    from PIL import Image
    paths = sorted((Path(weights) / "starts").glob("*.png"))
    if not paths:
        raise FileNotFoundError(f"{Path(weights) / 'starts'}: no start frames (*.png)")
    with Image.open(paths[0]) as im:
        w, h = im.size
    if w != h:
        raise ValueError(f"{paths[0]}: start frame is {w}x{h}, expected a square")
    return w

"""Write rendered frames: ``.mp4`` (H.264 through imageio-ffmpeg), ``.gif``, or PNG frames
(``.png`` -> ``NAME_0000.png``...; a path without suffix -> a folder of ``frame_0000.png``)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PIL import Image

from alaya.io import atomic_path


def write_frames(path: str | os.PathLike, frames: np.ndarray, fps: float = 30.0) -> list[Path]:
    frames = np.asarray(frames)
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3 or len(frames) == 0:
        raise ValueError(f"frames: expected uint8 (T, H, W, 3) with T >= 1, got {frames.dtype} {frames.shape}")
    path = Path(path)
    suffix = path.suffix.lower()
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".mp4":
        import imageio.v2 as imageio
        with atomic_path(path, keep_suffix=True) as tmp, imageio.get_writer(
                tmp, fps=fps, codec="libx264", quality=8, macro_block_size=16, ffmpeg_log_level="error") as w:
            for f in frames:
                w.append_data(f)
        return [path]
    if suffix == ".gif":
        images = [Image.fromarray(f) for f in frames]
        with atomic_path(path, keep_suffix=True) as tmp:
            images[0].save(tmp, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
        return [path]
    if suffix == ".png":
        paths = [path.with_name(f"{path.stem}_{i:04d}.png") for i in range(len(frames))]
    elif suffix == "":
        path.mkdir(exist_ok=True)
        paths = [path / f"frame_{i:04d}.png" for i in range(len(frames))]
    else:
        raise ValueError(f"{path}: unsupported output type '{suffix}' (use .mp4, .gif, .png or a folder)")
    for p, f in zip(paths, frames):
        Image.fromarray(f).save(p)
    return paths

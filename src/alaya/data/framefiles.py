"""Per-frame image files for importers: listing a channel folder and reading one frame.

Supported: ``.png`` (8- or 16-bit, via PIL; 16-bit only for single-channel images, a PIL
limit), ``.npy`` (``allow_pickle=False``) and ``.exr`` (needs the optional ``OpenEXR``
module: ``pip install OpenEXR``). Frames are taken in sorted file-name order; files whose
name starts with '.' are ignored.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PIL import Image

FRAME_SUFFIXES = (".png", ".npy", ".exr")


class GBufferImportError(ValueError):
    """An input G-buffer that cannot be imported; names the file, the channel and the frame."""

    def __init__(
        self, path: str | os.PathLike[str], message: str, *, channel: str | None = None,
        frame: int | None = None,
    ) -> None:
        self.path = str(path)
        self.channel = channel
        self.frame = frame
        where = [self.path]
        if channel is not None:
            where.append(f"channel '{channel}'")
        if frame is not None:
            where.append(f"frame {frame}")
        super().__init__(f"{': '.join(where)}: {message}")


def list_frames(folder: str | os.PathLike[str], channel: str) -> list[Path]:
    """Sorted frame files of one channel folder (raises if missing or empty)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise GBufferImportError(folder, "folder not found", channel=channel)
    files = sorted(
        p for p in folder.iterdir()
        if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in FRAME_SUFFIXES
    )
    if not files:
        raise GBufferImportError(
            folder, f"no frame files ({', '.join(FRAME_SUFFIXES)})", channel=channel
        )
    return files


def _read_png(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        if im.mode in ("P", "PA", "LA", "1"):
            im = im.convert("RGBA" if "A" in im.mode else "L")
        arr = np.array(im)
    if im.mode.startswith("I;16"):
        arr = arr.astype(np.uint16)
    elif im.mode == "I":  # PIL's 32-bit mode, used for 16-bit greyscale PNGs
        if arr.min() < 0 or arr.max() > 65535:
            raise ValueError("32-bit integer PNGs are not supported")
        arr = arr.astype(np.uint16)
    return arr


def _read_exr(path: Path) -> np.ndarray:
    try:
        import OpenEXR  # type: ignore[import-not-found]
    except ImportError:
        raise ValueError(
            "reading .exr files needs the optional OpenEXR module: pip install OpenEXR "
            "(or convert the frames to .npy)"
        ) from None
    if hasattr(OpenEXR, "File"):  # OpenEXR >= 3.3
        with OpenEXR.File(str(path)) as f:
            chans = {k: np.asarray(c.pixels) for k, c in f.channels().items()}
    else:  # classic bindings
        import Imath  # type: ignore[import-not-found]

        f = OpenEXR.InputFile(str(path))
        dw = f.header()["dataWindow"]
        w, h = dw.max.x - dw.min.x + 1, dw.max.y - dw.min.y + 1
        pt = Imath.PixelType(Imath.PixelType.FLOAT)
        names = list(f.header()["channels"])
        chans = {n: np.frombuffer(f.channel(n, pt), np.float32).reshape(h, w) for n in names}
        if all(c in chans for c in "RGB"):
            chans = {"RGB": np.stack([chans["R"], chans["G"], chans["B"]], -1)}
    for name in ("RGB", "RGBA", "XYZ", "Z", "Y", "R"):
        if name in chans:
            return np.asarray(chans[name], dtype=np.float32)
    if len(chans) == 1:
        return np.asarray(next(iter(chans.values())), dtype=np.float32)
    raise ValueError(f"cannot tell which EXR channel to use among {sorted(chans)}")


def read_frame(path: Path, channel: str, frame: int) -> np.ndarray:
    """One frame as (H, W) or (H, W, C); errors name the file, channel and frame."""
    try:
        suffix = path.suffix.lower()
        if suffix == ".png":
            return _read_png(path)
        if suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if suffix == ".exr":
            return _read_exr(path)
        raise ValueError(f"unsupported file type {suffix!r}")
    except (OSError, ValueError, EOFError) as e:
        raise GBufferImportError(path, f"cannot read ({e})", channel=channel, frame=frame) from e


def to_unit(arr: np.ndarray) -> np.ndarray:
    """Integer images scaled to 0..1 by their dtype's maximum; floats as float64 unchanged."""
    if arr.dtype.kind in "ui":
        return arr.astype(np.float64) / np.iinfo(arr.dtype).max
    return arr.astype(np.float64)


def to_u8(arr: np.ndarray) -> np.ndarray:
    """uint8 from uint8 (as is), other integers (scaled by dtype max) or floats in 0..1."""
    if arr.dtype == np.uint8:
        return arr
    return np.round(np.clip(to_unit(arr), 0.0, 1.0) * 255).astype(np.uint8)

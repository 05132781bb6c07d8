"""The frames of one G-buffer channel for importers: a folder of per-frame files
(``FrameFolder``) or one stacked array holding every frame (``StackedFrames``).

Per-frame files: ``.png`` (8- or 16-bit, via PIL; 16-bit only for single-channel images, a PIL
limit), ``.npy`` (``allow_pickle=False``) and ``.exr`` (needs the optional ``OpenEXR``
module: ``pip install OpenEXR``). Frames are taken in sorted file-name order; files whose
name starts with '.' are ignored. Stacked: a ``.npy`` (memory-mapped) or one array of an
``.npz``, shaped (T, H, W) or (T, H, W, C). Both give frame i as (H, W) or (H, W, C), and every
error names the file, the channel and the frame.
"""

from __future__ import annotations

import os
import zipfile
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


class FrameFolder:
    """A channel stored as one file per frame in ``folder`` (sorted names)."""

    def __init__(self, folder: str | os.PathLike[str], channel: str) -> None:
        self.source = Path(folder)
        self.channel = channel
        self.files = list_frames(folder, channel)

    def __len__(self) -> int:
        return len(self.files)

    def where(self, i: int) -> Path:
        """The file of frame ``i`` (for error messages)."""
        return self.files[i]

    def read(self, i: int) -> np.ndarray:
        return read_frame(self.files[i], self.channel, i)


class StackedFrames:
    """A channel stored as one array of every frame, (T, H, W) or (T, H, W, C): a ``.npy``
    (memory-mapped, so only the frames read are loaded) or the array ``key`` of an ``.npz``
    (default ``default_key``, else its only array; loaded whole)."""

    def __init__(self, path: str | os.PathLike[str], channel: str, key: str | None = None,
                 default_key: str | None = None) -> None:
        self.source = Path(path)
        self.channel = channel
        suffix = self.source.suffix.lower()
        try:
            if suffix == ".npy":
                self.array = np.load(self.source, mmap_mode="r", allow_pickle=False)
            elif suffix == ".npz":
                with np.load(self.source, allow_pickle=False) as npz:
                    names = list(npz.files)
                    if key is None:
                        key = default_key if default_key in names else (names[0] if len(names) == 1 else None)
                    if key not in names:
                        raise GBufferImportError(self.source, f"no array {key!r} among {names}; name it with "
                                                 "\"key\"", channel=channel)
                    self.array = npz[key]
            else:
                raise GBufferImportError(self.source, f"stacked frames must be .npy or .npz, got {suffix!r}",
                                         channel=channel)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
            if isinstance(e, GBufferImportError):
                raise
            raise GBufferImportError(self.source, f"cannot read ({e})", channel=channel) from e
        if self.array.ndim not in (3, 4) or self.array.shape[0] < 1:
            raise GBufferImportError(self.source, "stacked frames must be (T, H, W) or (T, H, W, C), got "
                                     f"shape {self.array.shape}", channel=channel)
        self.key = key

    def __len__(self) -> int:
        return int(self.array.shape[0])

    def where(self, i: int) -> str:
        return f"{self.source}[{self.key!r}]" if self.key else str(self.source)

    def read(self, i: int) -> np.ndarray:
        try:
            return np.asarray(self.array[i])
        except (OSError, ValueError) as e:
            raise GBufferImportError(self.where(i), f"cannot read ({e})", channel=self.channel, frame=i) from e


def open_channel(src: Path, cfg: dict, channel: str, default_key: str) -> FrameFolder | StackedFrames:
    """A channel's frames as ``gbuffers.json`` describes them: ``{"dir": ...}`` (one file per
    frame; default: the folder named ``default_key``) or ``{"file": ..., "key": ...}`` (stacked)."""
    if not isinstance(cfg, dict):
        raise GBufferImportError(src, f"expected an object with \"dir\" or \"file\", got {cfg!r}", channel=channel)
    if "file" in cfg:
        if "dir" in cfg:
            raise GBufferImportError(src, "give \"dir\" (one file per frame) or \"file\" (stacked), "
                                     "not both", channel=channel)
        return StackedFrames(src / cfg["file"], channel, cfg.get("key"), default_key)
    return FrameFolder(src / cfg.get("dir", default_key), channel)

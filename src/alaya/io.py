"""Atomic writes: every file the project writes appears whole or not at all.

A writer fills a temporary dot-file beside its target (``.<name>.<pid>.tmp``), which is fsynced
and renamed over the target (``os.replace``), and the folder entry is flushed; on any error the
temporary file is removed. A killed writer leaves the old file (or none) and at most a dot-file
that readers skip and writers clear (``.*.tmp``).

- ``atomic_path``: the temporary path, for writers that take a file name (matplotlib, PIL,
  imageio, onnx; ``keep_suffix`` for those that pick the format by the name's suffix);
- ``atomic_open``: the temporary file, opened;
- ``atomic_write_text`` and ``atomic_save_tensors`` (safetensors): a whole file at once.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], keep_suffix: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; on a clean exit it is fsynced and renamed
    over ``path`` and the folder entry flushed; on any error it is removed."""
    path = Path(path)
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp{path.suffix if keep_suffix else ''}"
    try:
        yield tmp
        _fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", **kwargs) -> Iterator[IO]:
    """``open`` on ``atomic_path(path)``: the file replaces ``path`` once the block exits cleanly."""
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as f:
        yield f


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8, newlines as given) to ``path`` atomically."""
    with atomic_open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return Path(path)


def atomic_save_tensors(path: str | os.PathLike[str], tensors: Mapping[str, torch.Tensor],
                        metadata: dict | None = None) -> Path:
    """Write ``tensors`` (detached, contiguous, on the CPU) as a safetensors file atomically."""
    from safetensors.torch import save_file
    with atomic_path(path) as tmp:
        save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, str(tmp), metadata=metadata)
    return Path(path)


def _fsync_file(path: Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    """Flush a folder's entries (a rename in it) to disk; best effort where unsupported."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

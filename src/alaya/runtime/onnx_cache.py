"""A cache of exported onnxruntime graphs, so that a renderer or a world session starts at once
instead of exporting (and quantizing) its graphs again in every process (seconds for the
shipped student with int8 steps: docs/flash.md).

An entry is a folder named by a sha256 of everything its graphs depend on: the networks'
weights, the frame size, latent factor and step count, the int8 ranges, the versions of torch,
onnx and onnxruntime, and every source file of the package (so an edit to a model's code is
never served a stale graph). A finished entry holds ``COMPLETE``;
entries are built under a temporary name and renamed into place, so a killed export leaves no
half-written entry that a later run would load, and concurrent processes do not see each other's
partial files. The ``CACHE_ENTRIES`` most recently used entries are kept.

Where: ``$ALAYA_ONNX_CACHE``, else ``$XDG_CACHE_HOME/alaya/onnx``, else ``~/.cache/alaya/onnx``.
``ALAYA_ONNX_CACHE=off`` turns the cache off (graphs go to a temporary folder, removed once
loaded), as does a cache folder that cannot be written.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import shutil
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import torch
from torch import nn

CACHE_ENTRIES = 8
COMPLETE = "COMPLETE"


def cache_root() -> Path | None:
    """The cache folder, created if needed; None when ``ALAYA_ONNX_CACHE`` is ``off`` or the
    folder cannot be written (with a warning)."""
    setting = os.environ.get("ALAYA_ONNX_CACHE", "")
    if setting.lower() in ("off", "0", "none"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    root = Path(setting) if setting else Path(base) / "alaya" / "onnx"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        warnings.warn(f"the ONNX graph cache {root} cannot be created ({e}); graphs are exported per process")
        return None
    if not os.access(root, os.W_OK):
        warnings.warn(f"the ONNX graph cache {root} is not writable; graphs are exported per process")
        return None
    return root


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    """The library versions and every source file of the package (a few ms, once per process)."""
    import onnx
    import onnxruntime

    import alaya
    h = hashlib.sha256(f"{torch.__version__} {onnx.__version__} {onnxruntime.__version__}".encode())
    root = Path(alaya.__file__).parent
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def graphs_key(modules: Iterable[nn.Module | None], **settings) -> str:
    """The entry name of graphs exported from ``modules`` (None for an absent one) with
    ``settings`` (sizes, step count, int8 ranges: anything JSON can write): their class, typed
    config, parameters and buffers (persistent or not)."""
    h = hashlib.sha256(_code_digest().encode())
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    for module in modules:
        h.update(b"module" if module is not None else b"none")
        if module is None:
            continue
        h.update(type(module).__qualname__.encode())
        config = getattr(module, "config", None)
        if dataclasses.is_dataclass(config):
            h.update(json.dumps(dataclasses.asdict(config), sort_keys=True, default=str).encode())
        for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
            t = tensor.detach().cpu().contiguous().reshape(-1)
            h.update(f"{name} {t.dtype} {tuple(tensor.shape)}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:40]


def cached_graphs(root: Path, key: str, build: Callable[[Path], object]) -> Path:
    """The finished entry ``key`` under ``root``, made by ``build(folder)`` if it is not there yet."""
    entry = root / key
    if (entry / COMPLETE).exists():
        _touch(entry)                                     # most recently used
        return entry
    staging = root / f".{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        build(staging)
        (staging / COMPLETE).write_text(json.dumps({"created": time.time()}))
        if entry.exists() and not (entry / COMPLETE).exists():   # not ours to finish: made by hand
            shutil.rmtree(entry, ignore_errors=True)
        try:
            os.rename(staging, entry)
        except OSError:                                   # another process finished it first
            if not (entry / COMPLETE).exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _touch(entry)
    prune(root)
    return entry


def _touch(entry: Path) -> None:
    """Mark an entry used now, to the nanosecond (a directory's own times can be as coarse as a
    scheduler tick, which would make entries made in a burst look equally old to ``prune``)."""
    now = time.time_ns()
    try:
        os.utime(entry, ns=(now, now))
    except PermissionError:                   # another user's entry in a shared cache: "now" is allowed
        try:
            os.utime(entry)
        except OSError:
            pass                              # best effort: only the pruning order depends on it


def prune(root: Path, keep: int = CACHE_ENTRIES) -> None:
    """Remove all but the ``keep`` most recently used entries (and stale staging folders)."""
    now = time.time()
    for stale in root.glob(".*.tmp"):
        if now - stale.stat().st_mtime > 3600:
            shutil.rmtree(stale, ignore_errors=True)
    entries = sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")),
                     key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in entries[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def ranges_setting(ranges: Mapping | None) -> list | None:
    """int8 ranges as a key setting (sorted pairs), None without."""
    return None if ranges is None else sorted((str(k), list(map(float, v))) for k, v in ranges.items())

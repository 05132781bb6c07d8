"""Reading and writing clip files (``clips/<clip_id>.npz``), see ``contract.py``.

``write_clip`` checks the contract, then writes a deterministic ``.npz`` (sorted keys, fixed
zip timestamps, fixed deflate level: the same arrays always give the same bytes) atomically
(``alaya.io.atomic_open``: a temporary ``.<name>.<pid>.tmp`` renamed over it), so a killed writer
leaves at most a dot-file that readers and validators ignore. ``read_clip`` loads with
``allow_pickle=False`` and checks keys, dtypes and shapes before returning anything.
``check_contract``, ``write_npz`` and ``read_npz`` take the array spec as a parameter, so other
file kinds (the episodes of ``episodes.py``) share the same writer and checks.
``check_invariants`` holds the semantic checks (finite values, background conventions, unit
normals, rigid camera poses, ...; the G-buffer's value rules are ``frame_checks``', shared with
the renderers' live frames). Every error names the file and the key.
"""

from __future__ import annotations

import io
import os
import zipfile
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from alaya.data.contract import CLIP_ARRAYS, REQUIRED_KEYS
from alaya.data.frame_checks import gbuffer_value_errors, report
from alaya.io import atomic_open

ZIP_DATE = (1980, 1, 1, 0, 0, 0)
DEFLATE_LEVEL = 6


class ClipError(ValueError):
    """A clip file (or in-memory clip) that breaks the contract; names the file and the key."""

    def __init__(self, path: str | os.PathLike[str], key: str | None, message: str) -> None:
        self.path = str(path)
        self.key = key
        where = f"{self.path}: key '{key}'" if key is not None else self.path
        super().__init__(f"{where}: {message}")


def _dtype_ok(arr: np.ndarray, want: str) -> bool:
    if want == "<U":
        return arr.dtype.kind == "U"
    return arr.dtype == np.dtype(want)


# key -> (numpy dtype string or "<U" for any unicode width, shape symbols); a digit symbol is a
# fixed size, any other symbol is bound from the first array (in spec order) that names it.
ArraySpec = Mapping[str, tuple[str, tuple[str, ...]]]


def check_contract(
    arrays: Mapping[str, np.ndarray],
    path: str | os.PathLike[str] = "<memory>",
    *,
    require: Iterable[str] = REQUIRED_KEYS,
    spec: ArraySpec = CLIP_ARRAYS,
) -> dict[str, int]:
    """Check keys, dtypes and shapes against ``spec``; raise ``ClipError`` naming the first bad key.

    ``spec`` is the clip contract by default. ``require`` lists the keys that must be present
    (all required clip keys by default). Keys outside ``spec`` are rejected. Shape symbols
    (S, T, H, W, A, ...) are bound from the first array in spec order that names them, then
    every later array must agree. Returns the bound symbols.
    """
    for key in require:
        if key not in arrays:
            raise ClipError(path, key, "missing required key")
    for key in arrays:
        if key not in spec:
            raise ClipError(path, key, f"unknown key (allowed: {sorted(spec)})")
    dims: dict[str, int] = {}
    origin: dict[str, str] = {}
    for key, (want_dtype, symbols) in spec.items():
        if key not in arrays:
            continue
        arr = arrays[key]
        if not isinstance(arr, np.ndarray):
            raise ClipError(path, key, f"expected a numpy array, got {type(arr).__name__}")
        if not _dtype_ok(arr, want_dtype):
            want = "unicode <U" if want_dtype == "<U" else want_dtype
            raise ClipError(path, key, f"expected dtype {want}, got {arr.dtype}")
        if arr.ndim != len(symbols):
            raise ClipError(
                path, key, f"expected rank {len(symbols)} {symbols}, got shape {arr.shape}"
            )
        for axis, (sym, size) in enumerate(zip(symbols, arr.shape)):
            if sym.isdigit():
                if size != int(sym):
                    raise ClipError(path, key, f"axis {axis} must be {sym}, got shape {arr.shape}")
            elif size <= 0:
                raise ClipError(path, key, f"{sym} (axis {axis}) must be positive, got {size}")
            elif sym not in dims:
                dims[sym], origin[sym] = size, key
            elif dims[sym] != size:
                raise ClipError(
                    path, key, f"{sym}={size} (axis {axis}) disagrees with {sym}={dims[sym]} "
                    f"from '{origin[sym]}' (shape {arr.shape})",
                )
    return dims


def write_clip(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> None:
    """Write one clip as a deterministic, atomically renamed ``.npz``.

    Raises ``ClipError`` (naming the key) if ``arrays`` break the contract; nothing is written
    then. Only keys/dtypes/shapes are checked here; run ``check_invariants`` for semantics.
    """
    path = Path(path)
    if path.suffix != ".npz":
        raise ClipError(path, None, "clip files must end in .npz")
    check_contract(arrays, path)
    write_npz(path, arrays)


def write_npz(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> None:
    """Write arrays as a deterministic ``.npz`` (sorted keys, fixed zip timestamps and deflate
    level), atomically (``alaya.io.atomic_open``).

    Checks no contract (callers do, before); a failure or kill leaves any old file untouched.
    """
    path = Path(path)
    if path.suffix != ".npz":
        raise ClipError(path, None, "array files must end in .npz")
    with atomic_open(path, "wb") as f, zipfile.ZipFile(f, "w") as zf:
        for key in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arrays[key]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=ZIP_DATE)
            info.create_system = 3
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue(), compress_type=zipfile.ZIP_DEFLATED, compresslevel=DEFLATE_LEVEL)


_READ_ERRORS = (zipfile.BadZipFile, zlib.error, OSError, ValueError, EOFError, KeyError)


def read_clip(
    path: str | os.PathLike[str], keys: Iterable[str] | None = None
) -> dict[str, np.ndarray]:
    """Load and check a clip; ``keys`` selects a subset (each must exist and is checked).

    Without ``keys`` every array in the file is loaded and all required keys must be present.
    Raises ``ClipError`` naming the file (and the key, when one is at fault) for unreadable or
    corrupted files, missing keys, wrong dtypes, ranks or inconsistent shapes.
    """
    return read_npz(path, keys, spec=CLIP_ARRAYS, required=REQUIRED_KEYS)


def read_npz(
    path: str | os.PathLike[str],
    keys: Iterable[str] | None = None,
    *,
    spec: ArraySpec,
    required: Iterable[str],
) -> dict[str, np.ndarray]:
    """``read_clip`` for any array spec: load with ``allow_pickle=False``, then
    ``check_contract(..., spec=spec)``. Without ``keys`` the file may hold only keys of ``spec``
    and must hold all of ``required``; with ``keys`` just those are loaded (each must exist)."""
    path = Path(path)
    required = tuple(required)
    wanted = None if keys is None else list(dict.fromkeys(keys))
    for key in wanted or ():
        if key not in spec:
            raise ClipError(path, key, f"unknown key (allowed: {sorted(spec)})")
    try:
        npz = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise ClipError(path, None, "file not found") from None
    except _READ_ERRORS as e:
        raise ClipError(path, None, f"not a readable .npz file ({type(e).__name__}: {e})") from e
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise ClipError(path, None, "not an .npz archive (a single .npy array?)")
    with npz:
        present = [f for f in npz.files]
        if wanted is None:
            for key in present:
                if key not in spec:
                    raise ClipError(path, key, "unknown key in file")
            wanted = [k for k in spec if k in present]
            require = required
        else:
            require = wanted
        for key in require:
            if key not in present:
                raise ClipError(path, key, "missing required key")
        out: dict[str, np.ndarray] = {}
        for key in wanted:
            try:
                out[key] = npz[key]
            except _READ_ERRORS as e:
                raise ClipError(
                    path, key, f"cannot read array ({type(e).__name__}: {e})"
                ) from e
    check_contract(out, path, require=require, spec=spec)
    return out


def _report(errors: list[str], path: str, key: str, bad: np.ndarray, what: str) -> None:
    report(errors, f"{path}: ", key, bad, what)


def check_invariants(
    arrays: Mapping[str, np.ndarray],
    *,
    num_materials: int | None = None,
    path: str | os.PathLike[str] = "<memory>",
) -> list[str]:
    """Semantic checks on a contract-valid clip (or any subset of its keys).

    Returns error strings, each naming ``path`` and the key: non-finite floats; mask not 0/1;
    background conventions (depth, normal, albedo, roughness, metallic, material, instance are 0
    where mask == 0); depth > 0, unit normals (tolerance 1e-2) and material > 0 where
    mask == 1; material <= num_materials; motion zero at t = 0 and |motion| < 4 * max(H, W);
    rigid world_to_camera (|translation| < 1e6 m); sane K; one rgb stack per unique style. The
    G-buffer's rules are ``frame_checks.gbuffer_value_errors``, which live frames pass too.
    """
    p = str(path)
    a = arrays
    errors: list[str] = []
    errors += gbuffer_value_errors(a, a.get("mask"), where=f"{p}: ")       # depth, normal, motion, camera
    if "actions" in a:
        _report(errors, p, "actions", ~np.isfinite(a["actions"]), "NaN or inf")
    mask = a.get("mask")
    if mask is not None:
        _report(errors, p, "mask", mask > 1, "values other than 0 and 1")
        fg, bg = mask == 1, mask == 0
        if "albedo" in a:
            _report(errors, p, "albedo", bg & a["albedo"].any(axis=-1),
                    "albedo must be 0 where mask == 0")
        for key in ("roughness", "metallic", "instance"):
            if key in a:
                _report(errors, p, key, bg & (a[key] != 0), f"{key} must be 0 where mask == 0")
        if "material" in a:
            _report(errors, p, "material", bg & (a["material"] != 0),
                    "material must be 0 where mask == 0")
            _report(errors, p, "material", fg & (a["material"] == 0),
                    "material must be > 0 where mask == 1")
    if "material" in a and num_materials is not None:
        _report(errors, p, "material", a["material"] > num_materials,
                f"material id beyond the library of {num_materials} materials")
    if "motion" in a:
        _report(errors, p, "motion", a["motion"][0] != 0, "motion at t = 0 must be exactly 0")
    if "styles" in a:
        styles = [str(s) for s in a["styles"]]
        if len(set(styles)) != len(styles):
            errors.append(f"{p}: key 'styles': style names must be unique, got {styles}")
        if any(not s for s in styles):
            errors.append(f"{p}: key 'styles': empty style name")
        if "rgb" in a and a["rgb"].shape[0] != len(styles):
            errors.append(f"{p}: key 'rgb': {a['rgb'].shape[0]} style stacks "
                          f"but {len(styles)} styles")
    return errors

"""Whole-dataset validation: meta, file listing, every clip's contract, invariants and
consistency with ``dataset.json``. Temporary files (names starting with '.') are ignored.
``validate_folder`` also takes an episodes folder (``episodes.json``, docs/episodes.md) and
checks it with the episode reader's checks (``episodes.validate_episodes``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from tqdm import tqdm

from alaya.data.clipio import ClipError, check_invariants, read_clip
from alaya.data.dataset import CLIPS_DIR, META_FILE, DatasetMeta, read_meta
from alaya.data.episodes import EPISODES_DIR, EPISODES_FILE, validate_episodes
from alaya.data.meta_files import MetaError


def check_against_meta(
    arrays: Mapping[str, np.ndarray], meta: DatasetMeta, path: str | os.PathLike[str]
) -> list[str]:
    """Errors where a clip disagrees with dataset.json (size, frames, styles, actions)."""
    p = str(path)
    errors: list[str] = []
    if "depth" in arrays:
        T, H, W = arrays["depth"].shape
        if (H, W) != (meta.height, meta.width):
            errors.append(f"{p}: key 'depth': {H}x{W} (HxW) but {META_FILE} says "
                          f"{meta.height}x{meta.width}")
        if T != meta.frames:
            errors.append(f"{p}: key 'depth': {T} frames but {META_FILE} says {meta.frames}")
    if "styles" in arrays:
        unknown = sorted(set(str(s) for s in arrays["styles"]) - set(meta.styles))
        if unknown:
            errors.append(f"{p}: key 'styles': {unknown} not among the styles of {META_FILE}")
    if "actions" in arrays:
        A = arrays["actions"].shape[1]
        if meta.actions is None:
            errors.append(f"{p}: key 'actions': clip has actions but {META_FILE} has "
                          "'actions': null")
        elif A != len(meta.actions):
            errors.append(f"{p}: key 'actions': {A} columns but {META_FILE} names "
                          f"{len(meta.actions)}")
    elif meta.actions is not None:
        errors.append(f"{p}: key 'actions': missing, but {META_FILE} declares action columns")
    return errors


def is_episodes_folder(root: str | os.PathLike[str]) -> bool:
    """True for an episodes folder (``episodes.json`` or ``episodes/``, no ``dataset.json``):
    what ``alaya record`` and ``alaya import video`` write (docs/episodes.md)."""
    root = Path(root)
    return not (root / META_FILE).exists() and (
        (root / EPISODES_FILE).exists() or (root / EPISODES_DIR).is_dir())


def validate_folder(root: str | os.PathLike[str], *, progress: bool = True) -> list[str]:
    """``validate_episodes`` for an episodes folder, else ``validate_dataset``."""
    if is_episodes_folder(root):
        return validate_episodes(root)
    return validate_dataset(root, progress=progress)


def _unlisted_clip_problems(clips_dir: Path) -> list[str]:
    """With an unusable dataset.json: each clip file's contract and invariants on its own."""
    errors: list[str] = []
    for path in sorted(clips_dir.glob("*.npz")) if clips_dir.is_dir() else ():
        if path.name.startswith("."):
            continue
        try:
            errors += check_invariants(read_clip(path), path=path)
        except ClipError as e:
            errors.append(str(e))
    return errors


def validate_dataset(root: str | os.PathLike[str], *, progress: bool = True) -> list[str]:
    """Check a dataset folder end to end; returns every error found ([] when valid).

    Each error names the file (and the key or field). Every problem of ``dataset.json`` is
    reported at once; with a broken ``dataset.json`` each clip file is still checked on its own.
    Reads every clip completely.
    """
    root = Path(root)
    clips_dir = root / CLIPS_DIR
    try:
        meta = read_meta(root)
    except MetaError as e:
        return [str(p) for p in e.problems] + _unlisted_clip_problems(clips_dir)
    if not clips_dir.is_dir():
        return [f"{clips_dir}: folder missing"]
    errors: list[str] = []
    on_disk: set[str] = set()
    for entry in sorted(clips_dir.iterdir()):
        if entry.name.startswith("."):
            continue  # temporary files of writers in progress or killed
        if entry.suffix != ".npz" or not entry.is_file():
            errors.append(f"{entry}: unexpected entry in {CLIPS_DIR}/ (only <clip_id>.npz)")
            continue
        on_disk.add(entry.stem)
    for cid in sorted(on_disk - set(meta.clips)):
        errors.append(f"{clips_dir / (cid + '.npz')}: not listed in {META_FILE}")
    listed = sorted(meta.clips)
    for cid in tqdm(listed, desc="validate", unit="clip", disable=not progress):
        path = clips_dir / f"{cid}.npz"
        if cid not in on_disk:
            errors.append(f"{path}: listed in {META_FILE} but missing")
            continue
        try:
            arrays = read_clip(path)
        except ClipError as e:
            errors.append(str(e))
            continue
        errors += check_invariants(arrays, num_materials=len(meta.materials), path=path)
        errors += check_against_meta(arrays, meta, path)
    return errors


def read_valid_clip(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """``read_clip`` plus ``check_invariants``: a clip that may be trusted (``alaya render --clip``).

    Inside a dataset folder (``DATASET/clips/ID.npz`` beside a readable ``dataset.json``) the
    material ids are checked against its library and the clip against ``check_against_meta``.
    Raises ``ClipError`` listing every problem, each naming the file and the key.
    """
    path = Path(path)
    arrays = read_clip(path)
    meta = None
    if path.parent.name == CLIPS_DIR and (path.parent.parent / META_FILE).exists():
        try:
            meta = read_meta(path.parent.parent)
        except MetaError:
            meta = None                  # the clip alone is still checked; alaya validate says why
    errors = check_invariants(arrays, num_materials=None if meta is None else len(meta.materials),
                              path=path)
    if meta is not None:
        errors += check_against_meta(arrays, meta, path)
    if errors:
        raise ClipError(path, None, f"breaks the clip contract ({len(errors)} problem(s)):\n"
                        + "\n".join(errors))
    return arrays

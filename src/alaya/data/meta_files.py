"""The JSON meta files of dataset folders (``dataset.json``, ``episodes.json``): reading,
validating field by field, and writing atomically.

``MetaError`` names the file and the field; ``Problems`` collects them, so one read reports
every bad field. ``build_meta`` builds a meta dataclass from parsed JSON, ``read_meta_file`` and
``write_meta_file`` read and write one, and ``ListedFolder`` is a folder whose meta file lists
its entries. ``need``, ``is_int`` and ``is_num`` are the field checks' building blocks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from alaya.io import atomic_write_text

MISSING: Any = object()     # a field absent from the file (reported once, as 'missing')
M = TypeVar("M")


class MetaError(ValueError):
    """An invalid meta file; the message names the file and the field.

    Raised for the first problem found; ``problems`` holds every problem of the file (this one
    first), each a ``MetaError`` naming its own field, so one read reports them all.
    """

    def __init__(self, field: str, message: str, path: str) -> None:
        self.field = field
        self.path = path
        self.problems: list[MetaError] = [self]
        super().__init__(f"{path}: field '{field}': {message}")


class Problems(list):
    """Collects ``MetaError``s: ``check(fn, *args)`` runs one check and keeps its error, so the
    checks of independent fields all run. ``raise_first()`` raises the first (``problems`` set)."""

    def check(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except MetaError as e:
            self.append(e)

    def raise_first(self) -> None:
        if self:
            first = self[0]
            first.problems = list(self)
            raise first


def need(cond: bool, field: str, message: str, path: str) -> None:
    """Raise ``MetaError(field, message, path)`` unless ``cond``."""
    if not cond:
        raise MetaError(field, message, path)


def is_int(x: Any) -> bool:
    """An int, not a bool."""
    return isinstance(x, int) and not isinstance(x, bool)


def is_num(x: Any) -> bool:
    """A finite int or float, not a bool."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and np.isfinite(x)


def top_level_fields(data: Any, names: list[str], path: str) -> Problems:
    """Problems of a parsed JSON file's top level: not an object, unknown and missing fields."""
    problems = Problems()
    if not isinstance(data, dict):
        problems.append(MetaError("<root>", "expected a JSON object", path))
        return problems
    problems += [MetaError(k, "unknown field", path) for k in data if k not in names]
    problems += [MetaError(k, "missing", path) for k in names if k not in data]
    return problems


def parse_json(text: str, path: str) -> Any:
    """``json.loads``, its error a ``MetaError`` naming the file."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise MetaError("<root>", f"invalid JSON: {e}", path) from e


def build_meta(cls: type[M], data: Any, path: str, problems_of: Callable[[M, str], Problems]) -> M:
    """A meta dataclass from parsed JSON; raises ``MetaError``: the first problem, its
    ``problems`` listing every one (the top level's, then ``problems_of``'s for the fields present)."""
    names = [f.name for f in fields(cls)]
    problems = top_level_fields(data, names, path)
    if isinstance(data, dict):          # check the fields present, even with others missing
        meta = cls(**{k: data.get(k, MISSING) for k in names})
        problems += problems_of(meta, path)
    problems.raise_first()
    return meta


def write_meta_file(path: Path, meta: Any, problems_of: Callable[[Any, str], Problems]) -> Path:
    """Validate ``meta`` and write its ``to_json()`` to ``path`` atomically; returns ``path``."""
    problems_of(meta, str(path)).raise_first()
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(path, meta.to_json())


def read_meta_file(path: Path, from_json: Callable[[str, str], M]) -> M:
    """``from_json`` of a meta file's text; a file that cannot be read is a ``MetaError``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise MetaError("<root>", f"cannot read ({e.strerror or e})", str(path)) from e
    return from_json(text, str(path))


class ListedFolder:
    """A folder whose meta file lists its entries (``_entries()``: id -> info): ``len``, ``in``,
    and iteration over ``ids()``, sorted."""

    def _entries(self) -> dict[str, Any]:
        raise NotImplementedError

    def ids(self, split: str | None = None) -> list[str]:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._entries())

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids())

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._entries()

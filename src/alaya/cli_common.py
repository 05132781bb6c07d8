"""What the ``alaya`` commands share (``cli.py``, ``cli_train.py``, ``cli_world.py``): the text
summary an evaluation prints."""

from __future__ import annotations

from collections.abc import Iterable


def print_metrics(out: dict, keys: Iterable[str], width: int = 28) -> None:
    """One line per metric of ``keys`` that ``out`` holds: its name, then its value to 4 decimals
    (``-`` where it is None)."""
    for k in keys:
        if k in out:
            print(f"{k:{width}s} {'-' if out[k] is None else f'{out[k]:.4f}'}")

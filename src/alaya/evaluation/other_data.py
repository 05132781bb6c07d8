"""Honest metrics on data that is not our game's (``alaya eval world --data`` of any recording).

* ``data_action_ranges``: the action columns a dataset uses and each one's range over its train
  split. An outside game recorded through ``alaya record gym`` uses a few columns, often one
  way only (MiniWorld's mazes walk forward, never back), so scripted inputs are fitted to these
  ranges (``fit_actions``) and a scripted test that needs a value the data never has is skipped,
  with the reason, rather than scored on inputs the model never saw.
* ``idm_mismatch``: the inverse-dynamics model must have been trained on the same kind of data,
  else ``idm_ratio`` compares the model against a judge that cannot read those frames. "The same
  kind" is read from the episode ids, which name their generator (``ep00012`` is our game,
  ``MiniWorld-Maze-v0-seed3`` a MiniWorld maze): the IDM's training episodes and the dataset's
  must share a generator prefix (the id without its trailing number).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np

from alaya.data.actions import ACTION_COLUMNS, ACTION_DIM, check_actions


def data_action_ranges(root: str | os.PathLike[str], split: str | None = "train") -> dict[str, tuple[float, float]]:
    """{column: (min, max)} over ``split``'s episodes (all of them when the split has none) of the
    columns ``episodes.json`` names that are non-zero in some frame (0 is always in the range:
    frame 0's row is zero)."""
    from alaya.data.episodes import EpisodeDataset
    ds = EpisodeDataset(root)
    ids = ds.ids(split) if split and ds.ids(split) else ds.ids()
    lo, hi = np.zeros(ACTION_DIM), np.zeros(ACTION_DIM)
    for eid in ids:
        with np.load(ds.path(eid), allow_pickle=False) as z:
            a = check_actions(z["actions"], f"{Path(ds.path(eid)).name}: actions")
        lo, hi = np.minimum(lo, a.min(0)), np.maximum(hi, a.max(0))
    named = set(ds.meta.action_columns)
    return {c: (float(lo[i]), float(hi[i])) for i, c in enumerate(ACTION_COLUMNS)
            if c in named and (lo[i] != 0 or hi[i] != 0)}


def fit_actions(actions: np.ndarray, ranges: dict[str, tuple[float, float]] | None) -> tuple[np.ndarray, list[str]]:
    """``actions`` (T, 8) with every column clipped into the data's range (a column the data does
    not use becomes 0); returns them and the columns that changed. ``ranges`` None: unchanged."""
    if ranges is None:
        return actions, []
    out, changed = actions.copy(), []
    for i, c in enumerate(ACTION_COLUMNS):
        lo, hi = ranges.get(c, (0.0, 0.0))
        out[:, i] = np.clip(out[:, i], lo, hi)
        if not np.array_equal(out[:, i], actions[:, i]):
            changed.append(c)
    return out, changed


def _kinds(ids) -> set[str]:
    return {re.sub(r"\d+$", "", str(i)) for i in ids}


def idm_mismatch(idm_folder: str | os.PathLike[str], dataset_ids) -> str | None:
    """Why the IDM of ``idm_folder`` cannot judge these episodes, or None when it can: it was
    trained on episodes of the same generator (``config.json``'s ``trained.train_episodes``)."""
    path = Path(idm_folder) / "config.json"
    try:
        trained = json.loads(path.read_text()).get("trained", {})
    except (OSError, json.JSONDecodeError) as err:
        return f"{path}: unreadable ({err})"
    theirs, ours = _kinds(trained.get("train_episodes") or []), _kinds(dataset_ids)
    if not theirs:
        return f"{path} does not list the episodes it was trained on"
    if theirs & ours:
        return None
    return (f"the inverse-dynamics model {idm_folder} was trained on other data "
            f"({', '.join(sorted(theirs))}*, not {', '.join(sorted(ours))}*): train one on this data "
            "(alaya train idm --data ...) and pass --idm")

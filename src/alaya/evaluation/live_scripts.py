"""The action scripts of the live evaluation (``alaya eval world --live``, docs/world.md "Live
evaluation"): what a player does in one minute at 30 FPS, played alike by a world model and by
the real game.

- ``play``: 1,800 frames of walking, turning, strafing, backing up, looking up and down and
  standing, held 15–60 frames at a time, with jumps, attacks, spells and summons on about 3% of
  the frames (at least 8 frames apart);
- ``still``: a short walk (30 frames forward), then 600 frames with no action at all;
- ``walk_back``: walk forward 90 frames, turn around (180°: 60 frames at turn = 1), walk
  forward 90 frames (back to the start), turn around again: the player stands where it
  started, facing the way it started.

Every script is deterministic from its seed and uses only the action columns the data has
(``data_action_columns``): a kind of move or one-shot action the data lacks is left out of
``play``, and a script that cannot go without one is skipped; ``live_scripts`` says which.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from alaya.data.actions import ACTION_COLUMNS, ACTION_DIM, ONE_SHOT, NavigationScale, check_actions
from alaya.evaluation.scripted_play import LOOK_RANGE_DEGREES, PITCH_DEGREES_PER_FRAME, START_PITCH_DEGREES

FPS = 30
MINUTE = 60 * FPS                   # frames of the 1-minute play script
STILL_FRAMES = 600                  # standing still, after ...
SHORT_WALK = 30                     # ... this many frames of walking forward
WALK_OUT = 90                       # walk_back: frames out, then as many back
SCRIPTS = ("play", "still", "walk_back")
SHOT_RATE, SHOT_COOLDOWN = 0.03, 8  # play: one-shot actions per frame, frames between two

# play's kinds of move: (columns it needs, draw weight)
MOVES = {"walk": (("forward",), 0.25), "walk_turn": (("forward", "turn"), 0.15), "turn": (("turn",), 0.15),
         "strafe": (("strafe",), 0.15), "back": (("forward",), 0.05), "look": (("pitch",), 0.1),
         "stand": ((), 0.15)}
REQUIRED = {"play": (), "still": (), "walk_back": ("forward", "turn")}


@dataclass
class LiveScript:
    """One script: ``actions`` (T, 8), row t taking frame t − 1 to frame t (frame 0 is the start),
    and its landmarks: ``still_from`` (the frame where the player stops; still frames follow) or
    ``turning_point`` / ``back`` (walk_back: far end, frame where the walk back ends)."""
    name: str
    actions: np.ndarray
    marks: dict[str, int] = field(default_factory=dict)


def turn_around_frames(scale: NavigationScale = NavigationScale(), fps: float = FPS) -> int:
    """Frames at turn = 1 that turn the player by 180° (60 at 90°/s and 30 FPS)."""
    return round(math.pi / (scale.turn_rate / fps))


def _col(name: str) -> int:
    return ACTION_COLUMNS.index(name)


def play_script(n: int, seed: int = 0, columns=ACTION_COLUMNS) -> np.ndarray:
    """(n, 8): the 1-minute mixture (module docstring), from ``seed``, in ``columns`` only."""
    rng = np.random.default_rng(seed)
    kinds = [k for k, (need, _) in MOVES.items() if set(need) <= set(columns)]
    weights = np.array([MOVES[k][1] for k in kinds])
    out = np.zeros((n, ACTION_DIM), np.float32)
    t, pitch, pitch_step = 0, START_PITCH_DEGREES, PITCH_DEGREES_PER_FRAME
    while t < n:
        kind, d = kinds[rng.choice(len(kinds), p=weights / weights.sum())], int(rng.integers(15, 61))
        row = np.zeros(ACTION_DIM, np.float32)
        if kind == "walk":
            row[_col("forward")] = rng.choice([1.0, 1.0, 0.5])
        elif kind == "walk_turn":
            row[_col("forward")], row[_col("turn")] = 1.0, rng.choice([-0.5, 0.5])
        elif kind == "turn":
            row[_col("turn")] = rng.choice([-1.0, -0.5, 0.5, 1.0])
        elif kind == "strafe":
            row[_col("strafe")] = rng.choice([-1.0, 1.0])
        elif kind == "back":
            row[_col("forward")] = -0.5
        elif kind == "look":           # towards a pitch in the recorded players' range, then stop
            target = rng.uniform(*LOOK_RANGE_DEGREES)
            row[_col("pitch")] = 0.5 if target > pitch else -0.5
            d = max(1, min(d, int(abs(target - pitch) / (0.5 * pitch_step))))
            pitch += row[_col("pitch")] * pitch_step * d
        out[t:t + d] = row
        t += d
    shots = [a for a in ONE_SHOT if a in columns]
    last = -SHOT_COOLDOWN
    for t in range(n):
        draw, pick = rng.random(), rng.integers(max(len(shots), 1))     # two draws a frame, always
        if shots and t - last >= SHOT_COOLDOWN and draw < SHOT_RATE:
            out[t, _col(shots[pick])], last = 1.0, t
    return check_actions(out)


def still_script(walk: int, still: int, columns=ACTION_COLUMNS) -> LiveScript:
    """``walk`` frames forward (none if the data has no ``forward``), then ``still`` frames of nothing."""
    walk = walk if "forward" in columns else 0
    out = np.zeros((walk + still, ACTION_DIM), np.float32)
    out[:walk, _col("forward")] = 1.0
    return LiveScript("still", out, {"still_from": walk})


def walk_back_script(out: int, turn: int | None = None) -> LiveScript:
    """Forward ``out`` frames, turn around, forward ``out`` frames, turn around again."""
    turn = turn_around_frames() if turn is None else turn
    rows = np.zeros((2 * out + 2 * turn, ACTION_DIM), np.float32)
    rows[:out, _col("forward")] = 1.0
    rows[out:out + turn, _col("turn")] = 1.0
    rows[out + turn:2 * out + turn, _col("forward")] = 1.0
    rows[2 * out + turn:, _col("turn")] = 1.0
    return LiveScript("walk_back", rows, {"turning_point": out, "back": 2 * out + turn})


def scaled(frames: int, full: int) -> int:
    """``full`` (a length in the 1-minute scripts) scaled to a ``frames``-frame minute, at least 1."""
    return max(1, round(full * frames / MINUTE))


def live_scripts(names=SCRIPTS, frames: int = MINUTE, seed: int = 0,
                 columns=ACTION_COLUMNS) -> tuple[dict[str, LiveScript], dict]:
    """The scripts ``names`` ({name: LiveScript}) and what was skipped: {"actions": columns the
    scripts would use but ``columns`` lacks, "scripts": {name: why}}. ``frames`` < 1,800 shortens
    them in proportion (standing still ``frames`` / 3, the walks ``frames`` / 60 and / 20); the
    turns of walk_back stay 180° (60 frames)."""
    unknown = [n for n in names if n not in SCRIPTS]
    if unknown or not names:
        raise ValueError(f"scripts: expected some of {', '.join(SCRIPTS)}, got {list(names)}")
    if frames < 1:
        raise ValueError(f"frames must be >= 1, got {frames}")
    bad = [c for c in columns if c not in ACTION_COLUMNS]
    if bad:
        raise ValueError(f"columns: unknown action columns {bad}; expected some of {list(ACTION_COLUMNS)}")
    missing = [c for c in ACTION_COLUMNS if c not in columns]
    scripts, skipped = {}, {}
    used: set[str] = set()
    for name in dict.fromkeys(names):
        lacks = [c for c in REQUIRED[name] if c not in columns]
        if lacks:
            skipped[name] = f"the data has no {', '.join(lacks)} column"
            used.update(lacks)
            continue
        if name == "play":
            s = LiveScript("play", play_script(frames, seed, columns))
            used.update(ACTION_COLUMNS)            # play mixes every action it can
        elif name == "still":
            s = still_script(scaled(frames, SHORT_WALK), scaled(frames, STILL_FRAMES), columns)
            used.add("forward")
        else:
            s = walk_back_script(scaled(frames, WALK_OUT))
        scripts[name] = s
    return scripts, {"actions": [c for c in missing if c in used], "scripts": skipped}


def data_action_columns(root: str | os.PathLike[str], split: str | None = "train") -> list[str]:
    """The action columns an episodes dataset has: those ``episodes.json`` names that are non-zero
    in some frame of ``split``'s episodes (all of them when the split has none). Only the
    ``actions`` array of each episode file is read, and checked (``check_actions``)."""
    from alaya.data.episodes import EpisodeDataset
    ds = EpisodeDataset(root)
    ids = ds.ids(split) if split and ds.ids(split) else ds.ids()
    used = np.zeros(ACTION_DIM, bool)
    for eid in ids:
        with np.load(ds.path(eid), allow_pickle=False) as z:
            used |= (check_actions(z["actions"], f"{Path(ds.path(eid)).name}: actions") != 0).any(0)
    named = [c for c in ds.meta.action_columns if c in ACTION_COLUMNS]
    return [c for c, u in zip(ACTION_COLUMNS, used) if u and c in named]

"""Do the one-shot actions show? Part of the live evaluation (``alaya eval world --live``;
docs/world.md, "Live evaluation").

A short script (``action_script``) plays each one-shot action the data has (jump, attack, spell,
summon) once while standing and once while walking, ``GAP`` frames apart. It is played twice in a
session and twice in the real game: as written, and with the one-shot columns zeroed. An action's
*response* is the mean absolute difference between the two, in grey levels, over the ``SPAN``
frames from the action on: what pressing the key changed on screen. ``action_ratio`` is the
generated response over the game's, per action (1: as visible as in the game; 0: the key does
nothing). The frames of both runs, with and without, go into the report's picture.
"""

from __future__ import annotations

import numpy as np

from alaya.data.actions import ACTION_COLUMNS, ACTION_DIM, ONE_SHOT, check_actions

LEAD = 6      # frames walking forward before the first action (the memory has seen some motion)
GAP = 24      # frames from one action to the next
SPAN = 12     # frames after an action over which its response is measured


def action_script(columns=ACTION_COLUMNS) -> tuple[np.ndarray, dict[str, list[int]]]:
    """(T, 8) rows and {action: [its frames]}: each one-shot action in ``columns`` played once
    standing, then each once walking forward, ``GAP`` frames apart after ``LEAD`` frames of
    walking. Frames are counted as rows: row t takes frame t - 1 to frame t."""
    shots = [a for a in ONE_SHOT if a in columns]
    walk = "forward" in columns
    T = LEAD + GAP * len(shots) * (2 if walk else 1)
    rows = np.zeros((T, ACTION_DIM), np.float32)
    if walk:
        rows[:LEAD, ACTION_COLUMNS.index("forward")] = 1.0
    at: dict[str, list[int]] = {a: [] for a in shots}
    for k, (moving, a) in enumerate((m, a) for m in ((False, True) if walk else (False,)) for a in shots):
        t = LEAD + GAP * k
        if moving:
            rows[t:t + GAP, ACTION_COLUMNS.index("forward")] = 1.0
        rows[t, ACTION_COLUMNS.index(a)] = 1.0
        at[a].append(t)
    return check_actions(rows), at


def without_shots(rows: np.ndarray) -> np.ndarray:
    """``rows`` with the one-shot columns zeroed (the moves kept)."""
    out = rows.copy()
    out[:, len(ACTION_COLUMNS) - len(ONE_SHOT):] = 0.0
    return out


def responses(with_shots: np.ndarray, without: np.ndarray, at: dict[str, list[int]]) -> dict[str, float]:
    """{action: mean |frame with - frame without| in grey levels over ``SPAN`` frames from each of
    its frames}; the frames (T, S, S, 3) uint8 are those after the start (index t - 1 is frame t)."""
    if with_shots.shape != without.shape:
        raise ValueError(f"frames with {with_shots.shape} and without {without.shape} the actions disagree")
    diff = np.abs(with_shots.astype(np.float32) - without.astype(np.float32)).mean((1, 2, 3))
    return {a: float(np.mean([diff[t - 1:t - 1 + SPAN].mean() for t in frames])) for a, frames in at.items()}


def play_actions(play_generated, play_real, scenes, columns=ACTION_COLUMNS) -> dict:
    """The response of each action, generated (``play_generated(scene, rows)``: a fresh session's
    frames) and real (``play_real(scene, rows)``), averaged over ``scenes``; their ratios and the
    smallest; and the first scene's four runs for the picture (``frames``)."""
    rows, at = action_script(columns)
    if not at:
        return {"skipped": "the data has no one-shot action column"}
    plain = without_shots(rows)
    gen, real, frames = [], [], {}
    for i, scene in enumerate(scenes):
        runs = {}
        for key, script in (("with", rows), ("without", plain)):
            runs["generated_" + key] = np.asarray(play_generated(scene, script))
            runs["real_" + key] = np.asarray(play_real(scene, script))
        gen.append(responses(runs["generated_with"], runs["generated_without"], at))
        real.append(responses(runs["real_with"], runs["real_without"], at))
        if i == 0:
            frames = {**runs, "at": at, "scene": scene.name}
    mean = lambda rs, a: float(np.mean([r[a] for r in rs]))     # noqa: E731
    per = {a: {"generated": mean(gen, a), "real": mean(real, a),
               "ratio": mean(gen, a) / max(mean(real, a), 1e-6)} for a in at}
    return {"frames_played": len(rows), "span": SPAN, "responses": per,
            "ratio_min": min(p["ratio"] for p in per.values()), "frames": frames}


def action_sheet(frames: dict, offsets=(0, 1, 3, 6)) -> np.ndarray:
    """uint8 picture: for each action's first (standing) frame t, the frames t + ``offsets`` in
    three rows (the real game, generated, generated without the action), actions side by side."""
    cols = []
    for a, ts in frames["at"].items():
        t = ts[0]
        rows = [np.concatenate([frames[k][min(t - 1 + o, len(frames[k]) - 1)] for o in offsets], 1)
                for k in ("real_with", "generated_with", "generated_without")]
        cols.append(np.concatenate(rows, 0))
    gap = np.full((cols[0].shape[0], 4, 3), 255, np.uint8)
    return np.concatenate([c for col in cols for c in (col, gap)][:-1], 1)

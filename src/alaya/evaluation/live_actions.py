"""Do the one-shot actions show? Part of the live evaluation (``alaya eval world --live``;
docs/world.md, "Live evaluation").

A short base script (``base_script``: a few frames of walking, then standing, then walking) is
played in a session and in the real game, and again once per one-shot action the data has (jump,
attack, spell, summon) and per moment (standing, walking) with that action added at one frame
(``with_action``). Up to that frame the two runs are the same (a session's noise is seeded by
frame), so what differs after it is the action's doing. An action's *response* is the mean
absolute difference between the two runs, in grey levels, over the ``SPAN`` frames from the
action on; ``ratio`` is the generated response over the game's (1: as strong as in the game;
0: the key does nothing). A ratio counts any change, also a faint one spread over the frame;
``placement`` (the correlation of the generated change's per-pixel map with the game's) says
whether it is where the game's is: the orb ahead, the blade at the side. An action shows only
where both are high; ``ratio_min`` and ``placement_min`` are the smallest over the actions.
"""

from __future__ import annotations

import numpy as np

from alaya.data.actions import ACTION_COLUMNS, ACTION_DIM, ONE_SHOT, check_actions

LEAD = 6      # frames walking forward first (the memory has seen some motion)
SPAN = 12     # frames after an action over which its response is measured
BEFORE = 3    # frames of each part (standing, walking) before its action


def base_script(columns=ACTION_COLUMNS) -> tuple[np.ndarray, dict[str, int]]:
    """(T, 8) rows with no one-shot action: ``LEAD`` frames forward, a standing part and a walking
    part of ``BEFORE + SPAN`` frames each (no walking where the data has no ``forward``), and the
    frame of each part where an action is added ({"standing": t, "walking": t}). Row t takes frame
    t - 1 to frame t."""
    walk = "forward" in columns
    part = BEFORE + SPAN
    rows = np.zeros((LEAD + part * (2 if walk else 1), ACTION_DIM), np.float32)
    moments = {"standing": LEAD + BEFORE}
    if walk:
        forward = ACTION_COLUMNS.index("forward")
        rows[:LEAD, forward] = 1.0
        rows[LEAD + part:, forward] = 1.0
        moments["walking"] = LEAD + part + BEFORE
    return check_actions(rows), moments


def with_action(rows: np.ndarray, action: str, frame: int) -> np.ndarray:
    """``rows`` with the one-shot ``action`` at row ``frame``."""
    out = rows.copy()
    out[frame, ACTION_COLUMNS.index(action)] = 1.0
    return check_actions(out)


def change(with_it: np.ndarray, without: np.ndarray, frame: int) -> np.ndarray:
    """(SPAN, S, S) float32: |frame with - frame without| in grey levels (channel mean) over the
    ``SPAN`` frames from row ``frame`` on; the frames (T, S, S, 3) uint8 are those after the start
    (index t - 1 is frame t)."""
    if with_it.shape != without.shape:
        raise ValueError(f"frames with {with_it.shape} and without {without.shape} the action disagree")
    part = slice(frame - 1, frame - 1 + SPAN)
    return np.abs(with_it[part].astype(np.float32) - without[part].astype(np.float32)).mean(-1)


def placement(generated: np.ndarray, real: np.ndarray) -> float:
    """Correlation of two ``change`` maps over frames and pixels: 1 where the generated change
    lies where the game's does, ~0 for a change elsewhere or spread thin (0 if either is flat)."""
    g, r = generated.ravel() - generated.mean(), real.ravel() - real.mean()
    den = float(np.sqrt((g * g).sum() * (r * r).sum()))
    return float((g * r).sum() / den) if den > 0 else 0.0


def play_actions(play_generated, play_real, scenes, columns=ACTION_COLUMNS) -> dict:
    """Each action's response, generated (``play_generated(scene, rows)``: a fresh session's
    frames) and real (``play_real(scene, rows)``), averaged over ``scenes`` and both moments;
    their ratios and the smallest; and the first scene's standing runs for the picture
    (``frames``)."""
    shots = [a for a in ONE_SHOT if a in columns]
    if not shots:
        return {"skipped": "the data has no one-shot action column"}
    rows, moments = base_script(columns)
    got = {a: {"generated": [], "real": [], "placement": []} for a in shots}
    frames = {}
    for i, scene in enumerate(scenes):
        base = {"generated": np.asarray(play_generated(scene, rows)), "real": np.asarray(play_real(scene, rows))}
        if i == 0:
            frames = {"base": base["generated"], "frame": moments["standing"], "scene": scene.name, "actions": {}}
        for a in shots:
            for moment, t in moments.items():
                script = with_action(rows, a, t)
                run = {"generated": np.asarray(play_generated(scene, script)),
                       "real": np.asarray(play_real(scene, script))}
                maps = {kind: change(run[kind], base[kind], t) for kind in run}
                for kind, m in maps.items():
                    got[a][kind].append(float(m.mean()))
                got[a]["placement"].append(placement(maps["generated"], maps["real"]))
                if i == 0 and moment == "standing":
                    frames["actions"][a] = run
    per = {a: {k: float(np.mean(v)) for k, v in g.items()} for a, g in got.items()}
    for p in per.values():
        p["ratio"] = p["generated"] / max(p["real"], 1e-6)
    return {"frames_per_run": len(rows), "moments": list(moments), "span": SPAN, "responses": per,
            "ratio_min": min(p["ratio"] for p in per.values()),
            "placement_min": min(p["placement"] for p in per.values()), "frames": frames}


def action_sheet(frames: dict, offsets=(0, 1, 3, 6)) -> np.ndarray:
    """uint8 picture: for each action played standing at frame t, the frames t + ``offsets`` in
    three rows (the real game, generated, generated without the action), actions side by side."""
    t, cols = frames["frame"], []
    for run in frames["actions"].values():
        pick = lambda f: np.concatenate([f[min(t - 1 + o, len(f) - 1)] for o in offsets], 1)    # noqa: E731
        cols.append(np.concatenate([pick(run["real"]), pick(run["generated"]), pick(frames["base"])], 0))
    gap = np.full((cols[0].shape[0], 4, 3), 255, np.uint8)
    return np.concatenate([c for col in cols for c in (col, gap)][:-1], 1)

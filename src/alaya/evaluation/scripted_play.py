"""Scripted player inputs for ``alaya eval world`` (and its game reference): a long player-like
stream of actions, out-and-back loops, and standing still.

These are the evaluation's inputs, not its metrics: a world model is driven by them and the
recorded game can be driven by the same rows (``alaya.evaluation.world_reference``).
"""

from __future__ import annotations

import numpy as np

from alaya.data.actions import ACTION_COLUMNS, ACTION_DIM, NAVIGATION, ONE_SHOT, check_actions


LOOK_RANGE_DEGREES = (-25.0, 11.0)   # where the recorded players look (engine.players' pitch range)
PITCH_DEGREES_PER_FRAME = 2.0        # pitch = 1 at the game's rate and frame rate
START_PITCH_DEGREES = -5.73          # the game's pitch at a start frame


def scripted_actions(n: int, seed: int = 0) -> np.ndarray:
    """(n, 8) actions like a player's: navigation held for 8–60 frames at a time (mostly walking
    forward, sometimes strafing, turning or looking up and down, sometimes standing), one-shot
    actions on about 3% of the frames. Looking up or down goes towards a random pitch in the
    range the recorded players look in (``LOOK_RANGE_DEGREES``, from the start frame's pitch)
    and stops there, as a player's look does: a random walk of pitch actions would end up staring
    at the sky or the floor for hundreds of frames, which changes the real game's picture far more
    than any collapse (docs/evaluation.md)."""
    rng = np.random.default_rng(seed)
    out = np.zeros((n, ACTION_DIM), np.float32)
    t, pitch = 0, START_PITCH_DEGREES
    while t < n:
        d = int(rng.integers(8, 61))
        nav = np.zeros(len(NAVIGATION), np.float32)
        if rng.random() < 0.85:
            nav[0] = rng.choice([1.0, 1.0, 0.5, -0.5])
            nav[1] = rng.choice([0.0, 0.0, 0.0, 1.0, -1.0])
            nav[2] = rng.choice([0.0, 0.0, 0.0, 0.5, -0.5, 1.0, -1.0])
            if rng.random() < 0.2:                      # look towards a pitch in the players' range
                target = rng.uniform(*LOOK_RANGE_DEGREES)
                nav[3] = 0.5 if target > pitch else -0.5
                d = max(1, min(d, int(abs(target - pitch) / (0.5 * PITCH_DEGREES_PER_FRAME))))
                pitch += nav[3] * PITCH_DEGREES_PER_FRAME * d
        out[t:t + d, :len(NAVIGATION)] = nav
        t += d
    shots = np.flatnonzero(rng.random(n) < 0.03)
    out[shots, len(NAVIGATION) + rng.integers(len(ONE_SHOT), size=len(shots))] = 1.0
    return check_actions(out)


def loop_actions(n: int, kind: str) -> np.ndarray:
    """(2n, 8): ``turn`` = turn left (turn=1) n frames, then right n frames; ``move`` = forward n
    frames, then backward n frames."""
    column = {"turn": "turn", "move": "forward"}.get(kind)
    if column is None:
        raise ValueError(f"loop kind must be 'turn' or 'move', got {kind!r}")
    out = np.zeros((2 * n, ACTION_DIM), np.float32)
    out[:n, ACTION_COLUMNS.index(column)] = 1.0
    out[n:, ACTION_COLUMNS.index(column)] = -1.0
    return out


def still_actions(n: int) -> np.ndarray:
    """(n, 8): standing still, no action at all."""
    if n < 1:
        raise ValueError(f"still_actions: n must be >= 1, got {n}")
    return np.zeros((n, ACTION_DIM), np.float32)

"""The world model's action vector: what a player does between two frames.

One row of 8 float32 columns per frame (``ACTION_COLUMNS``); ``actions[t]`` is the input that
took frame t-1 to frame t (``actions[0]`` is all zeros: nothing led to the first frame).

* navigation, each in [-1, 1]: ``forward`` (+ ahead), ``strafe`` (+ right), ``turn`` (+ left,
  as a fraction of the game's turn rate), ``pitch`` (+ look up, a fraction of the pitch rate);
* one-shot actions, each 0 or 1, at most one per frame: ``jump``, ``attack``, ``spell``,
  ``summon``.

Prompt-driven actions arrive as text ("cast a fireball"); ``ActionText`` maps text to one of the
one-shot actions with the prompt encoder (nearest phrasing by cosine similarity), and refuses
text that is close to none of them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

ACTION_COLUMNS = ("forward", "strafe", "turn", "pitch", "jump", "attack", "spell", "summon")
ACTION_DIM = len(ACTION_COLUMNS)
NAVIGATION = ACTION_COLUMNS[:4]
ONE_SHOT = ACTION_COLUMNS[4:]

# Phrasings the text resolver matches against (training never sees these as strings: the model
# is conditioned on the action vector, so any phrasing that resolves works the same).
ACTION_PHRASES: dict[str, tuple[str, ...]] = {
    "jump": ("jump", "jump up", "hop into the air", "leap"),
    "attack": ("attack", "swing the sword", "strike", "hit it", "punch"),
    "spell": ("cast a spell", "cast a fireball", "shoot a magic bolt", "throw a fireball"),
    "summon": ("summon a creature", "summon a golem", "conjure a box", "spawn an object"),
}


@dataclass(frozen=True)
class NavigationScale:
    """What navigation value 1.0 means, per second: the game plays it (``alaya.engine.game``) and
    the video importer inverts it (pose deltas -> actions). World z is up; yaw is measured
    counter-clockwise from +x, so a positive turn turns left."""
    move_speed: float = 3.0                   # m/s for forward = 1 (and strafe = 1)
    turn_rate: float = math.radians(90.0)     # rad/s for turn = 1
    pitch_rate: float = math.radians(60.0)    # rad/s for pitch = 1


class ActionError(ValueError):
    """An action (vector, array or text) that breaks the contract; names the frame and column."""


def action_vector(forward: float = 0.0, strafe: float = 0.0, turn: float = 0.0, pitch: float = 0.0,
                  act: str | None = None) -> np.ndarray:
    """One checked (8,) float32 action row."""
    row = np.zeros(ACTION_DIM, np.float32)
    for i, (name, value) in enumerate(zip(NAVIGATION, (forward, strafe, turn, pitch))):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ActionError(f"{name} must be a number, got {value!r}")
        row[i] = value
    if act is not None:
        if act not in ONE_SHOT:
            raise ActionError(f"unknown action {act!r}; valid: {', '.join(ONE_SHOT)}")
        row[ACTION_COLUMNS.index(act)] = 1.0
    return check_actions(row)


def check_actions(actions, where: str = "actions") -> np.ndarray:
    """``actions`` as float32 of shape (8,) or (T, 8), or an ActionError naming the frame and
    column at fault: non-finite values, navigation outside [-1, 1], one-shot columns other than
    0/1, or two one-shot actions in one frame."""
    try:
        a = np.asarray(actions, dtype=np.float32)
    except (TypeError, ValueError) as err:
        raise ActionError(f"{where}: not a numeric array ({err})") from None
    if a.ndim not in (1, 2) or a.shape[-1] != ACTION_DIM:
        raise ActionError(f"{where}: expected shape ({ACTION_DIM},) or (T, {ACTION_DIM}) with columns "
                          f"{', '.join(ACTION_COLUMNS)}; got {a.shape}")
    rows = a.reshape(-1, ACTION_DIM)

    def fail(mask: np.ndarray, what: str) -> None:
        t, j = np.argwhere(mask)[0]
        frame = f" frame {t}" if a.ndim == 2 else ""
        raise ActionError(f"{where}:{frame} column '{ACTION_COLUMNS[j]}' {what}, got {float(rows[t, j])!r}")

    if not np.isfinite(rows).all():
        fail(~np.isfinite(rows), "must be finite")
    nav = rows[:, :len(NAVIGATION)]
    if (np.abs(nav) > 1.0).any():
        fail(np.pad(np.abs(nav) > 1.0, ((0, 0), (0, len(ONE_SHOT)))), "must be in [-1, 1]")
    shots = rows[:, len(NAVIGATION):]
    if ((shots != 0) & (shots != 1)).any():
        fail(np.pad((shots != 0) & (shots != 1), ((0, 0), (len(NAVIGATION), 0))), "must be 0 or 1")
    many = shots.sum(1) > 1
    if many.any():
        t = int(np.flatnonzero(many)[0])
        names = [ONE_SHOT[j] for j in np.flatnonzero(shots[t])]
        frame = f" frame {t}" if a.ndim == 2 else ""
        raise ActionError(f"{where}:{frame} at most one one-shot action per frame, got {', '.join(names)}")
    return a


def one_shot(row: np.ndarray) -> str | None:
    """The one-shot action of a checked row, or None."""
    hits = np.flatnonzero(np.asarray(row)[len(NAVIGATION):])
    return ONE_SHOT[int(hits[0])] if len(hits) else None


class ActionText:
    """Free text -> one-shot action, through the prompt encoder's embeddings."""

    def __init__(self, encoder, phrases: Mapping[str, tuple[str, ...]] = ACTION_PHRASES,
                 threshold: float = 0.45):
        self.encoder = encoder
        self.threshold = threshold
        self._names = [name for name, texts in phrases.items() for _ in texts]
        self._texts = [text for texts in phrases.values() for text in texts]
        self._table = None

    def resolve(self, text: str) -> str:
        """The one-shot action whose phrasing is nearest to ``text``; ActionError if the best
        cosine similarity is below ``threshold`` (the text names no action we know)."""
        if not isinstance(text, str) or not text.strip():
            raise ActionError(f"action text must be a non-empty string, got {text!r}")
        if text.strip().lower() in ONE_SHOT:
            return text.strip().lower()
        if self._table is None:
            self._table = self.encoder.encode(self._texts)
        query = self.encoder.encode(text)[0]
        scores = self._table @ query
        best = int(scores.argmax())
        if float(scores[best]) < self.threshold:
            raise ActionError(f"action text {text!r} matches no action (closest: "
                              f"{self._texts[best]!r}, similarity {float(scores[best]):.2f} < "
                              f"{self.threshold}); try e.g. {', '.join(repr(p[0]) for p in ACTION_PHRASES.values())}")
        return self._names[best]

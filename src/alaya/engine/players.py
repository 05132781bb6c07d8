"""Scripted players for the game mode: seeded agents that play long, varied episodes.

A ``ScriptedPlayer`` holds a navigation "intent" (walk, walk and turn, turn in place, strafe,
back up, stand, look around; keyboard-like ±1 values or analog ones) for a random number of
frames, steers away from walls it is about to walk into (or, on a ``wall_contact`` share of the
walls it meets, keeps walking into one and along it for a while, as players do), keeps its
pitch near a wandering target, and now and then fires a one-shot action (jump, attack, spell,
summon) with a cooldown, so every action appears often and in every context. Same seed + same
game = same episode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from alaya.data.actions import ACTION_DIM, ONE_SHOT, action_vector
from alaya.engine.camera import yaw_pitch_direction

# intent -> (weight, forward, strafe, turn); signs of strafe and turn are drawn per intent
_INTENTS = {
    "walk": (4.0, 1.0, 0.0, 0.0),
    "walk_turn": (3.0, 1.0, 0.0, 0.6),
    "turn": (2.5, 0.0, 0.0, 1.0),
    "strafe": (1.5, 0.0, 1.0, 0.0),
    "back": (0.8, -1.0, 0.0, 0.0),
    "stand": (1.0, 0.0, 0.0, 0.0),
    "diagonal": (1.0, 1.0, 1.0, 0.0),
}


@dataclass
class PlayerConfig:
    hold_frames: tuple[int, int] = (8, 45)     # an intent lasts this many frames
    analog: float = 0.3                        # share of intents with analog (not ±1) values
    action_rate: float = 0.05                  # chance per frame of a one-shot action
    cooldown: int = 8                          # frames between one-shot actions
    action_weights: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)   # jump, attack, spell, summon
    wall_distance: float = 1.2                 # turn away from walls closer than this
    wall_contact: float = 0.0                  # share of the walls met that the player walks into and
                                               # along instead (the game's collision stops it there)
    contact_frames: tuple[int, int] = (20, 90)  # ... for this many frames, its intent held
    pitch_range: tuple[float, float] = (-0.45, 0.2)   # radians the pitch target wanders in

    def __post_init__(self):
        if not 0.0 <= float(self.wall_contact) <= 1.0:
            raise ValueError(f"wall_contact: a share in [0, 1], got {self.wall_contact!r}")
        lo, hi = self.contact_frames
        if not 1 <= lo <= hi:
            raise ValueError(f"contact_frames: expected 1 <= low <= high, got {self.contact_frames!r}")


class ScriptedPlayer:
    def __init__(self, seed: int, config: PlayerConfig | None = None):
        self.config = config or PlayerConfig()
        self.rng = np.random.default_rng([seed, 9001])
        self._intent = (0.0, 0.0, 0.0)
        self._left = 0
        self._cooldown = 0
        self._pitch_target = -0.1
        self._escape = 0                           # frames left of turning away from a wall
        self._escape_sign = 1.0
        self._contact = 0                          # frames left of pressing on into a wall

    def _new_intent(self) -> None:
        c, rng = self.config, self.rng
        names = list(_INTENTS)
        weights = np.array([_INTENTS[n][0] for n in names])
        name = names[rng.choice(len(names), p=weights / weights.sum())]
        _, forward, strafe, turn = _INTENTS[name]
        strafe *= rng.choice((-1.0, 1.0))
        turn *= rng.choice((-1.0, 1.0))
        if rng.random() < c.analog:
            forward, strafe, turn = (v * rng.uniform(0.3, 1.0) for v in (forward, strafe, turn))
        elif name == "walk_turn":
            turn = math.copysign(rng.choice((0.5, 1.0)), turn)
        self._intent = (forward, strafe, turn)
        self._left = int(rng.integers(c.hold_frames[0], c.hold_frames[1] + 1))
        if rng.random() < 0.3:
            self._pitch_target = float(rng.uniform(*c.pitch_range))

    def act(self, game) -> np.ndarray:
        """The next action row for ``game`` (a ``GameStream``), from its current state."""
        c, rng = self.config, self.rng
        if self._left <= 0:
            self._new_intent()
        self._left -= 1
        forward, strafe, turn = self._intent
        if self._contact > 0:
            self._contact -= 1
        elif self._escape > 0:
            self._escape -= 1
            forward, strafe, turn = 0.0, 0.0, self._escape_sign
        elif forward > 0 and game.world.ray(game.camera_position, yaw_pitch_direction(game.yaw, 0.0)) < c.wall_distance:
            if c.wall_contact > 0 and rng.random() < c.wall_contact:     # (no draw at 0: old episodes unchanged)
                self._contact = int(rng.integers(c.contact_frames[0], c.contact_frames[1] + 1))
                self._left = max(self._left, self._contact)              # the intent (a walk, a walk and turn) holds
            else:
                self._escape = int(rng.integers(15, 40))   # turn in place ~45-120 degrees
                self._escape_sign = float(rng.choice((-1.0, 1.0)))
                forward, strafe, turn = 0.0, 0.0, self._escape_sign
        nav = game.game.navigation
        step = nav.pitch_rate / game.game.fps
        pitch = float(np.clip((self._pitch_target - game.pitch) / step, -1.0, 1.0))
        if abs(pitch) < 0.15:
            pitch = 0.0
        act = None
        self._cooldown -= 1
        if self._cooldown <= 0 and rng.random() < c.action_rate:
            w = np.array(c.action_weights, float)
            act = ONE_SHOT[rng.choice(len(ONE_SHOT), p=w / w.sum())]
            if act == "jump" and game.airborne:
                act = None
            else:
                self._cooldown = c.cooldown
        row = action_vector(forward, strafe, turn, round(pitch, 3), act)
        assert row.shape == (ACTION_DIM,)
        return row

"""Gymnasium actions as world-model action rows (``alaya.data.actions``), for ``record_gym``.

``action_map`` turns the environment's action into a row of ``alaya.data.actions``;
``ACTION_MAPS`` holds maps for a few classic environments. Without one, a ``Box`` space of up to
4 dimensions maps onto the navigation columns (forward, strafe, turn, pitch in that order) after
rescaling its bounds to [-1, 1] (unbounded dimensions are clipped); a discrete space has no
meaningful default, and ``record_gym`` refuses it, naming the environment.
``action_map_from_json`` builds a map for a ``Discrete`` or ``MultiBinary`` space from JSON (what
``alaya record gym --action-map`` takes).

MiniWorld (Farama, ``pip install miniworld``) is mapped by default for every ``MiniWorld-*`` id
(``MINIWORLD_ACTIONS``: turn left / right -> turn +1 / -1, move forward / back -> forward +1 / -1,
the rest -> no movement).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from alaya.data.actions import ACTION_COLUMNS, ACTION_DIM, NAVIGATION, ActionError, action_vector, check_actions
from alaya.data.recorder import RecordError

ActionMap = Callable[[Any], np.ndarray]
Policy = Callable[[Any, np.random.Generator], Any]


class DiscreteActionMap:
    """A discrete environment action -> a fixed action row."""

    def __init__(self, rows: Mapping[int, np.ndarray], name: str) -> None:
        self.rows = {int(k): np.asarray(v, np.float32) for k, v in rows.items()}
        self.__name__ = name

    def __call__(self, env_action: Any) -> np.ndarray:
        key = int(np.asarray(env_action).reshape(-1)[0])
        if key not in self.rows:
            raise RecordError(f"action map {self.__name__}: no row for action {key} "
                              f"(known: {sorted(self.rows)})")
        return self.rows[key]


class BoxNavigationMap:
    """A ``Box`` of k <= 4 dims -> navigation columns forward, strafe, turn, pitch (the first k),
    each rescaled from its bounds to [-1, 1] when bounded, clipped to [-1, 1]."""

    def __init__(self, space: spaces.Box, columns: tuple[str, ...] = NAVIGATION,
                 signs: tuple[float, ...] | None = None) -> None:
        k = int(np.prod(space.shape))
        if k > len(columns):
            raise RecordError(f"a Box action space of {k} dims has no default map onto the "
                              f"{len(columns)} columns {columns}; pass action_map=")
        self.index = [NAVIGATION.index(c) for c in columns[:k]]
        self.signs = np.ones(k) if signs is None else np.asarray(signs[:k], np.float64)
        low, high = space.low.reshape(-1).astype(np.float64), space.high.reshape(-1).astype(np.float64)
        bounded = np.isfinite(low) & np.isfinite(high) & (high > low)
        self.centre = np.where(bounded, (low + high) / 2, 0.0)
        self.half = np.where(bounded, (high - low) / 2, 1.0)
        self.__name__ = f"box->{','.join(columns[:k])}"

    def __call__(self, env_action: Any) -> np.ndarray:
        a = np.asarray(env_action, np.float64).reshape(-1)
        row = np.zeros(ACTION_DIM, np.float32)
        row[self.index] = np.clip(self.signs * (a - self.centre) / self.half, -1.0, 1.0)
        return row


def _car_racing(env_action: Any) -> np.ndarray:
    """CarRacing: steer (+ right) -> turn (+ left), so turn = -steer; forward = gas - brake."""
    steer, gas, brake = (float(v) for v in np.asarray(env_action, np.float64).reshape(-1)[:3])
    return action_vector(forward=float(np.clip(gas - brake, -1, 1)),
                         turn=float(np.clip(-steer, -1, 1)))


_STILL = action_vector()
_LEFT, _RIGHT = action_vector(strafe=-1.0), action_vector(strafe=1.0)
_CW, _CCW = action_vector(turn=-1.0), action_vector(turn=1.0)

# Known environments: push the cart / car left or right -> strafe; torque on a joint -> turn
# (+ = counter-clockwise, like + turn = left).
ACTION_MAPS: dict[str, ActionMap] = {
    "CartPole-v0": DiscreteActionMap({0: _LEFT, 1: _RIGHT}, "cartpole"),
    "CartPole-v1": DiscreteActionMap({0: _LEFT, 1: _RIGHT}, "cartpole"),
    "MountainCar-v0": DiscreteActionMap({0: _LEFT, 1: _STILL, 2: _RIGHT}, "mountaincar"),
    "Acrobot-v1": DiscreteActionMap({0: _CW, 1: _STILL, 2: _CCW}, "acrobot"),
    "MountainCarContinuous-v0": BoxNavigationMap(
        spaces.Box(-1.0, 1.0, (1,), np.float32), columns=("strafe",)),
    "Pendulum-v1": BoxNavigationMap(spaces.Box(-2.0, 2.0, (1,), np.float32), columns=("turn",)),
    "CarRacing-v3": _car_racing,
}

# MiniWorld's actions (miniworld.miniworld.MiniWorldEnv.Actions): turn_left, turn_right,
# move_forward, move_back, pickup, drop, toggle, done; its rooms use the first 3 (or more).
MINIWORLD_ACTIONS = DiscreteActionMap({0: _CCW, 1: _CW, 2: action_vector(forward=1.0), 3: action_vector(forward=-1.0),
                                       4: _STILL, 5: _STILL, 6: _STILL, 7: _STILL}, "miniworld")


def _json_row(value: Any, where: str) -> np.ndarray:
    """One action row from JSON: {column: value, ...} (columns of ``ACTION_COLUMNS``, one-shot
    ones 0 or 1) or a list of the 8 values; checked."""
    if isinstance(value, dict):
        row = np.zeros(ACTION_DIM, np.float32)
        for name, v in value.items():
            if name not in ACTION_COLUMNS:
                raise RecordError(f"{where}: unknown column {name!r} (columns: {', '.join(ACTION_COLUMNS)})")
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise RecordError(f"{where}: column {name!r} must be a number, got {v!r}")
            row[ACTION_COLUMNS.index(name)] = v
    elif isinstance(value, list) and len(value) == ACTION_DIM:
        row = np.asarray(value, np.float32) if all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value) else None
        if row is None:
            raise RecordError(f"{where}: expected {ACTION_DIM} numbers, got {value!r}")
    else:
        raise RecordError(f"{where}: expected an object {{column: value}} or a list of {ACTION_DIM} "
                          f"numbers ({', '.join(ACTION_COLUMNS)}), got {value!r}")
    try:
        return check_actions(row, where)
    except ActionError as err:
        raise RecordError(str(err)) from None


class MultiBinaryActionMap:
    """A ``MultiBinary`` action (bits) -> the rows of its set bits combined: navigation columns
    added and clipped to [-1, 1]; of the one-shot actions, the lowest set bit's (at most one per
    frame). Bits without a row do nothing."""

    def __init__(self, rows: Mapping[int, np.ndarray], n: int, name: str = "multibinary") -> None:
        self.rows = {int(k): np.asarray(v, np.float32) for k, v in rows.items()}
        self.n = n
        self.__name__ = name

    def __call__(self, env_action: Any) -> np.ndarray:
        bits = np.asarray(env_action).reshape(-1)
        row = np.zeros(ACTION_DIM, np.float32)
        shot = False
        for i in np.flatnonzero(bits):
            r = self.rows.get(int(i))
            if r is None:
                continue
            row[:len(NAVIGATION)] += r[:len(NAVIGATION)]
            if not shot and r[len(NAVIGATION):].any():
                row[len(NAVIGATION):] = r[len(NAVIGATION):]
                shot = True
        row[:len(NAVIGATION)] = np.clip(row[:len(NAVIGATION)], -1.0, 1.0)
        return row


def action_map_from_json(spec: str | Mapping[str, Any], space: spaces.Space, env_id: str = "env") -> ActionMap:
    """An action map for a ``Discrete`` or ``MultiBinary`` space from JSON text (or its parsed
    object): ``{"<action or bit>": row, ...}`` where a row is ``{column: value}`` (e.g.
    ``{"strafe": -1}``, ``{"jump": 1}``) or a list of the 8 values.

    Discrete: keys are the actions ``start .. start + n - 1``; each needs a row, unless a
    ``"default"`` row covers the rest. MultiBinary: keys are bit indices ``0 .. n - 1`` (bits
    without a row do nothing); a step's row combines its set bits (``MultiBinaryActionMap``).
    Errors (``RecordError``) name the key at fault."""
    where = f"--action-map for {env_id!r}"
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as err:
            raise RecordError(f"{where}: invalid JSON ({err})") from None
    if not isinstance(spec, Mapping) or not spec:
        raise RecordError(f"{where}: expected a non-empty JSON object {{action: row}}, got {spec!r}")
    if isinstance(space, spaces.Discrete):
        first, n = int(space.start), int(space.n)
        known = range(first, first + n)
        name = "discrete"
    elif isinstance(space, spaces.MultiBinary):
        if len(space.shape) != 1:
            raise RecordError(f"{where}: MultiBinary of shape {space.shape}: only flat (n,) spaces are mapped")
        known = range(int(space.shape[0]))
        name = "multibinary"
    else:
        raise RecordError(f"{where}: --action-map takes Discrete and MultiBinary spaces; the action "
                          f"space is {space} (a Box maps by default; other spaces need action_map= in Python)")
    rows: dict[int, np.ndarray] = {}
    default = None
    for key, value in spec.items():
        if key == "default" and name == "discrete":
            default = _json_row(value, f"{where}: key 'default'")
            continue
        try:
            k = int(key)
        except (TypeError, ValueError):
            k = None
        if k is None or str(k) != str(key).strip() or k not in known:
            raise RecordError(f"{where}: key {key!r} is not an action of {space} "
                              f"(expected {known.start}..{known.stop - 1}"
                              f"{' or default' if name == 'discrete' else ''})")
        rows[k] = _json_row(value, f"{where}: key '{key}'")
    if name == "multibinary":
        action_map: Any = MultiBinaryActionMap(rows, len(known), f"json:{name}")
    else:
        missing = [k for k in known if k not in rows]
        if missing and default is None:
            raise RecordError(f"{where}: no row for actions {missing} of {space}; give each a row "
                              "or a 'default' row")
        action_map = DiscreteActionMap({**rows, **{k: default for k in missing}}, f"json:{name}")
    action_map.json = json.loads(json.dumps(spec))      # kept in episodes.json's generator
    return action_map


def uniform_policy(space: spaces.Space) -> Policy:
    """Uniformly random actions drawn from the episode's ``rng`` (Discrete, bounded Box,
    MultiBinary, MultiDiscrete); ``obs`` is ignored."""
    if isinstance(space, spaces.Discrete):
        def draw(rng): return int(space.start + rng.integers(space.n))
    elif isinstance(space, spaces.Box) and space.is_bounded("both"):
        def draw(rng): return rng.uniform(space.low, space.high).astype(space.dtype)
    elif isinstance(space, spaces.MultiBinary):
        def draw(rng): return rng.integers(0, 2, space.shape).astype(space.dtype)
    elif isinstance(space, spaces.MultiDiscrete):
        def draw(rng): return (space.start + rng.integers(0, space.nvec)).astype(space.dtype)
    else:
        raise RecordError(f"no default policy for action space {space}; pass policy=")

    def uniform(obs: Any, rng: np.random.Generator) -> Any:
        return draw(rng)
    return uniform


def default_map(space: spaces.Space, env_id: str) -> ActionMap:
    """The map ``record_gym`` uses when given none: ``ACTION_MAPS``, MiniWorld's, a Box's
    navigation; a discrete space of another environment is a ``RecordError``."""
    if env_id in ACTION_MAPS:
        return ACTION_MAPS[env_id]
    if env_id.startswith("MiniWorld-") and isinstance(space, spaces.Discrete):
        return MINIWORLD_ACTIONS
    if isinstance(space, spaces.Box):
        return BoxNavigationMap(space)
    raise RecordError(f"environment {env_id!r} has a {space} action space and no entry in "
                      f"ACTION_MAPS; pass action_map= (env action -> ({ACTION_DIM},) row; "
                      "alaya record gym: --action-map JSON)")


def env_action_width(space: spaces.Space, env_id: str) -> int:
    """How many float32 values an episode stores per raw environment action."""
    if isinstance(space, spaces.Discrete):
        return 1
    if isinstance(space, (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete)):
        return int(np.prod(space.shape))
    raise RecordError(f"environment {env_id!r}: cannot store raw actions of space {space}")

"""Recording any Gymnasium environment with an RGB render as world-model episodes.

::

    from alaya.data.gym_adapter import record_gym
    paths = record_gym("CartPole-v1", "data/cartpole", episodes=16, max_steps=200, size=64)

Each episode resets the environment with seed ``seed + i`` and plays ``policy(obs, rng)`` (by
default uniform random actions from a generator seeded the same way), so a recording replays
exactly. Frame 0 is the reset observation (action row zero, ``env_action`` zero, reward 0);
frame t is the render after step t, with ``actions[t] = action_map(env_action)``, the raw
``env_action`` flattened to float32, and the step's ``reward``. An episode ends when the
environment terminates or truncates, or after ``max_steps`` steps (at most ``max_steps + 1``
frames).

Renders (``render_mode="rgb_array"``) are centre-cropped to a square and area-resized (PIL
``BOX``) to ``size`` x ``size`` (``recorder.fit_frame``).

``action_map`` turns the environment's action into a row of ``alaya.data.actions``;
``ACTION_MAPS`` holds maps for a few classic environments. Without one, a ``Box`` space of up to
4 dimensions maps onto the navigation columns (forward, strafe, turn, pitch in that order) after
rescaling its bounds to [-1, 1] (unbounded dimensions are clipped); a discrete space has no
meaningful default, and ``record_gym`` refuses it, naming the environment.
``action_map_from_json`` builds a map for a ``Discrete`` or ``MultiBinary`` space from JSON (what
``alaya record gym --action-map`` takes).

An environment from another package is named ``module:EnvId``: gymnasium imports ``module``
(which registers ``EnvId`` with ``gymnasium.register``) before making it. An id gymnasium does
not know is a ``RecordError`` that says so, not gymnasium's own exception. ``env_kwargs`` go to
``gym.make`` (``alaya record gym --env-kwargs JSON``), e.g. a render size.

Outside first-person 3D games: MiniWorld (Farama, ``pip install miniworld``; pyglet OpenGL) is
mapped by default for every ``MiniWorld-*`` id (``MINIWORLD_ACTIONS``: turn left / right ->
turn +1 / -1, move forward / back -> forward +1 / -1, the rest -> no movement) and rendered at
the recording size (``window_width`` / ``window_height`` = ``size``: its own 800 x 600 render is
70 ms a frame here). With no X display, pyglet is told to render headless through EGL
(``PYGLET_HEADLESS``; Mesa's llvmpipe on a machine with no GPU). Such a recording has no camera
poses, K or depth: the world model's camera motion is learned from its frames
(``alaya train motion``, docs/world.md).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from tqdm import tqdm

from alaya.data.actions import ACTION_COLUMNS, ACTION_DIM, NAVIGATION, ActionError, action_vector, check_actions
from alaya.data.recorder import EpisodeRecorder, RecordError, fit_frame

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


def _default_map(space: spaces.Space, env_id: str) -> ActionMap:
    if env_id in ACTION_MAPS:
        return ACTION_MAPS[env_id]
    if env_id.startswith("MiniWorld-") and isinstance(space, spaces.Discrete):
        return MINIWORLD_ACTIONS
    if isinstance(space, spaces.Box):
        return BoxNavigationMap(space)
    raise RecordError(f"environment {env_id!r} has a {space} action space and no entry in "
                      f"ACTION_MAPS; pass action_map= (env action -> ({ACTION_DIM},) row; "
                      "alaya record gym: --action-map JSON)")


def _env_action_width(space: spaces.Space, env_id: str) -> int:
    if isinstance(space, spaces.Discrete):
        return 1
    if isinstance(space, (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete)):
        return int(np.prod(space.shape))
    raise RecordError(f"environment {env_id!r}: cannot store raw actions of space {space}")


def make_env(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> gym.Env:
    """``gym.make(env_id, render_mode="rgb_array", **env_kwargs)``; ``module:EnvId`` imports
    ``module`` first (it registers ``EnvId``). An id gymnasium cannot make is a ``RecordError``
    that says what to do. Without an X display, pyglet-rendered environments render headless."""
    module = env_id.split(":", 1)[0] if ":" in env_id else None
    if not os.environ.get("DISPLAY"):
        os.environ.setdefault("PYGLET_HEADLESS", "true")       # read when pyglet is first imported
    try:
        return gym.make(env_id, render_mode="rgb_array", **dict(env_kwargs or {}))
    except ImportError as err:
        raise RecordError(f"environment {env_id!r}: cannot import module {module!r} ({err}); "
                          "--env module:EnvId needs a module on the Python path that registers EnvId "
                          "with gymnasium.register") from None
    except TypeError as err:
        raise RecordError(f"environment {env_id!r}: gym.make refused the keyword arguments "
                          f"{dict(env_kwargs or {})} ({err})") from None
    except gym.error.Error as err:
        hint = (f"module {module!r} was imported but did not register it (gymnasium.register(id=...))"
                if module else "for an environment of another package, give --env module:EnvId "
                "(the module registers it when imported), or install the package that provides it")
        raise RecordError(f"unknown environment {env_id!r}: {err}; {hint}") from None


def _env_kwargs(env_id: str, size: int, env_kwargs: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """``env_kwargs`` (JSON text or a mapping); MiniWorld gets its render size set to ``size``."""
    if isinstance(env_kwargs, str):
        try:
            env_kwargs = json.loads(env_kwargs)
        except json.JSONDecodeError as err:
            raise RecordError(f"--env-kwargs for {env_id!r}: invalid JSON ({err})") from None
        if not isinstance(env_kwargs, dict):
            raise RecordError(f"--env-kwargs for {env_id!r}: expected a JSON object, got {env_kwargs!r}")
    out = dict(env_kwargs or {})
    if env_id.split(":")[-1].startswith("MiniWorld-"):
        out.setdefault("window_width", size)
        out.setdefault("window_height", size)
    return out


def _open_env(env_or_id: str | gym.Env, env_kwargs: Mapping[str, Any] | None = None) -> tuple[gym.Env, str, bool]:
    if isinstance(env_or_id, str):
        env = make_env(env_or_id, env_kwargs)
        return env, env.spec.id if env.spec is not None else env_or_id, True
    env = env_or_id
    env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
    if env.render_mode != "rgb_array":
        raise RecordError(f"environment {env_id!r} has render_mode={env.render_mode!r}; "
                          f"create it with render_mode='rgb_array'")
    return env, env_id, False


def _render(env: gym.Env, env_id: str, size: int) -> np.ndarray:
    frame = env.render()
    if not isinstance(frame, np.ndarray) or frame.ndim != 3:
        raise RecordError(f"environment {env_id!r}: render() returned "
                          f"{getattr(frame, 'shape', type(frame).__name__)}, not an RGB image")
    return fit_frame(frame, (size, size))[None]                       # (1, size, size, 3)


def record_gym(env_or_id: str | gym.Env, root: str | os.PathLike[str], episodes: int = 4,
               max_steps: int = 200, size: int = 64, seed: int = 0, policy: Policy | None = None,
               action_map: ActionMap | str | Mapping[str, Any] | None = None, style: str = "gym",
               prompts: list[str] | None = None, progress: bool = True,
               env_kwargs: Mapping[str, Any] | str | None = None, min_frames: int = 1) -> list[Path]:
    """Record ``episodes`` episodes of an environment (an id, made with
    ``render_mode="rgb_array"``; ``module:EnvId`` imports ``module`` first; or an env made that
    way) into the episodes folder ``root``. ``action_map``: a callable, or JSON text / a parsed
    object for a Discrete or MultiBinary space (``action_map_from_json``).

    Episode i is ``<env id>-seed<seed + i>`` with split from its seed. ``prompts`` are the
    style's phrasings (default: "the <env id> environment"). ``env_kwargs``: keyword arguments
    of ``gym.make`` (a mapping or JSON text; kept in ``episodes.json``). ``min_frames``: an
    episode that ends sooner (a maze whose goal is next to the spawn) is discarded and the next
    seed is played instead, until ``episodes`` are kept (at most 10x as many tried): training
    takes windows of every episode, and the world trainer cuts episodes to the shortest.
    Returns the episode paths.
    """
    for name, value in (("episodes", episodes), ("max_steps", max_steps), ("size", size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise RecordError(f"record_gym: {name} must be a positive integer, got {value!r}")
    kwargs = _env_kwargs(env_or_id, size, env_kwargs) if isinstance(env_or_id, str) else {}
    env, env_id, owned = _open_env(env_or_id, kwargs)
    try:
        space = env.action_space
        if isinstance(action_map, (str, Mapping)):
            action_map = action_map_from_json(action_map, space, env_id)
        action_map = action_map or _default_map(space, env_id)
        policy = policy or uniform_policy(space)
        width = _env_action_width(space, env_id)
        recorder = EpisodeRecorder(
            root, styles={style: prompts or [f"the {env_id} environment"]},
            fps=float(env.metadata.get("render_fps") or 30.0), source=f"gymnasium:{env_id}",
            generator={"env_id": env_id, "gymnasium": gym.__version__, "episodes": episodes,
                       "max_steps": max_steps, "seed": seed, "min_frames": min_frames,
                       "policy": getattr(policy, "__name__", type(policy).__name__),
                       "action_map": getattr(action_map, "json", None)       # --action-map's JSON
                       or getattr(action_map, "__name__", type(action_map).__name__),
                       "resize": "centre-crop to square, PIL BOX", "env_kwargs": kwargs},
            size=size)
        slug = re.sub(r"[^A-Za-z0-9_.-]", "_", env_id)
        paths: list[Path] = []
        bar = tqdm(total=episodes, desc=f"recording {env_id}", unit="ep", disable=not progress)
        for ep_seed in range(seed, seed + 10 * episodes):
            if len(paths) == episodes:
                break
            obs, _ = env.reset(seed=ep_seed)
            rng = np.random.default_rng(ep_seed)
            with recorder.begin(f"{slug}-seed{ep_seed}", seed=ep_seed) as ep:
                ep.add(_render(env, env_id, size), None, reward=0.0,
                       env_action=np.zeros(width, np.float32))
                for _ in range(max_steps):
                    env_action = policy(obs, rng)
                    row = action_map(env_action)
                    obs, reward, terminated, truncated, _ = env.step(env_action)
                    ep.add(_render(env, env_id, size), row, reward=float(reward),
                           env_action=np.asarray(env_action, np.float32).reshape(-1))
                    if terminated or truncated:
                        break
                if ep.frames < min_frames:
                    ep.discard()
                    continue
            paths.append(ep.path)
            bar.update()
        bar.close()
        if len(paths) < episodes:
            raise RecordError(f"{env_id}: only {len(paths)} of {10 * episodes} episodes lasted "
                              f"{min_frames} frames (kept); lower --min-frames")
        return paths
    finally:
        if owned:
            env.close()

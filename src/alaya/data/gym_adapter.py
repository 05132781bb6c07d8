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

``action_map`` turns the environment's action into a row of ``alaya.data.actions``
(``alaya.data.gym_actions``: the maps, their defaults, ``action_map_from_json``).

An environment from another package is named ``module:EnvId``: gymnasium imports ``module``
(which registers ``EnvId`` with ``gymnasium.register``) before making it. An id gymnasium does
not know is a ``RecordError`` that says so, not gymnasium's own exception. ``env_kwargs`` go to
``gym.make`` (``alaya record gym --env-kwargs JSON``), e.g. a render size.

Outside first-person 3D games: MiniWorld (Farama, ``pip install miniworld``; pyglet OpenGL) is
mapped by default for every ``MiniWorld-*`` id (``gym_actions.MINIWORLD_ACTIONS``: turn left / right ->
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from tqdm import tqdm

from alaya.data.gym_actions import ActionMap, Policy, action_map_from_json, default_map, env_action_width, uniform_policy
from alaya.data.recorder import EpisodeRecorder, RecordError, fit_frame


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
        action_map = action_map or default_map(space, env_id)
        policy = policy or uniform_policy(space)
        width = env_action_width(space, env_id)
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

"""``WorldModelEnv``: a Gymnasium environment that runs entirely inside the world model (as in
DIAMOND's ``WorldModelEnv``): no engine, every observation is a frame the model predicts from
the frames before it and the agent's action.

* Observation: uint8 (size, size, 3), the newest frame (after ``reset``: the start frame).
* Action: 8 float32 columns (``alaya.data.actions.ACTION_COLUMNS``), a Box with low
  [-1, -1, -1, -1, 0, 0, 0, 0] and high 1: navigation (forward, strafe, turn, pitch) in [-1, 1],
  then the one-shot actions (jump, attack, spell, summon) in [0, 1].
* One-shot columns are *soft*, since RL libraries send continuous values: the largest one above
  0.5 becomes that action (1), the others 0; none above 0.5 means no one-shot action
  (:func:`soft_action`). ``info["action"]`` is the row that was played.
* Reward: ``reward_fn(prev_obs, action_row, obs) -> float`` if given, else 0.0. Never
  terminated; truncated after ``max_steps`` steps.

``reset(seed=...)`` draws the start frame (``<weights>/starts/*.png``) and the session's noise
seed from the env's generator, so the same seed and the same actions give the same frames.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from alaya.data.actions import ACTION_COLUMNS, ACTION_DIM, NAVIGATION, ActionError, check_actions
from alaya.paths import default_weights
from alaya.runtime.world_folder import load_start_depths, load_start_frames, load_start_views, shipped_size
from alaya.runtime.world_factory import WorldSessionFactory

ENV_ID = "alaya/WorldModel-v0"
ACTION_LOW = np.array([-1.0] * len(NAVIGATION) + [0.0] * (ACTION_DIM - len(NAVIGATION)), np.float32)
RewardFn = Callable[[np.ndarray, np.ndarray, np.ndarray], float]


@cache
def shared_encoder():
    """One prompt encoder (MiniLM) for every env in the process: vectorised envs and
    ``gymnasium.make`` copies load it once (it is thread-safe and caches embeddings)."""
    from alaya.text import PromptEncoder
    return PromptEncoder()


def soft_action(action) -> np.ndarray:
    """A Box action -> one checked action row (8,) float32: navigation as given, the largest
    one-shot value above 0.5 set to 1 and every other one-shot column to 0. ActionError naming
    the column for a wrong shape, NaN/inf or a value outside the Box."""
    try:
        a = np.asarray(action, dtype=np.float32)
    except (TypeError, ValueError) as err:
        raise ActionError(f"action: not a numeric array ({err})") from None
    if a.shape != (ACTION_DIM,):
        raise ActionError(f"action: expected shape ({ACTION_DIM},) with columns {', '.join(ACTION_COLUMNS)}; "
                          f"got {a.shape}")
    bad = ~np.isfinite(a) | (a < ACTION_LOW) | (a > 1.0)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise ActionError(f"action: column '{ACTION_COLUMNS[j]}' must be in [{ACTION_LOW[j]:g}, 1], "
                          f"got {float(a[j])!r}")
    n = len(NAVIGATION)
    row = a.copy()
    row[n:] = 0.0
    best = int(np.argmax(a[n:]))
    if a[n + best] > 0.5:
        row[n + best] = 1.0
    return check_actions(row, "action")


class WorldModelEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, weights: str = default_weights("world_model"), prompt: str = "a golden sunset", size: int | None = None,
                 max_steps: int = 1000, backend: str = "onnx", render_mode: str | None = None,
                 reward_fn: RewardFn | None = None, autoencoder: str = default_weights("autoencoder"),
                 decoder: str = default_weights("tiny_decoder"), encoder=None, threads: int | None = None):
        """``weights``: a world model's ``save_pretrained`` folder with ``starts/*.png`` beside
        it; ``size``: the frame size (default: its start frames', the model's own); ``encoder``: a
        ``PromptEncoder`` (default: :func:`shared_encoder`)."""
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}")
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        size = shipped_size(weights) if size is None else size
        self.factory = WorldSessionFactory.from_pretrained(weights, autoencoder, decoder, size=size,
                                                           backend=backend, prompt_encoder=encoder or shared_encoder(),
                                                           threads=threads)
        self.starts = load_start_frames(weights, size)
        self.start_depths = load_start_depths(weights, size)
        self.start_views = load_start_views(weights)
        self.prompt, self.max_steps = prompt, max_steps
        self.render_mode, self.reward_fn = render_mode, reward_fn
        self.observation_space = spaces.Box(0, 255, (size, size, 3), np.uint8)
        self.action_space = spaces.Box(ACTION_LOW, np.ones(ACTION_DIM, np.float32), dtype=np.float32)
        self.session = None
        self.frame: np.ndarray | None = None
        self.steps = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """A new episode. ``options``: ``prompt`` (this episode's style; default the env's) and
        ``start`` (a start-frame index; default drawn from the env's generator)."""
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - {"prompt", "start"}
        if unknown:
            raise ValueError(f"unknown reset options {sorted(unknown)}; known: prompt, start")
        start = int(self.np_random.integers(len(self.starts)))
        start = int(options.get("start", start))
        if not 0 <= start < len(self.starts):
            raise ValueError(f"start must be in [0, {len(self.starts)}), got {start}")
        noise_seed = int(self.np_random.integers(2**31))
        prompt = options.get("prompt", self.prompt)
        self.session = self.factory.new(prompt, noise_seed)
        self.session.reset(self.starts[start], depth=self.start_depths[start], view=self.start_views[start])
        self.frame, self.steps = self._keep(self.starts[start].copy()), 0
        return self.frame.copy(), {"start": start, "prompt": prompt, "seed": noise_seed}

    def step(self, action) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.session is None:
            raise RuntimeError("WorldModelEnv.step: call reset() first")
        row = soft_action(action)
        prev, self.frame = self.frame, self._keep(self.session.step(row))
        self.steps += 1
        reward = 0.0 if self.reward_fn is None else float(self.reward_fn(prev, row.copy(), self.frame))
        return self.frame.copy(), reward, False, self.steps >= self.max_steps, {"action": row, "step": self.steps}

    def render(self) -> np.ndarray | None:
        if self.render_mode == "rgb_array" and self.frame is not None:
            return self.frame.copy()
        return None

    def close(self) -> None:
        self.session = None

    @staticmethod
    def _keep(frame: np.ndarray) -> np.ndarray:
        frame.setflags(write=False)                  # reward_fn sees it; nobody may change it
        return frame

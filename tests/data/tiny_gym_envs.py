"""Two tiny Gymnasium environments from "another package", registered when this module is
imported (what ``alaya record gym --env tiny_gym_envs:AlayaTinyGrid-v0`` relies on).

AlayaTinyGrid-v0: Discrete(4) moves a white square on a 24x32 grid (0 up, 1 down, 2 left,
3 right). AlayaTinyButtons-v0: MultiBinary(3) lights one of three colour bands per pressed bit.
Both render RGB frames and truncate after 20 steps.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

H, W = 24, 32


class TinyGrid(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode
        self.action_space = spaces.Discrete(4)
        self.observation_space = spaces.Box(0, max(H, W), (2,), np.int64)
        self.pos = np.zeros(2, np.int64)
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = self.np_random.integers([2, 2], [H - 6, W - 6])
        self.steps = 0
        return self.pos.copy(), {}

    def step(self, action):
        move = {0: (-2, 0), 1: (2, 0), 2: (0, -2), 3: (0, 2)}[int(action)]
        self.pos = np.clip(self.pos + move, 0, [H - 4, W - 4])
        self.steps += 1
        return self.pos.copy(), 1.0, False, self.steps >= 20, {}

    def render(self):
        img = np.full((H, W, 3), 40, np.uint8)
        y, x = self.pos
        img[y:y + 4, x:x + 4] = 255
        return img


class TinyButtons(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode
        self.action_space = spaces.MultiBinary(3)
        self.observation_space = spaces.MultiBinary(3)
        self.lit = np.zeros(3, np.int8)
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.lit[:] = 0
        self.steps = 0
        return self.lit.copy(), {}

    def step(self, action):
        self.lit = np.asarray(action, np.int8).copy()
        self.steps += 1
        return self.lit.copy(), float(self.lit.sum()), False, self.steps >= 20, {}

    def render(self):
        img = np.zeros((H, W, 3), np.uint8)
        for i in range(3):
            img[i * 8:(i + 1) * 8, :, i] = 200 if self.lit[i] else 30
        return img


gym.register(id="AlayaTinyGrid-v0", entry_point=TinyGrid)
gym.register(id="AlayaTinyButtons-v0", entry_point=TinyButtons)

"""A tiny synthetic world where the picture is a texture rolled by the actions (turn: 2 px
sideways per frame, pitch: 2 px up or down), so a session that rolls its start frame by the
actions is a perfect world model; and sessions with known answers in it (imported as
``rolled_world`` by the world-evaluation tests)."""

import numpy as np
import pytest

from alaya.evaluation.world_eval import WorldEvalConfig, evaluate_world

SIZE, PX = 32, 2
TURN, PITCH = 2, 3




def texture(rng) -> np.ndarray:
    coarse = rng.random((8, 8, 3))
    smooth = np.kron(coarse, np.ones((4, 4, 1)))
    return (255 * (0.6 * smooth + 0.4 * rng.random((SIZE, SIZE, 3)))).astype(np.uint8)


def offsets(actions: np.ndarray) -> np.ndarray:
    """(T, 2) cumulative (dy, dx) roll of each frame."""
    step = np.stack([-PX * np.round(actions[:, PITCH]), PX * np.round(actions[:, TURN])], 1).astype(int)
    return np.cumsum(step, 0)


def make_episode(seed: int, frames: int = 40, flash: bool = False) -> dict:
    """Two styles (a texture and its darker, bluer variant) seen through one action sequence;
    with ``flash``, one-shot actions light a centre patch (a colour per action)."""
    rng = np.random.default_rng(seed)
    actions = np.zeros((frames, 8), np.float32)
    actions[1:, TURN] = rng.choice([-1.0, 0.0, 0.0, 1.0], frames - 1)
    actions[1:, PITCH] = rng.choice([-1.0, 0.0, 0.0, 1.0], frames - 1)
    if flash:
        hits = np.flatnonzero(rng.random(frames) < 0.3)[1:]
        actions[hits, 4 + rng.integers(4, size=len(hits))] = 1.0
    base = texture(rng)
    night = (base * np.array([0.4, 0.5, 0.9])).astype(np.uint8)
    rgb = np.stack([[np.roll(tex, tuple(o), (0, 1)) for o in offsets(actions)] for tex in (base, night)])
    if flash:
        colours = np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0]], np.uint8)
        for t in range(frames):
            shot = np.flatnonzero(actions[t, 4:])
            if len(shot):
                rgb[:, t, 12:20, 12:20] = colours[shot[0]]
    return {"rgb": rgb, "styles": np.array(["day", "night"]), "actions": actions}


class Shift:
    """The perfect world model of this world: the start frame rolled by the actions."""
    size = SIZE

    def reset(self, frame, prompt):
        self.start, self.offset = frame, np.zeros(2, int)

    def step(self, action):
        self.offset += [-PX * int(np.round(action[PITCH])), PX * int(np.round(action[TURN]))]
        return np.roll(self.start, tuple(self.offset), (0, 1))


class Replay:
    """Replays an episode's true frames from the start frame; ``keyed``: only while the actions
    are the episode's (else it freezes), otherwise whatever the actions."""
    size = SIZE

    def __init__(self, episodes, keyed=True):
        self.episodes, self.keyed = episodes, keyed

    def reset(self, frame, prompt):
        self.cands = [(ep, s, t) for ep in self.episodes for s in range(2) for t in range(ep["rgb"].shape[1])
                      if ep["styles"][s] == prompt and np.array_equal(ep["rgb"][s, t], frame)]
        self.k, self.last = 0, frame

    def step(self, action):
        self.k += 1
        self.cands = [(ep, s, t) for ep, s, t in self.cands if t + self.k < ep["rgb"].shape[1]
                      and (not self.keyed or np.array_equal(ep["actions"][t + self.k], action))]
        if self.cands:
            ep, s, t = self.cands[0]
            self.last = ep["rgb"][s, t + self.k]
        return self.last


class Frozen:
    size = SIZE

    def reset(self, frame, prompt):
        self.frame = frame

    def step(self, action):
        return self.frame


class Fade(Shift):
    """Shift, fading towards ``target`` grey over ``frames`` steps (blur-to-mush, or darkness)."""

    def __init__(self, frames=60, target=128.0):
        self.frames, self.target = frames, target

    def reset(self, frame, prompt):
        super().reset(frame, prompt)
        self.k = 0

    def step(self, action):
        self.k += 1
        a = min(1.0, self.k / self.frames)
        return ((1 - a) * super().step(action) + a * self.target).round().astype(np.uint8)


CFG = WorldEvalConfig(horizon=16, episodes=3, windows=2, rollout_frames=120, rollout_window=30,
                      loop_frames=6, loops=2, still_frames=12, samples=2, gif_frames=20, seed=1)


@pytest.fixture(scope="module")
def episodes():
    return [make_episode(seed) for seed in range(3)]


def run(session, episodes, idm=None, cfg=CFG):
    return evaluate_world(lambda: session, episodes, idm, cfg, progress=False)

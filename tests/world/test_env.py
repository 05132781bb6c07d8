"""``WorldModelEnv`` on a tiny random world model: Gymnasium's own checker (spaces, seeding,
step determinism, fresh data, render), same seed + actions -> same frames, soft one-shot
actions, and clear errors for bad actions."""

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from alaya.data.actions import ActionError
from alaya.world import ENV_ID, WorldModelEnv, soft_action
from tiny_world import SIZE, one_thread, tiny_world_folder  # noqa: F401  (one_thread: a fixture)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return {"weights": str(tiny_world_folder(tmp_path_factory.mktemp("world") / "model")),
            "backend": "torch"}


@pytest.fixture(scope="module")
def env(world):
    return gymnasium.make(ENV_ID, render_mode="rgb_array", max_steps=5, **world)


def test_gymnasium_check_env(env):
    assert isinstance(env.unwrapped, WorldModelEnv) and env.spec.id == ENV_ID
    check_env(env.unwrapped)                      # with the render check (the spec is set)
    assert env.observation_space == gymnasium.spaces.Box(0, 255, (SIZE, SIZE, 3), np.uint8)
    assert env.action_space.shape == (8,) and env.action_space.low.tolist() == [-1] * 4 + [0] * 4


def play(env, seed, actions):
    obs, info = env.reset(seed=seed)
    frames = [obs]
    for a in actions:
        obs, reward, terminated, truncated, info = env.step(a)
        frames.append(obs)
    return np.stack(frames), info, truncated


def test_same_seed_and_actions_give_the_same_frames(env):
    rng = np.random.default_rng(0)
    actions = [rng.uniform(env.action_space.low, env.action_space.high).astype(np.float32) for _ in range(5)]
    a, info, truncated = play(env, 7, actions)
    b, _, _ = play(env, 7, actions)
    assert a.shape == (6, SIZE, SIZE, 3) and a.dtype == np.uint8 and np.array_equal(a, b)
    assert truncated and info["step"] == 5                                   # max_steps=5
    assert np.array_equal(env.render(), a[-1])
    still, _, _ = play(env, 7, [np.zeros(8, np.float32)] * 5)
    assert np.abs(still[-1].astype(int) - a[-1]).mean() > 1                 # the actions matter
    starts = {env.reset(seed=s)[1]["start"] for s in range(12)}
    assert starts == {0, 1, 2}                                               # seeds pick start frames
    obs, info = env.reset(seed=1, options={"prompt": "a neon night", "start": 2})
    assert info == {**info, "prompt": "a neon night", "start": 2}
    assert np.array_equal(obs, env.unwrapped.starts[2])


def test_soft_one_shot_actions_and_reward(world):
    row = soft_action([0.5, -1, 0, 1, 0.2, 0.7, 0.9, 0.4])
    assert row.dtype == np.float32 and row.tolist() == [0.5, -1, 0, 1, 0, 0, 1, 0]     # spell wins
    assert soft_action([0, 0, 0, 0, 0.5, 0.5, 0, 0])[4:].tolist() == [0, 0, 0, 0]      # none above 0.5
    seen = []

    def reward(prev, action, obs):
        seen.append((prev.shape, action.tolist(), obs.shape))
        return float(np.abs(obs.astype(int) - prev).mean())

    env = WorldModelEnv(reward_fn=reward, max_steps=3, **world)
    env.reset(seed=0)
    _, r, terminated, truncated, info = env.step(np.array([1, 0, 0, 0, 0, 0.9, 0, 0], np.float32))
    assert r > 0 and not terminated and not truncated and info["action"].tolist() == [1, 0, 0, 0, 0, 1, 0, 0]
    assert seen == [((SIZE, SIZE, 3), [1, 0, 0, 0, 0, 1, 0, 0], (SIZE, SIZE, 3))]
    assert env.render() is None                                              # no render_mode


@pytest.mark.parametrize("action,needle", [
    ([0] * 7, "expected shape (8,)"),
    ([[0] * 8], "expected shape (8,)"),
    ([np.nan, 0, 0, 0, 0, 0, 0, 0], "'forward'"),
    ([0, 1.5, 0, 0, 0, 0, 0, 0], "'strafe' must be in [-1, 1]"),
    ([0, 0, 0, 0, -0.2, 0, 0, 0], "'jump' must be in [0, 1]"),
    ([0, 0, 0, 0, 0, 0, 0, np.inf], "'summon'"),
    (["w"] + [0] * 7, "not a numeric array"),
])
def test_bad_actions_name_the_column(env, action, needle):
    env.reset(seed=0)
    with pytest.raises(ActionError) as err:
        env.step(action)
    assert needle in str(err.value)
    env.step(np.zeros(8, np.float32))                                        # the episode goes on


def test_errors_before_reset_and_for_bad_options(world):
    env = WorldModelEnv(**world)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(8, np.float32))
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"speed": 2})
    with pytest.raises(ValueError, match="start must be in"):
        env.reset(options={"start": 3})

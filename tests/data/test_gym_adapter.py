"""Recording Gymnasium environments as episodes: CartPole end to end, maps, refusals."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from alaya.data.actions import action_vector
from alaya.data.episodes import EpisodeDataset, read_meta, validate_episodes
from alaya.data.gym_adapter import ACTION_MAPS, BoxNavigationMap, record_gym
from alaya.data.recorder import RecordError, fit_frame


def test_cartpole_episodes_round_trip(tmp_path: Path) -> None:
    paths = record_gym("CartPole-v1", tmp_path / "a", episodes=2, max_steps=12, size=32, seed=3,
                       progress=False)
    assert [p.name for p in paths] == ["CartPole-v1-seed3.npz", "CartPole-v1-seed4.npz"]
    assert validate_episodes(tmp_path / "a") == []
    ds = EpisodeDataset(tmp_path / "a")
    meta = read_meta(tmp_path / "a")
    assert meta.source == "gymnasium:CartPole-v1" and meta.resolution == [32, 32]
    assert meta.fps == 50.0 and list(meta.styles) == ["gym"]
    for eid in ds:
        ep = ds.load(eid)
        T = ep["rgb"].shape[1]
        assert ep["rgb"].shape == (1, T, 32, 32, 3) and 2 <= T <= 13
        assert ep["env_action"].shape == (T, 1) and ep["reward"].shape == (T,)
        assert not ep["actions"][0].any() and ep["reward"][0] == 0
        push = ep["env_action"][1:, 0]
        assert set(push.tolist()) <= {0.0, 1.0}
        np.testing.assert_array_equal(ep["actions"][1:, 1], 2 * push - 1)        # strafe -1 / +1
        assert not np.delete(ep["actions"], 1, axis=1).any()
        assert (ep["reward"][1:] == 1.0).all()
        assert ep["rgb"].std() > 0                                               # a real render
    # same seed, same episodes, byte for byte
    again = record_gym("CartPole-v1", tmp_path / "b", episodes=2, max_steps=12, size=32, seed=3,
                       progress=False)
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in paths]


def test_env_without_map_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="'FrozenLake-v1'.*Discrete.*action_map="):
        record_gym("FrozenLake-v1", tmp_path, episodes=1, progress=False)
    assert not tmp_path.joinpath("episodes.json").exists()
    env = gym.make("CartPole-v1")                                   # no rgb_array render
    with pytest.raises(RecordError, match="'CartPole-v1'.*render_mode=None"):
        record_gym(env, tmp_path, episodes=1, progress=False)
    env.close()


def test_custom_policy_and_map(tmp_path: Path) -> None:
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    always_right = lambda obs, rng: 1                                # noqa: E731
    forward = lambda a: action_vector(forward=1.0)                   # noqa: E731
    [path] = record_gym(env, tmp_path, episodes=1, max_steps=5, size=16, policy=always_right,
                        action_map=forward, progress=False)
    env.close()
    ep = EpisodeDataset(tmp_path).load(path.stem)
    assert (ep["actions"][1:, 0] == 1).all() and (ep["env_action"][1:] == 1).all()
    bad_map = lambda a: np.full(8, 2.0, np.float32)                  # noqa: E731
    with pytest.raises(RecordError, match="frame 1: field 'action': column 'forward' must be in"):
        record_gym("CartPole-v1", tmp_path, episodes=1, max_steps=5, size=16, seed=9,
                   action_map=bad_map, progress=False)
    assert EpisodeDataset(tmp_path).ids() == [path.stem]             # nothing partial listed


def test_action_maps() -> None:
    box = BoxNavigationMap(spaces.Box(-2.0, 2.0, (2,), np.float32))
    np.testing.assert_allclose(box(np.array([2.0, -1.0])), action_vector(forward=1.0, strafe=-0.5))
    np.testing.assert_allclose(box(np.array([5.0, 0.0])), action_vector(forward=1.0))  # clipped
    with pytest.raises(RecordError, match="5 dims"):
        BoxNavigationMap(spaces.Box(-1.0, 1.0, (5,), np.float32))
    np.testing.assert_array_equal(ACTION_MAPS["MountainCar-v0"](2), action_vector(strafe=1.0))
    np.testing.assert_allclose(ACTION_MAPS["Pendulum-v1"](np.array([-1.0])), action_vector(turn=-0.5))
    np.testing.assert_allclose(ACTION_MAPS["CarRacing-v3"](np.array([0.5, 0.8, 0.2])),
                               action_vector(forward=0.6, turn=-0.5), atol=1e-6)
    with pytest.raises(RecordError, match="no row for action 7"):
        ACTION_MAPS["CartPole-v1"](7)


def test_fit_frame_crops_the_centre() -> None:
    img = np.zeros((40, 60, 3), np.uint8)
    img[:, :10] = 255                                     # the cropped-away left and right bands
    img[:, 50:] = 255
    img[:, 10:50, 1] = 100
    out = fit_frame(img, (8, 8))
    assert out.shape == (8, 8, 3) and out.dtype == np.uint8
    assert (out[..., 0] == 0).all() and (out[..., 1] == 100).all()
    assert fit_frame(img[..., 0], (4, 6)).shape == (4, 6, 3)

"""Recording Gymnasium environments as episodes: CartPole end to end, maps, refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from alaya.data.actions import action_vector
from alaya.data.episodes import EpisodeDataset, read_meta, validate_episodes
from alaya.data.gym_actions import ACTION_MAPS, BoxNavigationMap, _json_row, action_map_from_json
from alaya.data.gym_adapter import record_gym
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


# -- outside environments, --action-map (tiny envs registered by tests/data/tiny_gym_envs.py) --

ALAYA = [sys.executable, "-m", "alaya.cli"]
GRID_MAP = {"0": {"forward": 1}, "1": {"forward": -1}, "2": {"strafe": -1}, "3": {"strafe": 1}}


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(ALAYA + ["record", "gym", *args, "--quiet"], capture_output=True, text=True,
                          timeout=300, env=env)


def test_cli_records_an_outside_discrete_env_with_an_action_map(tmp_path: Path) -> None:
    r = _cli("--env", "tiny_gym_envs:AlayaTinyGrid-v0", "--action-map", json.dumps(GRID_MAP),
             "--out", str(tmp_path / "grid"), "--episodes", "2", "--frames", "6", "--size", "16")
    assert r.returncode == 0, r.stderr
    assert validate_episodes(tmp_path / "grid") == []
    ds = EpisodeDataset(tmp_path / "grid")
    assert ds.meta.source == "gymnasium:AlayaTinyGrid-v0" and ds.meta.fps == 10.0
    assert ds.meta.generator["action_map"] == GRID_MAP
    for eid in ds:
        ep = ds.load(eid)
        assert ep["rgb"].shape == (1, 7, 16, 16, 3) and ep["rgb"].std() > 0
        for a, row in zip(ep["env_action"][1:, 0], ep["actions"][1:]):
            np.testing.assert_array_equal(row, _json_row(GRID_MAP[str(int(a))], "test"))


def test_cli_records_a_multibinary_env(tmp_path: Path) -> None:
    buttons = {"0": {"forward": 1}, "1": {"turn": 0.5, "jump": 1}, "2": [0, 0, 0.75, 0, 0, 1, 0, 0]}
    r = _cli("--env", "tiny_gym_envs:AlayaTinyButtons-v0", "--action-map", json.dumps(buttons),
             "--out", str(tmp_path / "b"), "--episodes", "1", "--frames", "12", "--size", "16")
    assert r.returncode == 0, r.stderr
    ds = EpisodeDataset(tmp_path / "b")
    ep = ds.load(ds.ids()[0])
    for bits, row in zip(ep["env_action"][1:], ep["actions"][1:]):
        want = np.zeros(8, np.float32)
        want[0] = bits[0]
        want[2] = min(1.0, 0.5 * bits[1] + 0.75 * bits[2])
        if bits[1]:
            want[4] = 1                                  # the lowest set bit's one-shot action wins
        elif bits[2]:
            want[5] = 1
        np.testing.assert_allclose(row, want, err_msg=str(bits))
    assert ep["env_action"][1:].any(axis=1).any() and (ep["env_action"][1:].sum(1) >= 2).any()


def test_unknown_envs_get_a_clear_error(tmp_path: Path) -> None:
    r = _cli("--env", "NoSuchEnv-v0", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "unknown environment 'NoSuchEnv-v0'" in r.stderr and "module:EnvId" in r.stderr
    r = _cli("--env", "no_such_module_xyz:Thing-v0", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "cannot import module 'no_such_module_xyz'" in r.stderr
    r = _cli("--env", "json:Thing-v0", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "did not register" in r.stderr, r.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("spec, match", [
    ({"0": {"forward": 1}}, r"no row for actions \[1, 2, 3\]"),
    ({**GRID_MAP, "4": {}}, "key '4' is not an action"),
    ({**GRID_MAP, "x": {}}, "key 'x' is not an action"),
    ({**GRID_MAP, "1": {"sideways": 1}}, "key '1'.*unknown column 'sideways'"),
    ({**GRID_MAP, "1": {"forward": 3}}, "key '1'.*'forward' must be in"),
    ({**GRID_MAP, "1": {"jump": 1, "attack": 1}}, "key '1'.*at most one one-shot"),
    ({**GRID_MAP, "1": [1, 2]}, "key '1'.*list of 8 numbers"),
])
def test_bad_action_maps_name_the_key(tmp_path: Path, spec, match) -> None:
    import tiny_gym_envs  # noqa: F401  (registers the tiny envs)
    with pytest.raises(RecordError, match=match):
        record_gym("AlayaTinyGrid-v0", tmp_path, episodes=1, max_steps=2, size=8, action_map=spec, progress=False)
    assert not (tmp_path / "episodes.json").exists()


def test_action_map_json_default_row_and_refused_spaces() -> None:
    m = action_map_from_json('{"1": {"jump": 1}, "default": {}}', spaces.Discrete(3))
    np.testing.assert_array_equal(m(1), action_vector(act="jump"))
    np.testing.assert_array_equal(m(2), action_vector())
    with pytest.raises(RecordError, match="invalid JSON"):
        action_map_from_json("{0: 1}", spaces.Discrete(3))
    with pytest.raises(RecordError, match="Discrete and MultiBinary"):
        action_map_from_json('{"0": {}}', spaces.Box(-1.0, 1.0, (2,), np.float32))
    with pytest.raises(RecordError, match="key 'default' is not an action"):
        action_map_from_json('{"default": {}}', spaces.MultiBinary(2))
    r = subprocess.run(ALAYA + ["record", "gym", "--env", "FrozenLake-v1", "--out", "/nonexistent/x", "--quiet"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--action-map" in r.stderr, r.stderr

"""The game's own long-rollout statistics start from the recorded start frame."""

import numpy as np
import pytest

from alaya.data.episodes import EpisodeDataset
from alaya.engine.game import GameConfig
from alaya.engine.gameplay import GameplayConfig, record_gameplay
from alaya.evaluation.world_reference import game_long_rollout


def test_game_reference_replays_the_recorded_world(tmp_path):
    record_gameplay(tmp_path, GameplayConfig(episodes=1, frames=2, first_seed=4, styles=("clear_noon",),
                                             game=GameConfig(size=32)), progress=False)
    ds = EpisodeDataset(tmp_path)
    eid = ds.ids()[0]
    ep, seed = ds.load(eid), ds.meta.episodes[eid]["seed"]
    still = np.zeros((20, 8), np.float32)
    r = game_long_rollout(seed, "clear_noon", still, 32, 5, start=ep["rgb"][0, 0])
    assert r["game_start_psnr"] == 100.0                           # the very start frame of the recording
    assert r["game_late_early_brightness_ratio"] == pytest.approx(1.0, abs=0.05)   # standing still
    other = game_long_rollout(seed + 1, "clear_noon", still, 32, 5, start=ep["rgb"][0, 0])
    assert other["game_start_psnr"] < 30                           # another world does not match
    with pytest.raises(ValueError, match="2 x window"):
        game_long_rollout(seed, "clear_noon", still[:8], 32, 5)

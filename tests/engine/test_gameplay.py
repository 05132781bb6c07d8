"""Recorded gameplay carries what a scene memory needs: each frame's depth, pose and K."""

from dataclasses import replace

import numpy as np

from alaya.data.episodes import EpisodeDataset
from alaya.engine.game import GameConfig, GameStream
from alaya.engine.gameplay import GameplayConfig, record_gameplay
from alaya.engine.players import ScriptedPlayer


def test_recorded_episodes_hold_the_engines_depth_pose_and_K(tmp_path):
    cfg = GameplayConfig(episodes=1, frames=4, first_seed=7, styles=("clear_noon",),
                         game=GameConfig(size=32, warmup_frames=5))
    record_gameplay(tmp_path, cfg, progress=False)
    ds = EpisodeDataset(tmp_path)
    ep = ds.load(ds.ids()[0])
    assert ep["depth"].shape == (4, 32, 32) and ep["depth"].dtype == np.float16
    game, player = GameStream(7, cfg.game), ScriptedPlayer(7, cfg.player)   # replay: same frames
    try:
        for t in range(4):
            if t:
                game.apply(player.act(game))
            frame = game.step()
            np.testing.assert_allclose(ep["depth"][t], frame["depth"], rtol=1e-3)
            np.testing.assert_array_equal(ep["world_to_camera"][t], frame["world_to_camera"])
            np.testing.assert_array_equal(ep["depth"][t] > 0, frame["mask"] > 0)  # 0 = sky
        np.testing.assert_array_equal(ep["K"], frame["K"])
    finally:
        game.close()
    record_gameplay(tmp_path / "flat", replace(cfg, depth=False), progress=False)
    flat = EpisodeDataset(tmp_path / "flat")
    assert "depth" not in flat.load(flat.ids()[0])

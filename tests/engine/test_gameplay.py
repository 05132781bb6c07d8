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


def test_a_player_told_to_walk_into_walls_and_stays_at_them():
    """``wall_contact``: the share of walls met that the player presses on into (the game's collision
    holds it there, the view filled by the wall); at 0 it turns away from every wall, as the
    players always did, and its frames never show a wall that near."""
    import pytest

    from alaya.engine.players import PlayerConfig

    def against_a_wall(contact: float) -> float:
        """Share of 600 frames whose median depth is under 0.8 m."""
        game = GameStream(3, GameConfig(size=16, warmup_frames=2))
        player = ScriptedPlayer(3, PlayerConfig(wall_contact=contact))
        near = 0
        try:
            game.step()
            for _ in range(600):
                game.apply(player.act(game))
                depth = game.step()["depth"]
                near += bool((depth > 0).any()) and float(np.median(depth[depth > 0])) < 0.8
        finally:
            game.close()
        return near / 600

    away, into = against_a_wall(0.0), against_a_wall(1.0)
    assert away < 0.03 and into > away + 0.05, (away, into)
    with pytest.raises(ValueError, match="wall_contact"):
        PlayerConfig(wall_contact=1.5)

"""Game mode: every action row has its documented, physical consequence."""

import math

import mujoco
import numpy as np
import pytest

from alaya.data.actions import ONE_SHOT, ActionError, action_vector, check_actions
from alaya.engine.game import GameConfig, GameStream
from alaya.engine.players import ScriptedPlayer

SIZE = 32


@pytest.fixture(scope="module")
def game():
    g = GameStream(5, GameConfig(size=SIZE, warmup_frames=30))
    yield g
    g.close()


def play(g, rows):
    frames = []
    for row in rows:
        g.apply(row)
        frames.append(g.step())
    return frames


def test_navigation_moves_and_turns_at_the_documented_rates(game):
    game.reset()
    nav, fps = game.game.navigation, game.game.fps
    yaw0, pos0 = game.yaw, game.camera_position
    play(game, [action_vector(turn=1.0)] * 3)
    assert math.remainder(game.yaw - yaw0, 2 * math.pi) == pytest.approx(3 * nav.turn_rate / fps, abs=1e-6)
    assert np.allclose(game.camera_position[:2], pos0[:2])          # turning in place does not move
    game.reset()
    heading = np.array([math.cos(game.yaw), math.sin(game.yaw)])
    play(game, [action_vector(forward=1.0)])
    step = game.camera_position[:2] - pos0[:2]
    if np.linalg.norm(step) > 0:                                     # not blocked by a wall
        assert np.linalg.norm(step) == pytest.approx(nav.move_speed / fps, rel=1e-3)
        assert step @ heading > 0.99 * np.linalg.norm(step)


def test_jump_rises_and_lands(game):
    game.reset()
    z0 = game.camera_position[2]
    assert game.apply(action_vector(act="jump"))
    game.step()
    heights, landed = [], 0
    for _ in range(40):
        game.apply(action_vector())
        game.step()
        heights.append(game.camera_position[2] - z0)
        landed += int(game.events[3])
    assert max(heights) > 0.4
    assert landed == 1 and heights[-1] == pytest.approx(0.0, abs=1e-6)
    assert game.apply(action_vector(act="jump"))                    # on the ground again: it can
    assert not game.apply(action_vector(act="jump"))                # ... but not in mid-air


def test_attack_swings_a_visible_blade_and_knocks_objects(game):
    game.reset()
    blade = [i for i, d in game.scene.instances.items() if d == "blade"][0]
    # put a movable body right in front of the player
    name = game.world.dynamic_bodies[0]
    ahead = game.camera_position + 1.5 * np.array([math.cos(game.yaw), math.sin(game.yaw), 0.0])
    jnt = game.world.model.joint(f"{name}_free")
    game.world.data.qpos[jnt.qposadr[0]:jnt.qposadr[0] + 3] = ahead
    game.world.data.qvel[jnt.dofadr[0]:jnt.dofadr[0] + 6] = 0
    mujoco.mj_kinematics(game.world.model, game.world.data)
    game.apply(action_vector(act="attack"))
    frame = game.step()
    assert game.events[0] >= 1                                       # something was hit
    assert np.linalg.norm(game.world.data.qvel[jnt.dofadr[0]:jnt.dofadr[0] + 3]) > 2.0
    seen = [(frame["instance"] == blade).any()]
    for f in play(game, [action_vector()] * (game.game.swing_frames + 1)):
        seen.append((f["instance"] == blade).any())
    assert any(seen[:3]) and not seen[-1]                            # visible, then put away


def test_spell_flies_glowing_and_bursts(game):
    game.reset()
    orb = {i for i, d in game.scene.instances.items() if d.startswith("spell orb")}
    game.apply(action_vector(act="spell"))
    frames = [game.step()]
    bursts = 0
    for _ in range(game.game.spell_lifetime + 2):
        game.apply(action_vector())
        frames.append(game.step())
        bursts += int(game.events[1])
    visible = [np.isin(f["instance"], list(orb)).any() for f in frames]
    assert visible[0] and bursts == 1 and not visible[-1]


def test_summon_puts_a_new_object_in_view(game):
    game.reset()
    pool = {i for i, d in game.scene.instances.items() if d.startswith("pool")}
    before = game.step()
    assert not np.isin(before["instance"], list(pool)).any()
    game.apply(action_vector(act="summon"))
    frames = [game.step()] + play(game, [action_vector()] * 20)
    assert np.isin(frames[-1]["instance"], list(pool)).any()


def test_same_seed_and_actions_give_the_same_frames():
    rows = [action_vector(1.0, 0.0, 0.5), action_vector(act="spell"), action_vector(0.0, 1.0, 0.0),
            action_vector(act="attack"), action_vector(act="summon"), action_vector(act="jump")] * 3
    out = []
    for _ in range(2):
        g = GameStream(11, GameConfig(size=SIZE, warmup_frames=10))
        out.append(np.stack([f["depth"] for f in play(g, rows)]))
        g.close()
    assert np.array_equal(out[0], out[1])


def test_bad_actions_are_refused_with_the_column(game):
    with pytest.raises(ActionError, match="turn"):
        game.apply([0, 0, 3, 0, 0, 0, 0, 0])
    with pytest.raises(ActionError, match="shape"):
        game.apply(np.zeros(7))
    with pytest.raises(ActionError, match="at most one"):
        game.apply([0, 0, 0, 0, 0, 1, 1, 0])
    with pytest.raises(ActionError, match="finite"):
        game.apply([math.nan] + [0] * 7)


def test_scripted_player_plays_every_action_with_valid_rows():
    g = GameStream(2, GameConfig(size=SIZE, warmup_frames=10))
    player = ScriptedPlayer(2)
    rows = []
    for _ in range(400):
        rows.append(player.act(g))
        g.apply(rows[-1])
        g.step()
    g.close()
    rows = check_actions(np.stack(rows))
    shots = rows[:, 4:].sum(0)
    assert all(shots[i] > 0 for i in range(len(ONE_SHOT)))
    assert (rows[:, 0] > 0).mean() > 0.2 and (rows[:, 2] != 0).mean() > 0.1   # it walks and turns

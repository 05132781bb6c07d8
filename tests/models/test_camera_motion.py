"""Learned camera motion: conventions match the recorded poses, the API's contracts (shapes,
identity at the start, save/load), and both training signals point at the true motion."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from alaya.data.actions import action_vector
from alaya.models.camera_geometry import (axis_angle_to_matrix, gl_to_cv, matrix_to_axis_angle, matrix_to_twist,
                                         pitch_of, relative_motion, twist_to_matrix, up_from_pitch, up_in_camera)
from alaya.models.camera_motion import CameraMotion, CameraMotionConfig, constant_motion
from alaya.models.view_warp import pinhole, warp_depth
from alaya.train.camera_motion import reprojection_loss


def test_twist_round_trip_and_rotation_helpers():
    torch.manual_seed(0)
    tw = torch.randn(16, 6) * torch.tensor([0.5, 0.5, 0.5, 1, 1, 1])
    T = twist_to_matrix(tw)
    assert torch.allclose(T[:, :3, :3] @ T[:, :3, :3].transpose(1, 2), torch.eye(3).expand(16, 3, 3), atol=1e-5)
    assert torch.allclose(matrix_to_twist(T), tw, atol=1e-4)
    assert torch.allclose(axis_angle_to_matrix(torch.zeros(3)), torch.eye(3))
    assert torch.allclose(matrix_to_axis_angle(torch.eye(3)), torch.zeros(3))


def test_pitch_and_up_agree_with_the_game_start():
    up = up_from_pitch(torch.tensor([-5.73, 0.0, 30.0]))
    assert torch.allclose(torch.rad2deg(pitch_of(up)), torch.tensor([-5.73, 0.0, 30.0]), atol=1e-4)


def test_constant_motion_is_the_engine_for_turn_pitch_and_walk():
    """The fixed constants replay the game's own rules: the recorded delta of a turn, a look up
    and a step forward (no wall near) is reproduced."""
    from alaya.engine.game import GameConfig, GameStream
    g = GameStream(3, GameConfig(size=32))
    try:
        rows = [action_vector(forward=1.0), action_vector(turn=1.0), action_vector(pitch=1.0),
                action_vector(forward=1.0, turn=-0.5)]
        poses = [torch.from_numpy(g.step()["world_to_camera"])]          # frame 0, as the recorder
        for row in rows:
            g.apply(row)
            poses.append(torch.from_numpy(g.step()["world_to_camera"]))
    finally:
        g.close()
    P = torch.stack(poses)
    true = relative_motion(P)[1:]
    const = constant_motion(torch.from_numpy(np.stack(rows)), up_in_camera(P[:-1]))
    rot = torch.rad2deg(matrix_to_axis_angle(const[:, :3, :3].transpose(1, 2) @ true[:, :3, :3]).norm(dim=-1))
    assert rot.max() < 0.05
    assert (const[:, :3, 3] - true[:, :3, 3]).norm(dim=-1).max() < 0.03     # the terrain's slope


def test_the_api_starts_as_the_identity_and_round_trips(tmp_path):
    motion = CameraMotion(CameraMotionConfig(hidden=16))
    state = motion.initial_state(pitch_degrees=-10.0)
    delta, new = motion.step(np.asarray(action_vector(forward=1.0, turn=1.0)), state)
    assert delta.shape == (4, 4) and torch.allclose(delta, torch.eye(4))
    assert new.up.shape == (1, 3) and new.prev.shape == (1, 6)
    deltas, _ = motion.rollout(np.zeros((5, 8), np.float32), state)
    assert deltas.shape == (1, 5, 4, 4)
    with torch.no_grad():
        for p in motion.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    motion.save_pretrained(tmp_path / "m")
    loaded = CameraMotion.from_pretrained(tmp_path / "m")
    rows = torch.randn(3, 8).clamp(-1, 1)
    st = motion.initial_state(batch=3)
    assert torch.equal(motion.step(rows, st)[0], loaded.step(rows, st)[0])
    assert torch.equal(motion.intrinsics(32, 32), loaded.intrinsics(32, 32))
    assert loaded.depth(st, 8, 8).shape == (3, 8, 8)


def _textured(size=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(1, 3, size // 4, size // 4, generator=g)
    return torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)


def test_reprojection_loss_is_lowest_at_the_true_rotation():
    """A frame rotated by 5 degrees of yaw (depth-free) is explained by that rotation better than
    by none or by the opposite one: the self-supervised signal points the right way."""
    K = pinhole(32, 60.0)
    src = _textured()
    yaw = math.radians(5.0)
    true = torch.eye(4)[None].clone()
    true[0, :3, :3] = axis_angle_to_matrix(torch.tensor([0.0, yaw, 0.0]))         # target -> source, OpenCV
    depth = torch.full((1, 1, 32, 32), 5.0)
    target, _ = warp_depth(src, depth, K, true)

    def loss(T):
        return float(reprojection_loss(target, [src], [T], depth, K)[0])
    wrong = true.clone()
    wrong[0, :3, :3] = true[0, :3, :3].T
    assert loss(true) < 0.5 * loss(torch.eye(4)[None]) and loss(true) < 0.5 * loss(wrong)


def test_gl_to_cv_flips_y_and_z():
    T = twist_to_matrix(torch.tensor([0.0, 0.1, 0.0, 0.0, 0.0, 0.2]))
    cv = gl_to_cv(T)
    assert cv[2, 3] == pytest.approx(-0.2) and cv[0, 2] == pytest.approx(-T[0, 2].item())


def test_poses_chain_the_steps_from_a_level_start():
    from alaya.data.geometry import view_pitch_degrees
    motion = CameraMotion(CameraMotionConfig(hidden=16))
    with torch.no_grad():
        motion.net[-1].bias.copy_(torch.tensor([0.0, 0.2, 0.0, 0.0, 0.0, 0.5]))   # a constant turn and step
    P = motion.poses(np.zeros((4, 8), np.float32), pitch_degrees=-10.0)
    assert P.shape == (4, 4, 4)
    assert float(view_pitch_degrees(P[0].numpy())) == pytest.approx(-10.0, abs=1e-4)
    assert torch.allclose(up_in_camera(P[0]), up_from_pitch(torch.tensor([-10.0]))[0], atol=1e-6)
    delta, state = motion.step(np.zeros(8, np.float32), motion.initial_state(world_to_camera=P[0]))
    assert torch.allclose(P[1], delta @ P[0], atol=1e-6)
    assert torch.allclose(relative_motion(P)[1:], delta.expand(3, 4, 4), atol=1e-5)


def test_no_action_at_rest_is_exactly_no_motion_and_the_height_is_tracked():
    from alaya.models.camera_motion import MotionState, height_step
    torch.manual_seed(0)
    motion = CameraMotion(CameraMotionConfig(hidden=16))
    with torch.no_grad():                                   # a network with a bias everywhere
        for p in motion.net.parameters():
            p.add_(0.3 * torch.randn_like(p))
    state = motion.initial_state(pitch_degrees=-10.0)
    for _ in range(50):
        delta, state = motion.step(torch.zeros(8), state)
        torch.testing.assert_close(delta, torch.eye(4), atol=1e-6, rtol=0)   # rest anchored: not a drift
    assert float(state.height) == 0.0
    off_level = MotionState(up=state.up, prev=torch.zeros(1, 6), height=torch.tensor([0.7]))
    delta, _ = motion.step(torch.zeros(8), off_level)      # stopped off the start's level: still at rest
    torch.testing.assert_close(delta, torch.eye(4), atol=1e-6, rtol=0)
    row = torch.zeros(8)
    row[0] = 1.0                                            # forward: the bias now moves it
    P = torch.eye(4)
    P[:3, :3] = torch.tensor([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]])   # level, looking along +x
    state = motion.initial_state(world_to_camera=P)
    c0 = -(P[:3, :3].T @ P[:3, 3])
    for _ in range(20):
        delta, state = motion.step(row, state)
        P = delta @ P
    centre = -(P[:3, :3].T @ P[:3, 3])
    assert abs(float(centre[2] - c0[2]) - float(state.height)) < 1e-4   # the state's height is the centre's
    up = torch.nn.functional.normalize(torch.randn(3, 3), dim=-1)
    twist = torch.zeros(3, 6)
    twist[:, 3:] = up * 0.25                   # a delta translating points up by 0.25 m: the camera went down
    torch.testing.assert_close(height_step(torch.zeros(3), twist, up), torch.full((3,), -0.25))
    torch.testing.assert_close(MotionState(up=up, prev=torch.zeros(3, 6)).height, torch.zeros(3))


def test_a_level_camera_never_rolls_and_keeps_its_turns():
    torch.manual_seed(0)
    free = CameraMotion(CameraMotionConfig(hidden=16))
    for p in free.net.parameters():
        torch.nn.init.normal_(p, std=0.3)                      # an untrained net: tilted turn axes
    levelled = CameraMotion(CameraMotionConfig(hidden=16, level=True))
    levelled.load_state_dict(free.state_dict())
    rows = torch.tensor(action_vector(0.5, 0.0, 1.0, 0.0, None)).expand(100, -1)
    ups = {}
    for name, m in (("free", free), ("level", levelled)):
        deltas, state = m.rollout(rows, m.initial_state(pitch_degrees=-10.0))
        ups[name] = state.up[0]
        yaw = matrix_to_axis_angle(deltas[0, :, :3, :3]).norm(dim=-1)
        assert yaw.abs().sum() > 0
    assert abs(float(ups["free"][0])) > 1e-3                   # without: it rolls
    assert abs(float(ups["level"][0])) < 1e-6                  # levelled: world up stays in the y-z plane
    assert float(ups["level"].norm()) == pytest.approx(1.0, abs=1e-5)


def test_training_on_poses_that_never_roll_makes_a_level_camera(tmp_path):
    from tiny_world import record_tiny_episodes

    from alaya.train.camera_motion import MotionTrainConfig, train_motion
    from alaya.train.loop import TrainConfig
    episodes = record_tiny_episodes(tmp_path / "episodes", episodes=3)
    model = train_motion(MotionTrainConfig(data=str(episodes), out=str(tmp_path / "motion"), mode="poses",
                                           model=CameraMotionConfig(hidden=8),
                                           train=TrainConfig(run_dir=str(tmp_path / "run"), steps=3, batch_size=4,
                                                             progress=False)))
    assert model.config.level
    assert CameraMotion.from_pretrained(tmp_path / "motion").config.level
    assert not model.config.still_without_navigation          # these 8-frame episodes hold no idle row


def test_idle_frames_hold_still_is_read_from_the_recorded_poses(tmp_path):
    from tiny_world import record_tiny_episodes

    from alaya.train.camera_motion_data import MotionEpisodes, idle_frames_hold_still
    data = MotionEpisodes(str(record_tiny_episodes(tmp_path / "episodes", episodes=2)), None, frames=False)
    assert not idle_frames_hold_still(data)                      # no row without input: nothing to read
    data.actions[0, 5:] = 0                                      # rows with no input, where the game holds still
    data.poses[0, 5:] = data.poses[0, 4]
    assert idle_frames_hold_still(data)
    data.poses[0, 7, 0, 3] += 0.05                               # one idle frame slides 5 cm: not so
    assert not idle_frames_hold_still(data)


def test_a_camera_still_without_navigation_neither_turns_nor_slides_but_falls():
    from alaya.models.camera_constraints import camera_centre
    torch.manual_seed(1)
    m = CameraMotion(CameraMotionConfig(hidden=16, still_without_navigation=True))
    for p in m.net.parameters():
        torch.nn.init.normal_(p, std=0.3)                      # an untrained net: it would coast and turn
    walk, idle = torch.tensor(action_vector(1.0, 0.0, 0.5, 0.0, None)), torch.zeros(8)
    state = m.initial_state(pitch_degrees=-10.0)
    for _ in range(5):
        _, state = m.step(walk, state)
    delta, after = m.step(idle, state)
    torch.testing.assert_close(delta[:3, :3], torch.eye(3))     # no turn
    move = camera_centre(delta[None])[0]                         # the centre's move, old camera axes
    along_up = (move * state.up[0]).sum() * state.up[0]
    torch.testing.assert_close(move, along_up, atol=1e-6, rtol=0)   # only up or down
    free = CameraMotion(dataclasses.replace(m.config, still_without_navigation=False))
    free.load_state_dict(m.state_dict())
    assert float(matrix_to_axis_angle(free.step(idle, state)[0][None, :3, :3]).norm()) > 1e-4   # without: it turns
    from alaya.models.camera_motion import MotionState
    step = torch.tensor([0.0, 0.0, -0.1]) - (-0.1 * state.up[0, 2]) * state.up[0]      # along the floor
    walked = MotionState(up=state.up, prev=torch.cat([torch.zeros(3), step])[None], height=state.height)
    stopped, _ = m.step(idle, walked)                            # stopped after a level walk: no rise or fall
    torch.testing.assert_close(stopped, torch.eye(4))


def test_a_pitch_held_camera_pitches_only_when_asked():
    torch.manual_seed(2)
    m = CameraMotion(CameraMotionConfig(hidden=16, level=True, pitch_held=True))
    for p in m.net.parameters():
        torch.nn.init.normal_(p, std=0.3)                      # an untrained net: turns tip the view
    start = m.initial_state(pitch_degrees=-10.0)
    _, state = m.rollout(torch.tensor(action_vector(1.0, 0.5, 1.0, 0.0, None)).expand(50, -1), start)
    assert float(torch.rad2deg(pitch_of(state.up[0]))) == pytest.approx(-10.0, abs=1e-4)
    _, pitched = m.rollout(torch.tensor(action_vector(0.0, 0.0, 0.0, 1.0, None)).expand(5, -1), start)
    assert abs(float(torch.rad2deg(pitch_of(pitched.up[0]))) + 10.0) > 1e-3     # a pitch row still pitches
    free = CameraMotion(dataclasses.replace(m.config, pitch_held=False))
    free.load_state_dict(m.state_dict())
    _, drifted = free.rollout(torch.tensor(action_vector(1.0, 0.5, 1.0, 0.0, None)).expand(50, -1), start)
    assert abs(float(torch.rad2deg(pitch_of(drifted.up[0]))) + 10.0) > 1e-2     # without: it tips


def test_pitch_needs_input_is_read_from_the_recorded_poses(tmp_path):
    from tiny_world import record_tiny_episodes

    from alaya.train.camera_motion_data import MotionEpisodes, pitch_needs_input
    data = MotionEpisodes(str(record_tiny_episodes(tmp_path / "episodes", episodes=2)), None, frames=False)
    data.actions[..., 3] = 0
    data.poses[:] = data.poses[:, :1]                            # no pitch input, no pitch change
    assert pitch_needs_input(data)
    tilt = torch.eye(4, dtype=data.poses.dtype)
    tilt[1:3, 1:3] = torch.tensor([[math.cos(0.05), -math.sin(0.05)], [math.sin(0.05), math.cos(0.05)]])
    data.poses[0, 4:] = tilt @ data.poses[0, 4:]                 # frame 4 pitches 3 degrees with no input
    assert not pitch_needs_input(data)


def test_a_walk_the_world_stopped_is_not_learned_from():
    """A walk row whose recorded camera stayed put on the floor was stopped by a wall the rows do
    not show; training skips it (else the camera learns not to start walks: a strafe right from a
    stand moved 2 mm a frame where the recordings move 0.1 m)."""
    from alaya.train.camera_motion import blocked_walk
    up = torch.tensor([[0.0, 1.0, 0.0]]).repeat(5, 1)                     # a level camera: world up is its y
    rows = torch.zeros(5, 8)
    rows[0, 1] = 1.0                                                      # strafe, did not move: blocked
    rows[1, 1] = 1.0                                                      # strafe, moved 0.1 m: free
    rows[2, 2] = 1.0                                                      # a turn at rest: not a walk
    rows[3, 0] = 0.5                                                      # forward, rose in a jump only: blocked
    rows[4, 0] = 1.0                                                      # forward, moved: free
    twists = torch.zeros(5, 6)
    twists[1, 3] = -0.1
    twists[2, 1] = 0.05
    twists[3, 4] = 0.2
    twists[4, 5] = 0.1
    assert blocked_walk(rows, twists, up).tolist() == [True, False, False, True, False]


def _jump_row():
    return torch.tensor(action_vector(0.0, 0.0, 0.0, 0.0, "jump"))


def test_a_jump_flies_and_lands_where_it_took_off():
    """With a learned flight the camera rises by ``flight_rise``, loses ``flight_gravity`` of rise a
    frame, and lands exactly at its take-off height; the network alone hung at the apex (no row, no
    vertical momentum is a rest)."""
    torch.manual_seed(3)
    m = CameraMotion(CameraMotionConfig(hidden=16, level=True, still_without_navigation=True,
                                        flight_rise=0.13, flight_gravity=0.015))
    for p in m.net.parameters():
        torch.nn.init.normal_(p, std=0.3)                      # an untrained net: its own rise is arbitrary
    state = m.initial_state(pitch_degrees=-10.0)
    heights, airs = [], []
    for n in range(40):
        _, state = m.step(_jump_row() if n == 0 else torch.zeros(8), state)
        heights.append(float(state.height[0]))
        airs.append(float(state.air[0]))
    rises = np.diff([0.0] + heights)
    np.testing.assert_allclose(rises[:17], 0.13 - 0.015 * np.arange(17), atol=1e-5)
    landed = next(n for n, a in enumerate(airs) if a == 0)
    assert 17 <= landed <= 19                                   # the game's jump: 18 frames
    assert abs(heights[landed]) < 1e-5 and all(abs(h - heights[landed]) < 1e-6 for h in heights[landed:])
    assert min(heights) > -1e-5                                 # never below its take-off ground
    _, again = m.step(_jump_row(), state)                      # on the ground again: a new jump takes off
    assert float(again.air[0]) == pytest.approx(0.13, abs=1e-5)


def test_the_flight_is_read_from_the_recorded_poses():
    from alaya.train.camera_motion_data import flights
    T, rise, fall = 60, 0.12, 0.01
    z = np.full(T, 1.5)
    for n in range(1, 40):                                     # a jump row at frame 5; on the ground from 29 on
        h = z[4] + n * rise - fall * n * (n - 1) / 2
        if h < z[4]:
            break
        z[4 + n] = h
    poses = torch.eye(4, dtype=torch.float64).repeat(1, T, 1, 1)
    poses[0, :, 2, 3] = torch.from_numpy(-z)                   # world_to_camera of a camera at height z
    actions = torch.zeros(1, T, 8)
    actions[0, 5, 4] = 1.0
    found = flights(poses, actions)
    assert len(found) == 1
    np.testing.assert_allclose(found[0][:5], rise - fall * np.arange(5), atol=1e-9)


def test_a_session_reset_with_history_goes_on_with_its_jump():
    """``warmed``: the state after the rows that led to a start, so a replay that starts mid-jump
    keeps falling instead of hanging where it started."""
    m = CameraMotion(CameraMotionConfig(hidden=8, level=True, still_without_navigation=True,
                                        flight_rise=0.13, flight_gravity=0.015))
    history = torch.zeros(6, 8)
    history[0] = _jump_row()
    start = m.initial_state(pitch_degrees=0.0)
    warm = m.warmed(history, start)
    torch.testing.assert_close(warm.up, start.up)
    assert float(warm.air[0]) == pytest.approx(sum(0.13 - 0.015 * n for n in range(6)), abs=1e-5)
    _, next_state = m.step(torch.zeros(8), warm)
    assert float(next_state.height[0] - warm.height[0]) == pytest.approx(0.13 - 0.015 * 6, abs=1e-5)
    _, cold = m.step(torch.zeros(8), start)
    assert float(cold.height[0]) == 0.0                         # from rest: no motion

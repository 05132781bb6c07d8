"""Camera warps: the conventions match the game's camera, so a turn, a look up or a step
rendered by the engine is reproduced by warping the previous frame, and the wrong sign is not."""

import math

import numpy as np
import pytest
import torch

from alaya.data.actions import NavigationScale, action_vector
from alaya.data.geometry import view_pitch_degrees
from alaya.engine.game import GameConfig, GameStream
from alaya.engine.interactive import InteractiveConfig
from alaya.models.view_warp import (advance_pose, camera_rotation, dead_reckon, pinhole, relative_pose, turn_rotation,
                                    walk_poses, warp_ground, warp_rotation)
from alaya.models.world import WorldModel, WorldModelConfig

SIZE = 64


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(10 * torch.log10(1 / ((a - b) ** 2).mean()))


def image(frame: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(frame).permute(2, 0, 1)[None].float() / 255


def last_step(seed: int, warmup: int, rows: list) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The engine's frames before and after the last of ``rows`` played in game ``seed``, and
    the camera pitch (1,) after it."""
    g = GameStream(seed, GameConfig(size=SIZE, warmup_frames=warmup))
    try:
        for row in rows[:-1]:
            g.apply(row)
            g.step()
        before = image(g.render_style("clear_noon"))
        g.apply(rows[-1])
        g.step()
        return before, image(g.render_style("clear_noon")), torch.tensor([g.pitch])
    finally:
        g.close()


def test_no_rotation_is_the_identity():
    x = torch.rand(2, 3, 16, 16)
    warped, coverage = warp_rotation(x, turn_rotation(torch.zeros(2), torch.zeros(2)), pinhole(16, 70.0))
    assert torch.allclose(warped, x, atol=1e-5)
    assert torch.allclose(coverage[..., 1:-1, 1:-1], torch.ones(1))


def test_a_turn_uncovers_the_side_it_turns_to():
    x = torch.rand(1, 3, 32, 32)
    _, coverage = warp_rotation(x, turn_rotation(torch.tensor([math.radians(10.0)]), torch.zeros(1)), pinhole(32, 70.0))
    assert coverage[0, 0, :, :3].max() < 0.5 and coverage[0, 0, :, -3:].min() > 0.99   # left edge is new


@pytest.mark.parametrize("turn,pitch", [(1.0, 0.0), (-1.0, 0.0), (0.0, 1.0), (0.0, -1.0)])
def test_warp_matches_the_engine_turn_and_pitch(turn, pitch):
    cfg = WorldModelConfig()
    before, after, _ = last_step(3, 10, [action_vector(turn=turn, pitch=pitch)] * 4)   # a few frames of it, as played
    K = pinhole(SIZE, cfg.fov_y_degrees)

    def warped(sign):
        rot = turn_rotation(torch.tensor([sign * math.radians(turn * cfg.turn_degrees)]),
                            torch.tensor([sign * math.radians(pitch * cfg.pitch_degrees)]))
        return warp_rotation(before, rot, K)[0]

    copy, right, wrong = psnr(before, after), psnr(warped(1), after), psnr(warped(-1), after)
    assert right > copy + 2.0 and right > wrong + 3.0, (copy, right, wrong)


def test_world_config_rotation_rates_are_the_games():
    cfg, game, nav = WorldModelConfig(), GameConfig(), NavigationScale()
    assert cfg.turn_degrees == pytest.approx(math.degrees(nav.turn_rate) / game.fps)
    assert cfg.pitch_degrees == pytest.approx(math.degrees(nav.pitch_rate) / game.fps)
    assert cfg.fov_y_degrees == pytest.approx(InteractiveConfig().fov_y)     # the game's camera
    assert cfg.max_pitch_degrees == pytest.approx(game.max_pitch_degrees)
    g = GameStream(1, GameConfig(size=16, warmup_frames=2))
    try:
        assert cfg.start_pitch_degrees == pytest.approx(math.degrees(g.pitch), abs=0.01)   # a start frame's pitch
    finally:
        g.close()


def test_align_is_identity_without_rotation_and_needs_the_patch_codec():
    m = WorldModel(WorldModelConfig(widths=(16, 32), emb_dim=32, view_warp=True))
    ctx, valid = torch.rand(2, 3, 48, 8, 8) * 2 - 1, torch.ones(2, 3, 1, 8, 8)
    actions = torch.zeros(2, 3, 8)
    aligned, avalid = m.align(ctx, valid, actions)
    assert torch.allclose(aligned, ctx, atol=1e-5) and torch.allclose(avalid[..., 1:-1, 1:-1], torch.ones(1))
    actions[:, 0, 2] = 1.0                                  # turn in the newest row moves every frame ...
    aligned, avalid = m.align(ctx, valid, actions)
    assert all((aligned[:, k] - ctx[:, k]).abs().max() > 0.1 for k in range(3))
    newest_only = torch.zeros(2, 3, 8)
    newest_only[:, 0, 2] = 1.0
    also_oldest = newest_only.clone()
    also_oldest[:, 2, 2] = 1.0                              # an older row moves only the older frames
    a, b = m.align(ctx, valid, newest_only)[0], m.align(ctx, valid, also_oldest)[0]
    assert torch.allclose(a[:, :2], b[:, :2]) and (a[:, 2] - b[:, 2]).abs().max() > 0.1
    with pytest.raises(ValueError, match="view_warp needs codec 'patch4'"):
        WorldModelConfig(codec="autoencoder", latent_channels=32, view_warp=True)
    with pytest.raises(ValueError, match="action_history"):
        WorldModelConfig(view_warp=True, action_history=2)


# --- walking: the ground-plane warp ------------------------------------------------------------

def test_camera_rotation_and_pitch_match_the_engines_view():
    g = GameStream(5, GameConfig(size=16, warmup_frames=2))
    try:
        for _ in range(4):
            g.apply(action_vector(turn=0.7, pitch=0.5))
            view = g.step()["world_to_camera"]
        opencv = np.diag([1.0, -1.0, -1.0]) @ view[:3, :3]               # OpenGL -> OpenCV axes
        mine = camera_rotation(torch.tensor([g.yaw]), torch.tensor([g.pitch]))[0].numpy()
        assert np.allclose(mine, opencv, atol=1e-5)
        assert float(view_pitch_degrees(view)) == pytest.approx(math.degrees(g.pitch), abs=1e-3)
    finally:
        g.close()


def test_walk_poses_replay_the_rows_backwards():
    rows = torch.zeros(1, 3, 8)
    rows[0, 0, 0] = 1.0                                   # frame n: a step forward at yaw 0
    rows[0, 1, 2] = 1.0                                   # frame n-1: a turn left ...
    rows[0, 1, 1] = 1.0                                   # ... and a step right along its new heading
    rows[0, 2, :2] = torch.tensor([1.0, 1.0])             # frame n-2: a diagonal, not faster
    yaw, pitch, centre = walk_poses(rows, torch.tensor([0.1]), math.radians(3), math.radians(2), 0.1)
    assert torch.allclose(centre[0, 0], torch.tensor([-0.1, 0.0, 0.0]))          # n-1 stood 0.1 m behind
    assert yaw[0, 0] == pytest.approx(0.0) and yaw[0, 1] == pytest.approx(-math.radians(3))
    assert torch.allclose(centre[0, 1], torch.tensor([-0.1, 0.1, 0.0]), atol=1e-6)   # right of yaw 0 is -y
    step = centre[0, 2] - centre[0, 1]
    assert step.norm() == pytest.approx(0.1, abs=1e-6)
    assert torch.allclose(pitch, torch.full((1, 3), 0.1))


def test_ground_warp_without_a_step_is_the_rotation_warp():
    x = torch.rand(2, 3, 16, 16)
    pitch = torch.tensor([0.2, -0.3])
    new = camera_rotation(torch.zeros(2), pitch)
    old = camera_rotation(torch.tensor([-0.05, 0.04]), pitch - 0.03)
    a, ca = warp_ground(x, pinhole(16, 70.0), new, old, torch.zeros(2, 3), eye_height=1.4)
    b, cb = warp_rotation(x, old @ new.transpose(1, 2), pinhole(16, 70.0))
    assert torch.allclose(a, b, atol=1e-4) and torch.allclose(ca, cb, atol=1e-4)


@pytest.mark.parametrize("forward,strafe", [(1.0, 0.0), (-1.0, 0.0), (0.0, 1.0)])
def test_ground_warp_matches_the_engine_step(forward, strafe):
    cfg = WorldModelConfig(view_warp=True, ground_warp=True)
    look_down = action_vector(pitch=-1.0)                 # a little: more floor in view
    before, after, pitch = last_step(5, 30, [look_down] + [action_vector(forward=forward, strafe=strafe)] * 3)
    K = pinhole(SIZE, cfg.fov_y_degrees)
    new = camera_rotation(torch.zeros(1), pitch)

    def warped(sign):
        rows = torch.zeros(1, 1, 8)
        rows[0, 0, :2] = sign * torch.tensor([forward, strafe])
        yaw, old_pitch, centre = walk_poses(rows, pitch, 0.0, 0.0, cfg.move_metres)
        return warp_ground(before, K, new, camera_rotation(yaw[:, 0], old_pitch[:, 0]), centre[:, 0],
                           cfg.eye_height)[0]

    copy, right, wrong = psnr(before, after), psnr(warped(1), after), psnr(warped(-1), after)
    assert right > copy + 1.5 and right > wrong + 2.5, (copy, right, wrong)


def test_align_ground_warp_needs_the_pitch_and_moves_with_a_step():
    m = WorldModel(WorldModelConfig(widths=(16, 32), emb_dim=32, view_warp=True, ground_warp=True))
    ctx, valid = torch.rand(2, 3, 48, 8, 8) * 2 - 1, torch.ones(2, 3, 1, 8, 8)
    still = torch.zeros(2, 3, 8)
    with pytest.raises(ValueError, match="pitch"):
        m.align(ctx, valid, still)
    pitch = torch.tensor([-5.0, 10.0])
    aligned, _ = m.align(ctx, valid, still, pitch)
    assert torch.allclose(aligned, ctx, atol=1e-5)
    walk = still.clone()
    walk[:, 0, 0] = 1.0
    moved, _ = m.align(ctx, valid, walk, pitch)
    plain = WorldModel(WorldModelConfig(widths=(16, 32), emb_dim=32, view_warp=True))
    assert (moved - ctx).abs().max() > 0.1 and torch.allclose(plain.align(ctx, valid, walk)[0], ctx, atol=1e-5)
    with pytest.raises(ValueError, match="ground_warp extends view_warp"):
        WorldModelConfig(ground_warp=True)


def test_dead_reckoning_agrees_with_the_backward_replay():
    """Poses integrated forward from frame 0 (``dead_reckon``, row by row ``advance_pose``) and
    seen from frame n (``relative_pose``) are the cameras ``walk_poses`` replays backwards."""
    g = torch.Generator().manual_seed(0)
    rows = torch.zeros(2, 12, 8)
    rows[..., :3] = torch.randint(-2, 3, (2, 12, 3), generator=g).float() / 2
    turn, move = math.radians(3), 0.1
    poses = dead_reckon(rows, turn, move)
    assert torch.equal(poses[:, 0], torch.zeros(2, 3))
    pose = torch.zeros(2, 3)
    for t in range(1, 12):
        pose = advance_pose(pose, rows[:, t], turn, move)
        assert torch.allclose(pose, poses[:, t], atol=1e-5)
    n, K = 11, 4
    yaw, _, centre = walk_poses(rows[:, n - K + 1:n + 1].flip(1), torch.zeros(2), turn, 0.0, move)
    for k in range(K):                                     # frame n-1-k seen from frame n
        ryaw, rcentre = relative_pose(poses[:, n - 1 - k], poses[:, n])
        assert torch.allclose(ryaw, yaw[:, k], atol=1e-5) and torch.allclose(rcentre, centre[:, k], atol=1e-5)


def test_floor_far_from_the_old_camera_is_not_covered():
    x = torch.rand(1, 3, 16, 16)
    cam = camera_rotation(torch.zeros(1), torch.tensor([-0.3]))
    near, c_near = warp_ground(x, pinhole(16, 70.0), cam, cam, torch.tensor([[-1.0, 0.0, 0.0]]), 1.4,
                               old_max_distance=30.0)
    _, c_far = warp_ground(x, pinhole(16, 70.0), cam, cam, torch.tensor([[-40.0, 0.0, 0.0]]), 1.4,
                           old_max_distance=30.0)
    _, c_free = warp_ground(x, pinhole(16, 70.0), cam, cam, torch.tensor([[-40.0, 0.0, 0.0]]), 1.4)
    assert c_near[..., 12:, :].min() > 0.99                 # the floor just ahead: seen from 1 m back
    assert c_far[..., 12:, :].max() == 0 and c_free[..., 12:, :].min() > 0.99


def test_anchor_warp_follows_the_engine_over_a_walk():
    """The start frame, seen from the pose eight rows of walking and turning reach (dead
    reckoning, as a session tracks it), matches the engine's frame there better than the start
    frame itself or the same walk the other way; standing still it is the anchor unchanged."""
    cfg = WorldModelConfig(widths=(16, 32), emb_dim=32, view_warp=True, ground_warp=True, anchor_warp=True)
    m = WorldModel(cfg)
    walk = [action_vector(forward=1.0, turn=0.5)] * 8
    look_down = action_vector(pitch=-1.0)
    start, _, pitch = last_step(5, 30, [look_down, action_vector()])
    _, after, pitch_after = last_step(5, 30, [look_down, action_vector()] + walk)
    to_latent = lambda img: torch.nn.functional.pixel_unshuffle(img * 2 - 1, 4)
    to_image = lambda z: (torch.nn.functional.pixel_shuffle(z, 4) + 1) / 2
    a = to_latent(start)
    rows = torch.from_numpy(np.stack([np.zeros(8, np.float32)] + walk))[None]

    def seen(sign):
        poses = dead_reckon(rows * sign, math.radians(cfg.turn_degrees), cfg.move_metres)
        return to_image(m.align_anchor(a, a, poses[:, 0], torch.rad2deg(pitch), poses[:, -1], torch.rad2deg(pitch_after)))

    copy, right, wrong = psnr(start, after), psnr(seen(1), after), psnr(seen(-1), after)
    assert right > copy + 1.0 and right > wrong + 1.0, (copy, right, wrong)
    zero, p = torch.zeros(1, 3), torch.tensor([-5.0])
    assert torch.allclose(m.align_anchor(a, torch.zeros_like(a), zero, p, zero, p), a, atol=1e-4)
    with pytest.raises(ValueError, match="anchor_pose"):
        m.align_anchor(a, a, None, p, zero, p)
    with pytest.raises(ValueError, match="anchor_warp needs ground_warp"):
        WorldModelConfig(view_warp=True, anchor_warp=True)

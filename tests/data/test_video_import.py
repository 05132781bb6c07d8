"""Video + pose-log import: a known camera path survives export -> mp4 + CSV -> import."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from alaya.data.actions import NavigationScale, action_vector
from alaya.data.episodes import EpisodeDataset, validate_episodes
from alaya.data.recorder import EpisodeRecorder
from alaya.data.video_import import (
    VideoImportError, actions_from_poses, export_video, import_video, matrix_to_quaternion,
    quaternion_to_matrix, read_poses,
)

FPS, SIZE = 30.0, 32
# the known navigation: forward, strafe, turns both ways, pitch, and all at once
PLAN = [action_vector(forward=1.0), action_vector(forward=0.5), action_vector(turn=0.4),
        action_vector(turn=-1.0), action_vector(strafe=0.3), action_vector(pitch=0.5),
        action_vector(pitch=-0.25), action_vector(forward=-0.6, strafe=-0.2, turn=0.7, pitch=0.1),
        action_vector(), action_vector(forward=0.8, turn=-0.3)]


def _view(eye: np.ndarray, yaw: float, pitch: float) -> np.ndarray:
    """OpenGL world_to_camera of a camera at ``eye`` looking along (yaw, pitch), world z up."""
    f = np.array([math.cos(pitch) * math.cos(yaw), math.cos(pitch) * math.sin(yaw), math.sin(pitch)])
    r = np.cross(f, [0.0, 0.0, 1.0])
    r /= np.linalg.norm(r)
    m = np.eye(4)
    m[:3, :3] = np.stack([r, np.cross(r, f), -f])
    m[:3, 3] = -m[:3, :3] @ eye
    return m


def _play(plan: list[np.ndarray], scale: NavigationScale = NavigationScale()) -> np.ndarray:
    """Integrate the plan as the game does (turn and pitch, then move along the new heading)."""
    eye, yaw, pitch = np.array([2.0, -1.0, 1.4]), 3.0, -0.1
    views = [_view(eye, yaw, pitch)]
    for forward, strafe, turn, dpitch in (row[:4] for row in plan):
        yaw += turn * scale.turn_rate / FPS
        pitch += dpitch * scale.pitch_rate / FPS
        h, r = np.array([math.cos(yaw), math.sin(yaw), 0]), np.array([math.sin(yaw), -math.cos(yaw), 0])
        eye = eye + scale.move_speed / FPS * (forward * h + strafe * r)
        views.append(_view(eye, yaw, pitch))
    return np.stack(views)


def _frames(T: int) -> np.ndarray:
    """Smooth, moving colour gradients (codec-friendly): (T, SIZE, SIZE, 3) uint8."""
    y, x = np.mgrid[0:SIZE, 0:SIZE] / SIZE
    return np.stack([np.stack([128 + 100 * np.sin(2 * x + 0.3 * t), 128 + 100 * np.cos(3 * y - 0.2 * t),
                               np.full_like(x, 60 + 10 * t)], -1) for t in range(T)]).astype(np.uint8)


@pytest.fixture
def exported(tmp_path: Path) -> tuple[Path, Path, np.ndarray, np.ndarray]:
    """An episode recorded with the known plan, exported as mp4 + pose CSV."""
    views, frames = _play(PLAN), _frames(len(PLAN) + 1)
    rec = EpisodeRecorder(tmp_path / "src", styles={"game": ["a game"]}, fps=FPS, source="test",
                          size=SIZE)
    with rec.begin("ep", seed=0) as ep:
        for t, frame in enumerate(frames):
            ep.add(frame[None], None if t == 0 else PLAN[t - 1], world_to_camera=views[t])
    export_video(ep.path, tmp_path / "ep.mp4", tmp_path / "ep.csv")
    return tmp_path / "ep.mp4", tmp_path / "ep.csv", views, frames


def test_round_trip_recovers_actions_and_frames(tmp_path: Path, exported) -> None:
    video, poses, views, frames = exported
    assert (tmp_path / "ep.csv").read_text().startswith("frame,x,y,z,qw,qx,qy,qz\n0,")
    result = import_video(video, poses, tmp_path / "out", "clip1", size=SIZE)
    assert result.frames == len(PLAN) + 1 and result.fps == FPS
    assert result.clipped == {"forward": 0, "strafe": 0, "turn": 0, "pitch": 0}
    assert validate_episodes(tmp_path / "out") == []
    ds = EpisodeDataset(tmp_path / "out")
    assert ds.meta.source == "video" and ds.meta.fps == FPS
    ep = ds.load("clip1")
    np.testing.assert_allclose(ep["actions"], np.stack([np.zeros(8)] + PLAN), atol=1e-3)
    np.testing.assert_allclose(ep["world_to_camera"], views, atol=1e-5)
    assert np.abs(ep["rgb"][0].astype(float) - frames).mean() < 8      # lossy H.264, 8/255
    # a .npy of world_to_camera matrices gives the same actions
    np.save(tmp_path / "poses.npy", views)
    again = import_video(video, tmp_path / "poses.npy", tmp_path / "out", "clip2", size=SIZE)
    np.testing.assert_allclose(ds.__class__(tmp_path / "out").load("clip2")["actions"],
                               ep["actions"], atol=1e-5)
    assert again.path.name == "clip2.npz"


def test_count_mismatch_names_both_files(tmp_path: Path, exported) -> None:
    video, poses, _, _ = exported
    lines = poses.read_text().splitlines()
    short = tmp_path / "short.csv"
    short.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(VideoImportError, match=r"ep.mp4 has 11 frames but the pose log .*short.csv "
                                               r"has 10 poses"):
        import_video(video, short, tmp_path / "out", "x", size=SIZE)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("line,match", [
    ("0,0,0,0,2,0,0,0", "line 2: quaternion .* norm 2"),
    ("0,nan,0,0,1,0,0,0", "line 2: column 'x' is nan"),
    ("1,0,0,0,1,0,0,0", "line 2: column 'frame' is 1, expected 0"),
    ("0,0,0,1,0,0", "line 2: expected 8 values"),
])
def test_bad_pose_lines_are_named(tmp_path: Path, line: str, match: str) -> None:
    path = tmp_path / "p.csv"
    path.write_text("frame,x,y,z,qw,qx,qy,qz\n" + line + "\n")
    with pytest.raises(VideoImportError, match=f"p.csv: {match}"):
        read_poses(path)
    path.write_text("t,x,y,z\n")
    with pytest.raises(VideoImportError, match="line 1: header must be"):
        read_poses(path)


def test_fast_motion_is_clipped_and_counted() -> None:
    views = _play(PLAN)
    actions, clipped = actions_from_poses(views, FPS, NavigationScale(move_speed=1.0))
    # moved at 3 m/s, read at 1 m/s: forward 1.0, 0.5, -0.6, 0.8 overflow, strafe 0.3, -0.2 fit
    assert clipped == {"forward": 4, "strafe": 0, "turn": 0, "pitch": 0}
    assert np.abs(actions).max() <= 1.0


def test_quaternions_round_trip() -> None:
    rng = np.random.default_rng(0)
    for q in rng.normal(size=(20, 4)):
        q = q / np.linalg.norm(q) * np.sign(q[0])
        np.testing.assert_allclose(matrix_to_quaternion(quaternion_to_matrix(q)), q, atol=1e-12)

"""The world-model evaluation on sessions with known answers, in the rolled world of
``rolled_world`` (a texture rolled by the actions: a session that rolls its start frame by the
actions is a perfect world model). The inverse-dynamics tests are in ``test_world_idm``."""

import dataclasses
import json

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from alaya.data.actions import ActionError
from alaya.evaluation.inverse_dynamics import action_classes, balanced_accuracy, load_episode
from alaya.evaluation.scripted_play import (LOOK_RANGE_DEGREES, PITCH_DEGREES_PER_FRAME, START_PITCH_DEGREES,
                                            loop_actions, scripted_actions, still_actions)
from alaya.evaluation.frame_stats import colour_drift, frame_stats, late_early_ratio
from alaya.evaluation.world_eval import WorldEvalConfig, evaluate_world, public_json
from alaya.evaluation.world_report import write_world_report

from rolled_world import CFG, PITCH, SIZE, TURN, Fade, Frozen, Replay, Shift, episodes, run  # noqa: F401  (episodes: a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_action_classes_and_balanced_accuracy():
    rows = [[0, 0.5, -0.5, 0.2, 0, 0, 1, 0], [1, -1, 0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0]]
    assert action_classes(rows).tolist() == [[1, 2, 0, 1, 3], [2, 0, 1, 1, 1], [1, 1, 1, 1, 0]]
    with pytest.raises(ActionError, match="frame 0.*at most one"):
        action_classes([[0, 0, 0, 0, 1, 1, 0, 0]])
    labels = torch.tensor([0] * 9 + [1])
    assert balanced_accuracy(torch.zeros(10, dtype=torch.long), labels) == 0.5   # plain accuracy: 0.9
    assert balanced_accuracy(labels, labels) == 1.0


def test_frame_stats_and_drift_on_known_frames():
    grey = np.full((2, 8, 8, 3), 128, np.uint8)
    checker = np.kron((np.indices((8, 8)).sum(0) % 2)[..., None], np.ones(3))[None].astype(np.uint8) * 255
    s_grey, s_checker = frame_stats(grey), frame_stats(checker)
    assert np.allclose(s_grey["brightness"], 128 / 255, atol=1e-6) and np.all(s_grey["sharpness"] == 0)
    assert s_checker["sharpness"][0] > 1.0
    assert late_early_ratio(np.array([2.0, 2.0, 1.0, 1.0]), 2) == 0.5
    assert colour_drift(np.array([[0, 0, 0], [0, 0, 0], [0.3, 0.4, 0]]), 1) == pytest.approx(0.5)
    acts = scripted_actions(500, seed=3)
    assert acts.shape == (500, 8) and np.array_equal(acts, scripted_actions(500, seed=3))
    assert (acts[:, 0] != 0).mean() > 0.3 and 0 < (acts[:, 4:].sum(1) > 0).mean() < 0.1
    long = scripted_actions(3000, seed=0)
    pitch = START_PITCH_DEGREES + PITCH_DEGREES_PER_FRAME * np.cumsum(long[:, PITCH])
    lo, hi = LOOK_RANGE_DEGREES
    assert lo - 1 <= pitch.min() and pitch.max() <= hi + 1 and (long[:, PITCH] != 0).mean() > 0.03   # looks, in range
    assert loop_actions(3, "turn")[:, TURN].tolist() == [1, 1, 1, -1, -1, -1]


def test_scripted_look_matches_the_game_and_its_players():
    import math

    from alaya.data.actions import NavigationScale
    from alaya.engine.game import GameConfig
    from alaya.engine.players import PlayerConfig
    from alaya.models.world import WorldModelConfig
    assert PITCH_DEGREES_PER_FRAME == pytest.approx(math.degrees(NavigationScale().pitch_rate) / GameConfig().fps)
    assert START_PITCH_DEGREES == WorldModelConfig().start_pitch_degrees
    lo, hi = (math.degrees(v) for v in PlayerConfig().pitch_range)
    assert LOOK_RANGE_DEGREES[0] >= lo - 1 and LOOK_RANGE_DEGREES[1] <= hi + 1


def test_oracle_replay_is_perfect_and_beats_the_baseline(episodes):
    r = run(Replay(episodes), episodes)
    assert all(r[f"psnr_step{k}"] == 100.0 for k in range(1, 17))
    assert r["ssim_step16"] > 0.999 and r["psnr_step16"] > r["baseline_psnr_step16"] + 20
    assert set(r["per_style"]) == {"day", "night"} and r["per_style"]["night"]["psnr_step16"] == 100.0


def test_frozen_session_is_exactly_the_baseline(episodes):
    r = run(Frozen(), episodes)
    assert all(r[f"psnr_step{k}"] == r[f"baseline_psnr_step{k}"] for k in range(1, 17))
    assert r["baseline_psnr_step16"] < 20 and r["delta_psnr_actions"] == 0.0
    assert r["loop_turn_psnr_return"] == 100.0         # loops alone cannot tell a frozen world


def test_actions_matter_only_to_a_model_that_uses_them(episodes):
    ignoring = run(Replay(episodes, keyed=False), episodes)
    assert ignoring["delta_psnr_actions"] == 0.0
    keyed = run(Shift(), episodes)
    assert keyed["psnr_mean"] == 100.0 and keyed["delta_psnr_actions"] > 20


def test_a_session_that_takes_a_pitch_gets_its_start_frames(episodes):
    """Episodes with camera poses: every reset of a session whose ``reset`` takes ``pitch`` gets
    the recorded pitch of the frame it starts from (here 0.5 degrees per frame index)."""
    from alaya.models.view_warp import camera_rotation

    def views(T):
        m = np.tile(np.eye(4, dtype=np.float32), (T, 1, 1))
        cv = camera_rotation(torch.zeros(T), torch.deg2rad(0.5 * torch.arange(T, dtype=torch.float32)))
        m[:, :3, :3] = np.diag([1.0, -1.0, -1.0]) @ cv.numpy()             # OpenCV -> OpenGL axes
        return m

    posed = [dict(ep, world_to_camera=views(ep["rgb"].shape[1])) for ep in episodes]

    class Pitched(Frozen):
        starts = []

        def reset(self, frame, prompt, pitch=None):
            self.starts.append((frame, pitch))
            super().reset(frame, prompt)

    run(Pitched(), posed)
    assert len(Pitched.starts) > 10
    for frame, pitch in Pitched.starts:
        t = round(pitch / 0.5)
        assert pitch == pytest.approx(0.5 * t, abs=1e-3)
        assert any(np.array_equal(ep["rgb"][s, t], frame) for ep in posed for s in range(2))

def test_a_session_that_takes_a_depth_gets_the_recorded_one(episodes):
    """Episodes with depth: every reset of a session whose ``reset`` takes ``depth`` gets the
    recorded depth of the frame it starts from (here frame t's depth is t + 1 metres everywhere),
    resized to the session's frame size; ``start_depth=False`` gives it none (it predicts)."""
    deep = [dict(ep, depth=np.broadcast_to((np.arange(ep["rgb"].shape[1], dtype=np.float16) + 1)[:, None, None],
                                            (ep["rgb"].shape[1], 64, 64)).copy()) for ep in episodes]

    class Deep(Frozen):
        starts = []

        def reset(self, frame, prompt, pitch=None, depth=None):
            self.starts.append((frame, depth))
            super().reset(frame, prompt)

    run(Deep(), deep)
    assert len(Deep.starts) > 10
    size = episodes[0]["rgb"].shape[2]
    for frame, depth in Deep.starts:
        assert depth is not None and depth.dtype == np.float32 and depth.shape == (size, size)
        t = int(depth[0, 0]) - 1
        assert (depth == t + 1).all()
        assert any(np.array_equal(ep["rgb"][s, t], frame) for ep in deep for s in range(2))
    Deep.starts = []
    run(Deep(), deep, cfg=dataclasses.replace(CFG, start_depth=False))
    assert Deep.starts and all(d is None for _, d in Deep.starts)


def test_a_replay_window_starts_with_the_rows_that_led_to_it(episodes):
    """A session whose ``reset`` takes ``history`` gets, for each replay window, up to
    ``start_history`` recorded rows before its start frame (the start frame's own row last; row 0
    is never played), so a jump or walk under way goes on; loops and still starts get none."""
    class Remembering(Frozen):
        starts = []

        def reset(self, frame, prompt, history=None):
            self.starts.append((frame, history))
            super().reset(frame, prompt)

    run(Remembering(), episodes, cfg=dataclasses.replace(CFG, start_history=5))
    given = [(f, h) for f, h in Remembering.starts if h is not None]
    assert len(given) >= 2 * CFG.windows
    for frame, history in given:
        assert history.shape[1:] == (8,) and 1 <= len(history) <= 5
        assert any(np.array_equal(ep["actions"][t - len(history) + 1:t + 1], history)
                   and any(np.array_equal(ep["rgb"][s, t], frame) for s in range(2))
                   for ep in episodes for t in range(len(history), ep["rgb"].shape[1]))
    Remembering.starts = []
    run(Remembering(), episodes, cfg=dataclasses.replace(CFG, start_history=0))
    assert Remembering.starts and all(h is None for _, h in Remembering.starts)
    with pytest.raises(ValueError, match="start_history"):
        dataclasses.replace(CFG, start_history=-1)


def test_long_rollout_catches_fading(episodes):
    stable = run(Shift(), episodes)
    assert 0.9 < stable["late_early_sharpness_ratio"] < 1.1
    assert 0.95 < stable["late_early_brightness_ratio"] < 1.05 and stable["colour_drift"] < 0.02
    assert len(stable["rollout_series"]["sharpness"]) == 120 and stable["rollout_head"].shape == (20, SIZE, SIZE, 3)
    grey = run(Fade(60, 128.0), episodes)
    assert grey["late_early_sharpness_ratio"] < 0.75
    dark = run(Fade(60, 0.0), episodes)
    assert dark["late_early_brightness_ratio"] < 0.5 and dark["colour_drift"] > 0.2


def test_out_and_back_returns_only_for_a_consistent_world(episodes):
    r = run(Shift(), episodes)
    assert r["loop_turn_psnr_return"] == 100.0 and r["loop_turn_psnr_turn"] < 25

    class Drifts(Shift):                                  # turning right also turns left
        def step(self, action):
            return super().step(np.abs(action))
    d = run(Drifts(), episodes)
    assert d["loop_turn_psnr_return"] < 25


def test_standing_still_catches_melting_and_grain(episodes):
    assert still_actions(3).shape == (3, 8) and not still_actions(3).any()
    r = run(Shift(), episodes)                            # a world that stays put
    assert [r[f"still_psnr_step{k}"] for k in (1, 6, 12)] == [100.0] * 3 and r["still_sharpness_ratio"] == 1.0
    melt = run(Fade(12, 128.0), episodes)                 # blurs to mush while the player waits
    assert melt["still_psnr_step12"] < 20 < melt["still_psnr_step1"] and melt["still_sharpness_ratio"] < 0.1

    class Grain(Shift):                                   # grain grows while the player waits
        def step(self, action):
            frame = super().step(action)
            if action.any():
                return frame
            self.k = getattr(self, "k", 0) + 1
            noise = np.random.default_rng(self.k).normal(0, 3 * self.k, frame.shape)
            return np.clip(frame + noise, 0, 255).astype(np.uint8)
    g = run(Grain(), episodes)
    assert g["still_sharpness_ratio"] > 1.25 and g["still_psnr_step12"] < g["still_psnr_step1"] < 100
    assert r["loop_turn_psnr_return"] == g["loop_turn_psnr_return"]   # moving, Grain is Shift


def test_report_writes_every_file(episodes, tmp_path):
    r = run(Fade(), episodes)                             # every frame differs (GIF writers merge repeats)
    report = write_world_report(r, tmp_path / "report", "fade")
    text = report.read_text()
    assert f"| psnr_step16 | {r['psnr_step16']:.4g} |" in text and "## Per style" in text
    data = json.loads((tmp_path / "report" / "results.json").read_text())
    assert data["psnr_step16"] == r["psnr_step16"] and len(data["rollout_series"]["brightness"]) == 120
    assert "samples" not in public_json(r) and "rollout_head" not in data
    for name in ("psnr_horizon.png", "rollout.png", "contact_sheet.png", "loops.png"):
        assert (tmp_path / "report" / name).stat().st_size > 1000, name
    assert iio.imread(tmp_path / "report" / "rollout.gif", index=None).shape[0] == 20


def test_episode_files_load(episodes, tmp_path):
    np.savez(tmp_path / "a.npz", **episodes[0])
    np.savez(tmp_path / "b.npz", **episodes[1])
    r = run(Shift(), [tmp_path / "a.npz", tmp_path / "b.npz"])
    assert r["episodes"] == ["a", "b"] and r["psnr_step16"] == 100.0
    assert load_episode(tmp_path / "a.npz")["styles"].tolist() == ["day", "night"]


def test_episodes_dataset_and_its_prompts(episodes, tmp_path):
    from alaya.data.episodes import EpisodeDataset, EpisodesMeta, write_episode, write_meta
    meta = EpisodesMeta.new(resolution=(SIZE, SIZE), fps=16.0, source="test",
                            styles={"day": ["a sunny day"], "night": ["a dark night", "moonlight"]})
    (tmp_path / "episodes").mkdir()
    for j, ep in enumerate(episodes):
        write_episode(tmp_path / "episodes" / f"e{j}.npz", ep)
        meta.episodes[f"e{j}"] = {"split": "train" if j == 0 else "test", "frames": 40, "seed": None}
    write_meta(tmp_path, meta)
    ds = EpisodeDataset(tmp_path)
    seen = set()

    class Recording(Shift):
        def reset(self, frame, prompt):
            seen.add(prompt)
            super().reset(frame, prompt)
    r = evaluate_world(Recording, ds, None, CFG, prompts=ds.meta.styles, progress=False)
    assert r["episodes"] == ["e1", "e2"] and r["psnr_step16"] == 100.0
    assert seen == {"a sunny day", "a dark night", "moonlight"}
    with pytest.raises(ValueError, match="prompts: no prompt for style 'night'"):
        evaluate_world(Recording, ds, None, CFG, prompts={"day": ["x"]}, progress=False)


def test_bad_sessions_and_episodes_are_named(episodes):
    class Flat(Shift):
        def step(self, action):
            return super().step(action)[..., 0].astype(np.float32)
    with pytest.raises(ValueError, match=r"session\.step returned float32 \(32, 32\) at step 1"):
        run(Flat(), episodes)

    class NoSize(Shift):
        size = "32"
    with pytest.raises(ValueError, match=r"session\.size"):
        run(NoSize(), episodes)
    short = {**episodes[0], "actions": episodes[0]["actions"][:-1]}
    with pytest.raises(ValueError, match=r"episode 0: 'actions' must be \(40, 8\)"):
        run(Shift(), [short])
    with pytest.raises(ValueError, match="horizon = 50"):
        run(Shift(), episodes, cfg=WorldEvalConfig(horizon=50))
    with pytest.raises(ValueError, match="WorldEvalConfig.windows"):
        WorldEvalConfig(windows=0)

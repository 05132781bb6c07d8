"""The live evaluation (``alaya eval world --live``): its scripts, its metrics on sessions with
known answers (the real game itself, the game blurred), the data's action columns, and a tiny
world model end to end through the CLI."""

import json
import math

import numpy as np
import pytest
import torch
from PIL import Image

from alaya.data.actions import ACTION_COLUMNS, NavigationScale
from alaya.evaluation.live_actions import action_sheet, base_script, change, placement, play_actions, with_action
from alaya.evaluation.live_reference import game_player, play_in_game, start_scenes
from alaya.evaluation.live_report import write_live_report
from alaya.evaluation.live_scripts import (LOOK_RANGE_DEGREES, PITCH_DEGREES_PER_FRAME, START_PITCH_DEGREES,
                                           data_action_columns, live_scripts, play_script, turn_around_frames)
from alaya.evaluation.frame_stats import hf_energy
from alaya.evaluation.world_live import (LiveConfig, Scene, evaluate_live, psnr_where, public_json,
                                        windows)

from tiny_world import one_thread, tiny_world_folder  # noqa: F401  (one_thread: a fixture)

SIZE, SEED, STYLE = 32, 4, "clear_noon"
CFG = LiveConfig(frames=24, window=8, seed=1)          # play 24 frames, standing still 8 after a 1-frame walk
COL = {c: i for i, c in enumerate(ACTION_COLUMNS)}


def scene() -> Scene:
    start = play_in_game(SEED, STYLE, np.zeros((0, 8), np.float32), SIZE)[0]
    return Scene("ep00004_clear_noon", SEED, STYLE, "a clear sunny noon", start)


class GameSession:
    """The real game as a session: a perfect world model; ``blur`` box-blurs its frames,
    ``grain`` adds a checkerboard of ± that many grey levels, ``stray`` reports a camera that
    moves that many metres a frame to its right of the game's."""

    def __init__(self, scene: Scene, blur: bool = False, grain: int = 0, stray: float = 0.0):
        self.scene, self.blur, self.grain, self.stray = scene, blur, grain, stray

    def reset(self, frame):
        from alaya.engine.game import GameConfig, GameStream
        self.game = GameStream(self.scene.seed, GameConfig(size=SIZE))
        self.game.step()
        self.steps = 0
        assert np.array_equal(self.game.render_style(self.scene.style), frame)

    def camera_view(self):
        shift = np.eye(4)
        shift[0, 3] = -self.stray * self.steps          # the camera's centre, stray * steps to its right
        return shift @ self.game.world_to_camera

    def step(self, row):
        self.steps += 1
        self.game.apply(row)
        self.game.step()
        f = self.game.render_style(self.scene.style)
        if self.blur:
            x = torch.from_numpy(f).permute(2, 0, 1)[None].float()
            x = torch.nn.functional.avg_pool2d(torch.nn.functional.pad(x, (1, 1, 1, 1), mode="replicate"), 3, 1)
            f = x[0].permute(1, 2, 0).round().to(torch.uint8).numpy()
        if self.grain:
            sign = np.where(np.add.outer(np.arange(SIZE), np.arange(SIZE)) % 2, 1, -1)[..., None]
            f = np.clip(f.astype(int) + self.grain * sign, 0, 255).astype(np.uint8)
        return f


def test_scripts_are_the_minute_still_and_walk_back_and_deterministic():
    scripts, skipped = live_scripts()
    assert skipped == {"actions": [], "scripts": {}}
    play, still, back = scripts["play"].actions, scripts["still"].actions, scripts["walk_back"].actions
    assert play.shape == (1800, 8) and np.array_equal(play, live_scripts(seed=0)[0]["play"].actions)
    assert not np.array_equal(play, play_script(1800, seed=1))
    for c in ACTION_COLUMNS:                               # every action in the minute
        assert (play[:, COL[c]] != 0).sum() > (5 if c in ("jump", "attack", "spell", "summon") else 30), c
    shots = np.flatnonzero(play[:, 4:].sum(1))
    assert 0.015 < len(shots) / 1800 < 0.04 and np.diff(shots).min() >= 8
    pitch = START_PITCH_DEGREES + PITCH_DEGREES_PER_FRAME * np.cumsum(play[:, COL["pitch"]])
    assert LOOK_RANGE_DEGREES[0] - 1 <= pitch.min() and pitch.max() <= LOOK_RANGE_DEGREES[1] + 1
    assert still.shape == (630, 8) and scripts["still"].marks == {"still_from": 30}
    assert (still[:30, COL["forward"]] == 1).all() and not still[30:].any()
    # walk_back: out 90, turn 180 degrees, back 90, turn 180 degrees: facing the start, where it started
    assert turn_around_frames() == 60
    assert back.shape == (300, 8) and scripts["walk_back"].marks == {"turning_point": 90, "back": 240}
    turned = np.cumsum(back[:, COL["turn"]]) * math.degrees(NavigationScale().turn_rate) / 30
    assert turned[149] == pytest.approx(180) and turned[-1] == pytest.approx(360)
    heading = np.radians(np.concatenate([[0], turned[:-1]]))
    walked = (back[:, COL["forward"], None] * np.stack([np.cos(heading), np.sin(heading)], 1)).sum(0)
    assert np.abs(walked).max() < 1e-3
    short = live_scripts(frames=24)[0]
    assert len(short["play"].actions) == 24 and short["still"].marks == {"still_from": 1}
    assert len(short["still"].actions) == 9 and len(short["walk_back"].actions) == 2 + 120
    with pytest.raises(ValueError, match="scripts"):
        live_scripts(["dance"])


def test_scripts_leave_out_what_the_data_lacks():
    cols = ("forward", "strafe", "jump", "attack")
    scripts, skipped = live_scripts(frames=600, columns=cols)
    assert skipped["actions"] == ["turn", "pitch", "spell", "summon"]
    assert skipped["scripts"] == {"walk_back": "the data has no turn column"}
    play = scripts["play"].actions
    assert not play[:, [COL["turn"], COL["pitch"], COL["spell"], COL["summon"]]].any()
    assert play[:, COL["strafe"]].any() and play[:, COL["attack"]].any()
    _, none = live_scripts(["still"], columns=())
    assert none == {"actions": ["forward"], "scripts": {}}


def test_data_action_columns_are_those_the_episodes_use(tmp_path):
    from alaya.data.recorder import EpisodeRecorder
    rec = EpisodeRecorder(tmp_path, {"day": ["a sunny day"]}, fps=30.0, source="gymnasium:Tiny", size=(16, 16))
    for k, seed in enumerate((1, 2, 3, 5, 6, 7)):           # some land in train, whatever the split
        with rec.begin(f"ep{seed}", seed=seed) as ep:
            ep.add(np.zeros((1, 16, 16, 3), np.uint8))
            row = np.zeros(8, np.float32)
            row[COL["strafe"] if k % 2 else COL["jump"]] = 1.0
            ep.add(np.zeros((1, 16, 16, 3), np.uint8), row)
    assert data_action_columns(tmp_path, split=None) == ["strafe", "jump"]


def test_hf_energy_and_windows_on_known_inputs():
    flat = torch.full((1, 3, 8, 8), 0.5)
    checker = (torch.arange(8)[:, None] + torch.arange(8)).remainder(2).float().expand(1, 3, 8, 8)
    assert hf_energy(flat).item() == 0 and hf_energy(checker).item() > 0.1
    assert hf_energy(checker * 0.5).item() == pytest.approx(hf_energy(checker).item() / 4)
    assert windows(1800, 300) == [slice(a, a + 300) for a in range(0, 1800, 300)]
    assert windows(630, 300) == [slice(0, 300), slice(300, 630)]       # 30 left over: joins the last
    assert windows(500, 300) == [slice(0, 300), slice(300, 500)]
    assert windows(20, 300) == [slice(0, 20)]


@pytest.fixture(scope="module")
def oracle():
    s = scene()
    return s, evaluate_live(lambda sc: GameSession(sc), game_player(SIZE), [s], CFG)


def test_the_real_game_as_a_session_scores_perfectly(oracle):
    _, r = oracle
    assert r["psnr_mean"] == 100.0 and r["sharpness_min"] == 1.0 and r["colour_drift"] == 0.0
    assert r["colour_drift_pooled"] == 0.0 and r["game_colour_change"] > 0
    assert r["sharpness_max"] == 1.0 and r["sharpness_in_band"] is True
    assert r["still_psnr_min"] == r["scripts"]["still"]["real_still_psnr_min"]
    assert r["still_hf_ratio_max"] == 1.0 and r["walk_back_return_psnr"] == 100.0
    assert r["still_psnr_static_min"] == 100.0 and 0 < r["scripts"]["still"]["static_fraction"] <= 1
    for s in r["scripts"].values():
        assert s["sharpness_windows"] == [1.0] * len(s["windows"]) and s["psnr_frame1"] == 100.0
    assert r["scripts"]["play"]["windows"] == [[1, 8], [9, 16], [17, 24]]
    assert r["fps"] > 0 and r["gif"]["generated"].shape == (24, SIZE, SIZE, 3)
    assert len(r["scripts"]["play"]["structure_windows"]) == 3 and r["structure_max"] < 0.2   # patch sampling's floor
    assert r["action_ratio_min"] == 1.0 and r["actions"]["frames_per_run"] == 6 + 2 * 15
    assert r["action_placement_min"] == pytest.approx(1.0)
    assert r["camera_position_max"] == 0.0 and r["walk_back_return_camera"] == 0.0      # the game's own camera
    assert all(s["camera_apart_frame"] is None and s["camera_rotation_max"] < 1e-4 for s in r["scripts"].values())
    assert all(v["real"] > 0.5 and v["ratio"] == 1.0 and v["placement"] == pytest.approx(1.0)
               for v in r["actions"]["responses"].values())


def test_blurred_frames_lose_sharpness_and_detail(oracle):
    s, _ = oracle
    r = evaluate_live(lambda sc: GameSession(sc, blur=True), game_player(SIZE), [s],
                      LiveConfig(scripts=("play", "still"), frames=24, window=8))
    assert r["sharpness_min"] < 0.5 and all(w < 1 for w in r["scripts"]["play"]["sharpness_windows"])
    assert r["still_hf_ratio_max"] < 1 and r["psnr_mean"] < 40
    assert r["walk_back_return_psnr"] is None and list(r["scripts"]) == ["play", "still"]
    assert r["structure_max"] > 2 * oracle[1]["structure_max"]             # a blur is not the game's structure
    grain = evaluate_live(lambda sc: GameSession(sc, grain=30), game_player(SIZE), [s],
                          LiveConfig(scripts=("still",), frames=24, window=8))
    assert grain["still_hf_ratio_max"] > 1.5 and grain["sharpness_min"] > 1.5     # a checkerboard counts
    assert grain["sharpness_in_band"] is False and r["sharpness_in_band"] is False   # too sharp or too soft
    assert grain["still_psnr_static_min"] == 100.0                                # ... and it stays put


def test_a_camera_that_strays_from_the_game_is_measured_and_named():
    s = scene()
    r = evaluate_live(lambda sc: GameSession(sc, stray=0.15), game_player(SIZE), [s],
                      LiveConfig(scripts=("play", "walk_back"), frames=24, window=8, actions=False))
    play = r["scripts"]["play"]
    assert play["camera_apart_frame"] == 7 and play["per_scene"][0]["camera_apart_frame"] == 7   # 1.05 m
    assert play["camera_position_last"] == pytest.approx(0.15 * 24, rel=1e-4)
    assert play["camera_position_windows"] == pytest.approx([0.15 * 4.5, 0.15 * 12.5, 0.15 * 20.5], rel=1e-4)
    assert play["camera_rotation_max"] < 1e-3                                   # moved, not turned
    back = r["scripts"]["walk_back"]
    frames = len(live_scripts(("walk_back",), 24)[0]["walk_back"].actions)
    assert r["walk_back_return_camera"] == pytest.approx(0.15 * frames, rel=1e-4)
    assert r["camera_position_max"] == pytest.approx(back["camera_position_last"], rel=1e-4)


def test_a_session_without_a_camera_or_a_game_without_one_reports_none():
    s = scene()
    blind = type("Blind", (GameSession,), {"camera_view": None})
    r = evaluate_live(lambda sc: blind(sc), game_player(SIZE), [s], LiveConfig(scripts=("play",), frames=16, window=8,
                                                                                actions=False))
    assert r["camera_position_max"] is None and "camera_position_max" not in r["scripts"]["play"]
    frames_only = lambda sc, rows: game_player(SIZE)(sc, rows)[0]          # noqa: E731
    r = evaluate_live(lambda sc: GameSession(sc), frames_only, [s], LiveConfig(scripts=("play",), frames=16, window=8,
                                                                              actions=False))
    assert r["camera_position_max"] is None and r["psnr_mean"] == 100.0


class DeafSession(GameSession):
    """The real game with the one-shot keys unplugged: it walks, but no action shows."""

    def step(self, row):
        row = np.array(row, np.float32)
        row[4:] = 0
        return super().step(row)


def test_colour_drift_per_scene_counts_another_world_pooled_only_a_shared_drift():
    """Two scenes whose game changes colour over the minute in opposite ways. A session that plays
    the other scene's world (a perfect world that is not this one) drifts per scene but not
    pooled; one that keeps its start colours scores the game's own change per scene; one that
    drifts the same way in every scene drifts pooled as much as per scene."""
    from alaya.evaluation.world_live import compare, summarize
    T, S, W = 40, 16, 10
    ramp = np.linspace(0, 1, T)[:, None, None, None]
    up = (100 + 80 * ramp + np.zeros((T, S, S, 3))).astype(np.uint8)        # brightens by 80 levels
    down = (180 - 80 * ramp + np.zeros((T, S, S, 3))).astype(np.uint8)      # darkens by 80
    script = live_scripts(("play",), frames=T)[0]["play"]
    seconds = np.ones(T)

    def run(gens, reals):
        series = [compare(g, r, r[0], script, W) for g, r in zip(gens, reals)]
        return summarize(series, script, W, seconds)

    other = run([down, up], [up, down])
    still = run([np.repeat(up[:1], T, 0), np.repeat(down[:1], T, 0)], [up, down])
    shared = run([np.clip(up.astype(int) + (40 * ramp).astype(int), 0, 255).astype(np.uint8),
                  np.clip(down.astype(int) + (40 * ramp).astype(int), 0, 255).astype(np.uint8)], [up, down])
    change = math.sqrt(3) * 80 * 0.75 / 255             # first and last windows' means lie 3/4 of the ramp apart
    assert other["game_colour_change"] == pytest.approx(change, rel=0.05)
    assert other["colour_drift"] == pytest.approx(2 * change, rel=0.05) and other["colour_drift_pooled"] < 0.01
    assert still["colour_drift"] == pytest.approx(change, rel=0.05) and still["colour_drift_pooled"] < 0.01
    assert shared["colour_drift_pooled"] == pytest.approx(shared["colour_drift"], rel=0.02)
    assert shared["colour_drift_pooled"] > 0.15
    first = other["per_scene"][0]                      # each scene's own changes, generated and the game's
    assert np.allclose(first["colour_change"], -np.array(first["game_colour_change"]), atol=0.01)


def test_one_shot_actions_that_do_not_show_score_zero(oracle):
    s, _ = oracle
    r = evaluate_live(lambda sc: DeafSession(sc), game_player(SIZE), [s],
                      LiveConfig(scripts=("still",), frames=24, window=8))
    assert r["action_ratio_min"] == 0.0 and r["action_placement_min"] == 0.0
    assert set(r["actions"]["responses"]) == {"jump", "attack", "spell", "summon"}
    sheet = action_sheet(r["action_frames"])
    assert sheet.shape == (3 * SIZE, 4 * 4 * SIZE + 3 * 4, 3)          # 3 rows; 4 actions of 4 frames, gaps
    off = evaluate_live(lambda sc: DeafSession(sc), game_player(SIZE), [s],
                        LiveConfig(scripts=("still",), frames=24, window=8, actions=False))
    assert off["action_ratio_min"] is None and off["actions"] == {}


def test_the_action_runs_differ_from_the_base_only_by_one_action():
    rows, moments = base_script()
    assert len(rows) == 6 + 2 * 15 and moments == {"standing": 9, "walking": 24}
    assert (rows[:, 4:] == 0).all() and rows[moments["standing"], COL["forward"]] == 0
    assert rows[moments["walking"], COL["forward"]] == 1
    one = with_action(rows, "spell", 9)
    assert (one != rows).sum() == 1 and one[9, COL["spell"]] == 1
    rows, moments = base_script(("turn", "attack"))                # no forward column: standing only
    assert list(moments) == ["standing"] and rows.sum() == 0
    assert play_actions(None, None, [], ("forward", "turn")) == {"skipped": "the data has no one-shot action column"}
    a = np.zeros((20, 2, 2, 3), np.uint8)
    b = a.copy()
    b[10] = 120                                                   # frame 11: inside the span from row 9
    assert change(b, a, 9).mean() == 10.0 and change(b, a, 12).mean() == 0.0
    here, there = np.zeros((12, 4, 4)), np.zeros((12, 4, 4))
    here[:, :2], there[:, 2:] = 50, 50
    assert placement(here, here * 0.1) == pytest.approx(1.0) and placement(here, there) == pytest.approx(-1.0)
    assert placement(here, np.zeros_like(here)) == 0.0


def test_psnr_where_counts_only_the_masked_pixels():
    a = np.zeros((2, 4, 4, 3), np.uint8)
    b = a.copy()
    b[:, 0, 0] = 255                                        # one pixel all wrong
    mask = np.ones((2, 4, 4), bool)
    mask[1, 0, 0] = False
    got = psnr_where(a, b, mask)
    assert got[0] == pytest.approx(10 * np.log10(16)) and got[1] == 100.0
    assert np.isnan(psnr_where(a, b, np.zeros((2, 4, 4), bool))).all()


@pytest.fixture(scope="module")
def tiny_weights(tmp_path_factory):
    folder = tiny_world_folder(tmp_path_factory.mktemp("live") / "model", starts=0)
    start = scene().start
    Image.fromarray(start).save(folder / "starts" / f"00_ep{SEED:05d}_{STYLE}.png")
    return folder


def test_start_scenes_read_the_weights_start_frames(tiny_weights):
    (s,) = start_scenes(tiny_weights, SIZE)
    assert (s.name, s.seed, s.style, s.start_psnr) == (f"ep{SEED:05d}_{STYLE}", SEED, STYLE, 100.0)
    (big,) = start_scenes(tiny_weights, 48)                 # another size: the game's own start
    assert big.start.shape == (48, 48, 3) and big.start_psnr is None


def test_cli_live_end_to_end_with_a_tiny_world_model(tiny_weights, tmp_path, capsys):
    from alaya.cli import main
    report = tmp_path / "report"
    assert main(["eval", "world", "--live", "--weights", str(tiny_weights), "--backend", "torch",
                 "--frames", "24", "--window", "8", "--seed", "1", "--json", "--report", str(report)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for key in ("sharpness_min", "colour_drift", "still_psnr_min", "still_psnr_mean", "still_psnr_static_min",
                "still_hf_ratio_max", "walk_back_return_psnr", "psnr_mean", "fps", "skipped_actions", "skipped_scripts", "scenes"):
        assert out[key] is not None, key
    assert out["config"]["size"] == SIZE and out["scenes"][0]["start_psnr"] == 100.0
    for name in ("play", "still", "walk_back"):
        s = out["scripts"][name]
        for key in ("sharpness_windows", "sharpness_min", "psnr_mean", "psnr_windows", "psnr_frame1", "fps",
                    "actions", "per_scene"):
            assert key in s, (name, key)
    assert out["scripts"]["still"]["still_frames"] == 8 and "return_psnr" in out["scripts"]["walk_back"]
    assert json.loads((report / "live.json").read_text())["scripts"] == out["scripts"]
    assert 0 < (report / "live_minute.gif").stat().st_size < 5_000_000
    assert Image.open(report / "live_sharpness.png").size[0] > 0
    assert out["action_ratio_min"] is not None and Image.open(report / "live_actions.png").size[1] == 3 * SIZE
    import imageio.v3 as iio
    gif = iio.imread(report / "live_minute.gif", index=None)
    assert gif.shape[2] >= 2 * 2 * SIZE                      # generated beside real, at least 2x
    assert main(["eval", "world", "--live", "--weights", str(tiny_weights), "--backend", "torch",
                 "--frames", "24", "--window", "8", "--scripts", "still"]) == 0       # the text output
    text = capsys.readouterr().out
    assert "structure_max" in text and "structure distance" in text


def test_cli_live_over_seeds_prints_the_worst_of_each_line(tiny_weights, capsys):
    from alaya.cli import main
    assert main(["eval", "world", "--live", "--weights", str(tiny_weights), "--backend", "torch", "--frames", "24",
                 "--window", "8", "--scripts", "still", "--no-action-check", "--seed", "3", "--seeds", "2",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["config"]["seeds"] == [3, 4] and [r["seed"] for r in out["per_seed"]] == [3, 4]
    assert out["still_psnr_min"] == min(r["still_psnr_min"] for r in out["per_seed"])
    assert out["still_hf_ratio_max"] == max(r["still_hf_ratio_max"] for r in out["per_seed"])
    assert main(["eval", "world", "--live", "--weights", str(tiny_weights), "--backend", "torch", "--frames", "24",
                 "--window", "8", "--scripts", "still", "--no-action-check", "--seeds", "2"]) == 0   # the text output
    text = capsys.readouterr().out
    assert "the worst of seeds 0-1" in text and "seed   1 sharpness_min" in text
    with pytest.raises(SystemExit, match="--seeds"):
        main(["eval", "world", "--live", "--weights", str(tiny_weights), "--seeds", "0"])


def test_over_seeds_takes_each_line_at_its_worst():
    from alaya.evaluation.live_seeds import over_seeds
    a = {"sharpness_min": 0.64, "sharpness_max": 1.2, "sharpness_in_band": True, "colour_drift_pooled": 0.03,
         "still_psnr_min": 45.0, "walk_back_return_psnr": None, "scripts": {"still": 0}, "config": {"seed": 0}}
    b = {"sharpness_min": 0.58, "sharpness_max": 1.7, "sharpness_in_band": False, "colour_drift_pooled": 0.13,
         "still_psnr_min": 47.0, "walk_back_return_psnr": None, "scripts": {"still": 1}, "config": {"seed": 1}}
    out = over_seeds([a, b], [0, 1])
    assert (out["sharpness_min"], out["sharpness_max"], out["colour_drift_pooled"], out["still_psnr_min"]) == \
        (0.58, 1.7, 0.13, 45.0)
    assert out["sharpness_in_band"] is False and out["walk_back_return_psnr"] is None
    assert out["scripts"] == {"still": 0} and out["config"]["seeds"] == [0, 1]          # the first seed's details
    assert [r["sharpness_min"] for r in out["per_seed"]] == [0.64, 0.58]
    with pytest.raises(ValueError, match="one per seed"):
        over_seeds([a], [0, 1])


def test_report_without_a_minute_writes_json_and_plot(oracle, tmp_path):
    _, r = oracle
    paths = write_live_report({**r, "gif": {}, "action_frames": None}, tmp_path)
    assert set(paths) == {"json", "plot"} and not (tmp_path / "live_minute.gif").exists()
    assert json.loads(paths["json"].read_text()) == json.loads(json.dumps(public_json(r)))


def test_edge_orientation_tells_streaks_and_squares_from_a_rendered_scene():
    from alaya.evaluation.frame_stats import ORIENTATION_BINS, orientation_distance, orientation_histogram
    rng = np.random.default_rng(0)
    scene = play_in_game(3, "golden_sunset", np.zeros((3, 8), np.float32), 64)        # the game's own frames
    streaks = np.repeat(rng.integers(0, 256, (4, 64, 1, 3)), 64, axis=2).astype(np.uint8)   # each row one colour
    squares = np.kron(rng.integers(0, 256, (4, 8, 8, 3)), np.ones((1, 8, 8, 1))).astype(np.uint8)
    hist = lambda f: orientation_histogram(torch.from_numpy(f).permute(0, 3, 1, 2).float() / 255).numpy()  # noqa: E731
    h_scene, h_streaks, h_squares = hist(scene), hist(streaks), hist(squares)
    assert h_scene.shape == (4, ORIENTATION_BINS) and np.allclose(h_scene.sum(1), 1)
    assert h_streaks[:, ORIENTATION_BINS // 2].min() > 0.99                    # all edges run one way
    assert h_squares[:, [0, ORIENTATION_BINS // 2]].sum(1).min() > 0.75       # 0 and 90 degrees (corners aside)
    assert orientation_distance(h_scene, h_scene) == 0
    assert orientation_distance(h_streaks, h_scene) > 0.5
    assert orientation_distance(h_squares, h_scene) > 0.2
    flat = hist(np.full((1, 16, 16, 3), 128, np.uint8))
    np.testing.assert_allclose(flat, 1 / ORIENTATION_BINS)                  # a flat frame: uniform, not NaN

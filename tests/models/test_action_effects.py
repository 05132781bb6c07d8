"""The one-shot actions' effect layer: compositing, and fitting it from recordings alone."""

import numpy as np
import pytest
import torch

from alaya.data.actions import ACTION_COLUMNS
from alaya.models.action_effects import ActionEffects, ActionEffectsConfig

SIZE = 32


def _square_layer(frames: int = 4) -> ActionEffects:
    """Attack covers the top-left 8x8 with opaque red in its first two frames; spell, half
    transparent white over the whole view in frame 0."""
    fx = ActionEffects(ActionEffectsConfig(actions=("attack", "spell"), frames=frames, size=SIZE))
    alpha, colour = torch.zeros_like(fx.alpha), torch.zeros_like(fx.colour)
    alpha[0, :2, :, :8, :8] = 1.0
    colour[0, :2, 0, :8, :8] = 1.0
    alpha[1, 0] = 0.5
    colour[1, 0] = 0.5
    fx.set_layers(alpha, colour)
    return fx


def test_composite_draws_each_press_for_its_frames_only():
    fx = _square_layer()
    frame = np.full((SIZE, SIZE, 3), 100, np.uint8)
    assert fx.composite(frame, {}) is frame
    hit = fx.composite(frame, {"attack": 1})
    assert hit[:8, :8].tolist() == [[[255, 0, 0]] * 8] * 8 and (hit[8:] == 100).all()
    assert (fx.composite(frame, {"attack": 2}) == frame).all()          # its layer is empty from frame 2
    assert (fx.composite(frame, {"attack": 4, "summon": 0}) == frame).all()   # past its frames; no layer
    both = fx.composite(frame, {"attack": 0, "spell": 0})
    assert int(both[20, 20, 0]) == round(0.5 * 100 + 127.5) and both[0, 0].tolist() == [255, 0, 0]
    small = fx.composite(np.full((16, 16, 3), 100, np.uint8), {"attack": 0})    # another frame size
    assert small.shape == (16, 16, 3) and small[:4, :4, 0].min() == 255 and small[8:, 8:, 0].max() == 100


def test_bad_configs_and_layers_are_named(tmp_path):
    with pytest.raises(ValueError, match="one-shot actions"):
        ActionEffectsConfig(actions=("forward",))
    with pytest.raises(ValueError, match="frames and size"):
        ActionEffectsConfig(frames=0)
    fx = ActionEffects(ActionEffectsConfig(actions=("spell",), frames=2, size=SIZE))
    with pytest.raises(ValueError, match="expected alpha"):
        fx.set_layers(torch.zeros(1, 3, 1, SIZE, SIZE), torch.zeros(1, 3, 3, SIZE, SIZE))
    with pytest.raises(ValueError, match="finite"):
        fx.set_layers(torch.full_like(fx.alpha, float("nan")), torch.zeros_like(fx.colour))
    fx = _square_layer()
    fx.save_pretrained(tmp_path / "fx")
    back = ActionEffects.from_pretrained(tmp_path / "fx")
    assert back.config == fx.config and torch.equal(back.alpha, fx.alpha) and torch.equal(back.colour, fx.colour)


def test_frames_since_the_latest_press():
    from alaya.train.action_effects import frames_since, presses
    actions = np.zeros((12, 8), np.float32)
    actions[2, ACTION_COLUMNS.index("spell")] = 1
    actions[4, ACTION_COLUMNS.index("attack")] = 1
    actions[9, ACTION_COLUMNS.index("jump")] = 1                     # not a fitted action
    hit = presses(actions, [ACTION_COLUMNS.index("attack"), ACTION_COLUMNS.index("spell")])
    assert hit.tolist() == [-1, -1, 1, -1, 0] + [-1] * 7
    # layer index: action * frames + frames since; a new press replaces the last
    assert frames_since(hit, 2, 3).tolist() == [-1, -1, 3, 4, 0, 1, 2, -1, -1, -1, -1, -1]


def test_a_pitch_anchored_layer_moves_with_the_pitch():
    fx = ActionEffects(ActionEffectsConfig(actions=("attack",), frames=1, size=SIZE, pitch_anchored=(True,),
                                           focal=20.0))
    alpha, colour = torch.zeros_like(fx.alpha), torch.zeros_like(fx.colour)
    alpha[0, 0, :, 14:18, :] = 1.0
    colour[0, 0, :, 14:18, :] = 1.0
    fx.set_layers(alpha, colour)
    grey = np.zeros((SIZE, SIZE, 3), np.uint8)
    rows = lambda img: np.flatnonzero(img[:, 0, 0] == 255).tolist()            # noqa: E731
    assert rows(fx.composite(grey, {"attack": 0})) == [14, 15, 16, 17]
    down = round(20.0 * np.tan(np.radians(10.0)))                              # looking up 10 degrees: 4 rows
    assert rows(fx.composite(grey, {"attack": 0}, pitch_degrees=10.0)) == [14 + down + i for i in range(4)]
    assert rows(fx.composite(grey, {"attack": 0}, pitch_degrees=-10.0)) == [14 - down + i for i in range(4)]
    assert rows(fx.composite(np.zeros((16, 16, 3), np.uint8), {"attack": 0}, 10.0)) == [7 + down // 2 + i for i in range(2)]
    with pytest.raises(ValueError, match="pitch_anchored"):
        ActionEffectsConfig(actions=("attack", "spell"), pitch_anchored=(True,), focal=20.0)


def _recorded(tmp_path, episodes: int = 6, frames: int = 120, seed: int = 0, posed: bool = False):
    """Episodes of random textured views, with an opaque green square in the top-left corner of the
    frame of each spell press and a 50% white square at the bottom right the frame after. ``posed``:
    the episodes have cameras pitched at random, an attack draws a red bar (4 rows) that sinks
    ``focal * tan(pitch)`` rows as the view looks up, and a spell's square stays on the screen."""
    from alaya.data.episodes import EpisodesMeta, write_episode, write_meta
    from alaya.models.view_warp import camera_rotation
    rng = np.random.default_rng(seed)
    meta = EpisodesMeta.new(resolution=(SIZE, SIZE), fps=16.0, source="test", styles={"day": ["a day"]})
    (tmp_path / "episodes").mkdir(parents=True)
    for j in range(episodes):
        rgb = rng.integers(0, 256, (1, frames, SIZE, SIZE, 3)).astype(np.float32)
        rgb = (rgb + np.roll(rgb, 1, 2) + np.roll(rgb, 1, 3)) / 3       # a little spatial correlation
        actions = np.zeros((frames, 8), np.float32)
        spell = ACTION_COLUMNS.index("spell")
        pitch = rng.uniform(-20, 20, frames)
        for t in rng.choice(np.arange(1, frames - 2), frames // 8, replace=False):
            if actions[t - 1:t + 2].any():
                continue
            if posed and rng.random() < 0.5:
                actions[t, ACTION_COLUMNS.index("attack")] = 1
                row = 16 + round(16.0 * np.tan(np.radians(pitch[t])))
                rgb[0, t, row - 2:row + 2, 4:28] = (255, 0, 0)
                continue
            actions[t, spell] = 1
            rgb[0, t, 4:12, 4:12] = (0, 255, 0)
            rgb[0, t + 1, 20:28, 20:28] = 0.5 * rgb[0, t + 1, 20:28, 20:28] + 127.5
        ep = {"rgb": rgb.round().astype(np.uint8), "styles": np.array(["day"]), "actions": actions}
        if posed:
            cv = camera_rotation(torch.zeros(frames), torch.deg2rad(torch.from_numpy(pitch).float()))
            views = np.tile(np.eye(4, dtype=np.float32), (frames, 1, 1))
            views[:, :3, :3] = np.diag([1.0, -1.0, -1.0]) @ cv.numpy()           # OpenCV -> OpenGL axes
            ep.update(world_to_camera=views, K=np.array([[16, 0, 16], [0, 16, 16], [0, 0, 1]], np.float32))
        write_episode(tmp_path / "episodes" / f"e{j}.npz", ep)
        meta.episodes[f"e{j}"] = {"split": "train", "frames": frames, "seed": None}
    write_meta(tmp_path, meta)
    return tmp_path


def test_the_layer_is_fitted_from_recordings_without_counterfactual_frames(tmp_path):
    from alaya.train.action_effects import EffectsFitConfig, fit_action_effects
    fx, report = fit_action_effects(EffectsFitConfig(data=str(_recorded(tmp_path)), frames=3, min_presses=5,
                                                     progress=False))
    assert report["fitted"] == ["spell"] and report["presses"]["attack"] == 0
    a = fx.alpha[0, :, 0]
    assert a[0, 6:10, 6:10].min() > 0.9 and a[1, 22:26, 22:26].mean() == pytest.approx(0.5, abs=0.12)
    inside = torch.zeros(SIZE, SIZE, dtype=torch.bool)
    inside[2:14, 2:14] = True
    assert float(a[0][~inside].max()) < 0.05                       # nothing where nothing was drawn
    assert float(a[2].max()) < 0.05                                # frame 2: no effect
    green = fx.composite(np.full((SIZE, SIZE, 3), 90, np.uint8), {"spell": 0})[8, 8]
    assert green[1] > 230 and green[0] < 25
    with pytest.raises(ValueError, match="no one-shot action"):
        fit_action_effects(EffectsFitConfig(data=str(tmp_path), min_presses=10_000, progress=False))


def test_a_broken_episode_file_is_named(tmp_path):
    from alaya.data.episodes import EpisodeDataset
    from alaya.train.action_effects import EffectsFitConfig, fit_action_effects
    data = _recorded(tmp_path, episodes=2)
    broken = EpisodeDataset(data).path(EpisodeDataset(data).ids()[1])
    broken.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match=broken.name):
        fit_action_effects(EffectsFitConfig(data=str(data), frames=3, min_presses=1, progress=False))


def test_alaya_train_effects_writes_a_layer_a_session_loads(tmp_path, capsys):
    import json

    from alaya.cli import main
    from alaya.runtime.world_folder import load_action_effects
    data = _recorded(tmp_path / "data", episodes=4)
    weights = tmp_path / "world"
    assert main(["train", "effects", "--data", str(data), "--run-dir", str(tmp_path / "run"),
                 "--out", str(weights / "action_effects"), "--frames", "2"]) == 0
    fx = load_action_effects(weights)
    assert fx is not None and fx.config.actions == ("spell",) and fx.config.frames == 2
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["fitted"] == ["spell"] and report["covered"]["spell"][0] > 0
    assert load_action_effects(tmp_path) is None                  # a folder without one: none
    empty = tmp_path / "still"                                     # a recording without presses
    _recorded(empty, episodes=1, frames=4)
    assert main(["train", "effects", "--data", str(empty), "--run-dir", str(tmp_path / "run2"),
                 "--out", str(tmp_path / "none")]) == 2
    assert "no one-shot action" in capsys.readouterr().err and not (tmp_path / "none").exists()


def test_an_effect_placed_by_the_heading_is_fitted_for_a_level_view(tmp_path):
    from alaya.train.action_effects import EffectsFitConfig, fit_action_effects
    data = _recorded(tmp_path, episodes=8, posed=True)
    fx, report = fit_action_effects(EffectsFitConfig(data=str(data), frames=2, min_presses=5, progress=False))
    assert report["fitted"] == ["attack", "spell"] and report["pitch_anchored"] == ["attack"]
    assert fx.config.pitch_anchored == (True, False) and fx.config.focal == pytest.approx(16.0)
    bar = fx.alpha[0, 0, 0]
    assert bar[15:17, 8:24].min() > 0.8 and float(bar[:12].max()) < 0.05 and float(bar[21:].max()) < 0.05
    assert report["opacity"]["level"]["attack"] > 2 * report["opacity"]["screen"]["attack"]
    assert fx.alpha[1, 0, 0, 6:10, 6:10].min() > 0.8                          # the spell stays on the screen
    shown = fx.composite(np.full((SIZE, SIZE, 3), 90, np.uint8), {"attack": 0}, pitch_degrees=20.0)
    row = 16 + round(16.0 * np.tan(np.radians(20.0)))
    assert shown[row - 1:row + 1, 8:24, 0].min() > 200 and shown[:row - 4, :, 0].max() < 120

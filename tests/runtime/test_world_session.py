"""WorldSession: deterministic, action-driven, flat memory, torch and onnxruntime agree."""

import numpy as np
import pytest
import torch

from alaya.codecs.autoencoder import Autoencoder
from alaya.codecs.tiny import TinyDecoder
from alaya.data.actions import ActionError, action_vector
from alaya.models.world import WorldModel, WorldModelConfig
from alaya.runtime.onnx_backend import ONNX_TOLERANCE
from alaya.runtime.world_folder import load_start_frames
from alaya.runtime.world_factory import WorldSessionFactory
from alaya.runtime.world_session import WorldSession

SIZE = 32


@pytest.fixture(scope="module")
def parts():
    torch.manual_seed(0)
    model = WorldModel(WorldModelConfig(widths=(16, 32), emb_dim=32))
    with torch.no_grad():                     # zero-initialised layers (output, modulation): give them weights
        for p in model.parameters():
            if p.abs().sum() == 0:
                p.normal_(0, 0.05)
    return (model,)


@pytest.fixture(scope="module")
def encoder():
    from alaya.text import PromptEncoder
    return PromptEncoder()


@pytest.fixture(scope="module")
def start():
    y, x = np.mgrid[0:SIZE, 0:SIZE]
    return np.stack([x * 8, y * 8, (x + y) * 4], -1).astype(np.uint8)


def play(session, start, rows):
    session.reset(start, "a golden sunset")
    return np.stack([session.step(r) for r in rows])


ROWS = [action_vector(1.0, 0.0, 0.5), action_vector(act="spell"), action_vector(0.0, -1.0, 0.0)] * 3


def test_same_start_seed_and_actions_give_the_same_frames(parts, start, encoder):
    a = play(WorldSession(*parts, prompt_encoder=encoder, size=SIZE, seed=3), start, ROWS)
    b = play(WorldSession(*parts, prompt_encoder=encoder, size=SIZE, seed=3), start, ROWS)
    assert a.shape == (len(ROWS), SIZE, SIZE, 3) and a.dtype == np.uint8
    assert np.array_equal(a, b)
    s = WorldSession(*parts, prompt_encoder=encoder, size=SIZE, seed=3)
    play(s, start, ROWS[:4])                        # a reset forgets everything before it
    assert np.array_equal(play(s, start, ROWS), a)


def test_actions_change_the_frames(parts, start, encoder):
    moved = play(WorldSession(*parts, prompt_encoder=encoder, size=SIZE), start, ROWS)
    still = play(WorldSession(*parts, prompt_encoder=encoder, size=SIZE), start, [action_vector()] * len(ROWS))
    assert not np.array_equal(moved, still)


def test_state_has_a_fixed_size(parts, start, encoder):
    s = WorldSession(*parts, prompt_encoder=encoder, size=SIZE)
    s.reset(start)
    shapes = None
    for k in range(40):
        s.step(ROWS[k % len(ROWS)])
        now = [tuple(s.context.shape), tuple(s.valid.shape), tuple(s.actions.shape),
               None if s.decoder_state is None else tuple(s.decoder_state.shape)]
        assert shapes is None or now == shapes
        shapes = now


def test_onnx_matches_torch(parts, start, encoder):
    t = WorldSession(*parts, prompt_encoder=encoder, size=SIZE, backend="torch")
    o = WorldSession(*parts, prompt_encoder=encoder, size=SIZE, backend="onnx")
    for s in (t, o):
        s.reset(start, "a golden sunset")
    assert o.backend.sample_steps == o.steps                 # the steps run as one graph
    for row in ROWS:
        zt, zo = t.step_latent(row), o.step_latent(row)
        assert (zt - zo).abs().max() < ONNX_TOLERANCE


def test_a_lone_step_runs_on_the_solo_graphs_and_steps_side_by_side_share(parts, start, encoder):
    """A factory with ``solo_threads`` steps a session alone on the graphs with a thread per core
    and, while another session's step runs, on the shared one-thread graphs; both give the
    frames of a factory without solo graphs."""
    factory = WorldSessionFactory(*parts, size=SIZE, backend="onnx", prompt_encoder=encoder, threads=1,
                                  solo_threads=2)
    plain = WorldSessionFactory(*parts, size=SIZE, backend="onnx", prompt_encoder=encoder, threads=1)
    assert factory.solo_backend is not None and plain.solo_backend is None
    used = []
    for name, b in (("solo", factory.solo_backend), ("shared", factory.backend)):
        b.integrate = (lambda f, n: lambda *a: (used.append(n), f(*a))[1])(b.integrate, name)
    a, b, ref = factory.new("a golden sunset"), factory.new("a golden sunset"), plain.new("a golden sunset")
    for s in (a, b, ref):
        s.reset(start)
    za = a.step_latent(ROWS[0])
    assert used == ["solo"]
    with b.traffic.step(b.backend, b.solo_backend) as taken:        # b is mid-step: a shares
        assert taken is b.solo_backend
        zb = a.step_latent(ROWS[1])
    assert used == ["solo", "shared"]
    a.step(ROWS[2])
    assert used == ["solo", "shared", "solo"]
    with pytest.raises(ActionError):                                 # a refused row leaves no step counted
        a.step(np.full(3, np.nan, np.float32))
    a.step(ROWS[3])
    assert used == ["solo", "shared", "solo", "solo"]
    zr = ref.step_latent(ROWS[0]), ref.step_latent(ROWS[1])
    assert (za - zr[0]).abs().max() < ONNX_TOLERANCE and (zb - zr[1]).abs().max() < ONNX_TOLERANCE


def test_bad_input_is_refused_and_the_session_goes_on(parts, start, encoder):
    s = WorldSession(*parts, prompt_encoder=encoder, size=SIZE)
    with pytest.raises(RuntimeError, match="reset"):
        s.step(action_vector())
    with pytest.raises(ValueError, match="start frame"):
        s.reset(start.astype(np.float32))
    with pytest.raises(ValueError, match="start frame"):
        s.reset(start[:16])
    s.reset(start)
    with pytest.raises(ActionError, match="forward"):
        s.step([2.0, 0, 0, 0, 0, 0, 0, 0])
    with pytest.raises(ActionError, match="shape"):
        s.step(np.zeros((2, 8)))
    assert s.step(action_vector()).shape == (SIZE, SIZE, 3)


def test_a_model_in_the_autoencoders_latent_space_runs_with_its_codecs(start, encoder):
    torch.manual_seed(0)
    model = WorldModel(WorldModelConfig(codec="autoencoder", latent_channels=32, widths=(16, 32), emb_dim=32))
    with pytest.raises(ValueError, match="autoencoder"):
        WorldSession(model, prompt_encoder=encoder, size=SIZE)
    s = WorldSession(model, Autoencoder.from_pretrained("weights/autoencoder"),
                     TinyDecoder.from_pretrained("weights/tiny_decoder"), prompt_encoder=encoder, size=SIZE)
    s.reset(start)
    assert s.context.shape[-1] == SIZE // 8 and s.step(action_vector()).shape == (SIZE, SIZE, 3)


def test_start_frames_are_checked(tmp_path):
    with pytest.raises(FileNotFoundError, match="start frames"):
        load_start_frames(tmp_path)
    from PIL import Image
    (tmp_path / "starts").mkdir()
    Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(tmp_path / "starts" / "a.png")
    assert load_start_frames(tmp_path, 16)[0].shape == (16, 16, 3)
    with pytest.raises(ValueError, match="expected 32x32"):
        load_start_frames(tmp_path, 32)


def test_stabilizer_removes_grid_periodic_drift_and_keeps_real_change():
    from alaya.codecs.patch import PatchCodec
    from alaya.codecs.patch import stabilize_patch_latent
    codec = PatchCodec().eval()
    prev = codec.encode(torch.rand(1, 3, 32, 32) * 0.5 + 0.25)
    brighter = codec.encode(codec.decode(prev) + 0.1)                # a real change: all pixels brighter
    assert torch.allclose(stabilize_patch_latent(brighter, prev), brighter, atol=1e-5)
    grid = torch.zeros(1, 3, 32, 32)
    grid[:, :, ::4, ::4] = 0.2                                        # a pattern locked to the 4x4 grid
    drifted = codec.encode(codec.decode(prev) + grid)
    fixed = codec.decode(stabilize_patch_latent(drifted, prev))
    assert (fixed - codec.decode(prev)).abs().max() < (grid.max() / 10)
    assert stabilize_patch_latent(prev + 5, prev).max() <= 1.0        # the codec's range holds


def test_a_view_warp_model_turns_its_context_and_backends_agree(parts, start, encoder):
    """With view_warp a turn rotates the context before the network sees it (a turning and a
    still session differ even where a plain model's would not), in torch and onnxruntime alike."""
    warp = WorldModel(WorldModelConfig(widths=(16, 32), emb_dim=32, view_warp=True))
    warp.load_state_dict(parts[0].state_dict())
    turn = [action_vector(turn=1.0)] * 4
    t = play(WorldSession(warp, prompt_encoder=encoder, size=SIZE), start, turn)
    o = play(WorldSession(warp, prompt_encoder=encoder, size=SIZE, backend="onnx"), start, turn)
    assert np.abs(t.astype(int) - o.astype(int)).max() <= 1
    plain = play(WorldSession(parts[0], prompt_encoder=encoder, size=SIZE), start, turn)
    assert np.abs(t.astype(int) - plain.astype(int)).mean() > 1.0


def test_pitch_stops_at_the_games_limit_as_in_the_game(parts, start, encoder):
    """Looking up for longer than the game allows: the session passes on only the part of each
    pitch action that takes effect, so the model's view never pitches past the limit."""
    s = WorldSession(*parts, prompt_encoder=encoder, size=SIZE)
    c = parts[0].config
    s.reset(start, "a golden sunset")
    up = action_vector(pitch=1.0)
    frames_to_limit = (c.max_pitch_degrees - c.start_pitch_degrees) / c.pitch_degrees
    for _ in range(int(frames_to_limit) + 3):
        s.step(up)
    assert s.pitch == pytest.approx(c.max_pitch_degrees)
    assert float(s.actions[0, 0, 3]) == 0.0 and float(s.actions[0, 0, 0]) == 0.0   # at the limit: no pitch left
    s.step(action_vector(pitch=-1.0))                                          # looking down works again
    assert s.pitch == pytest.approx(c.max_pitch_degrees - c.pitch_degrees)
    s.reset(start)
    assert s.pitch == pytest.approx(c.start_pitch_degrees)


def test_a_ground_warp_model_walks_its_context_from_the_start_pitch(parts, start, encoder):
    """With ground_warp a step forward moves the context (a plain view-warp model only turns it),
    from the pitch ``reset`` was given; torch and onnxruntime agree; a pitch past the game's
    limit is refused."""
    cfg = WorldModelConfig(widths=(16, 32), emb_dim=32, view_warp=True, ground_warp=True)
    ground, rotate = WorldModel(cfg), WorldModel(WorldModelConfig(widths=(16, 32), emb_dim=32, view_warp=True))
    ground.load_state_dict(parts[0].state_dict())
    rotate.load_state_dict(parts[0].state_dict())
    walk = [action_vector(forward=1.0)] * 4
    t = play(WorldSession(ground, prompt_encoder=encoder, size=SIZE), start, walk)
    o = play(WorldSession(ground, prompt_encoder=encoder, size=SIZE, backend="onnx"), start, walk)
    assert np.abs(t.astype(int) - o.astype(int)).max() <= 1
    assert np.abs(t.astype(int) - play(WorldSession(rotate, prompt_encoder=encoder, size=SIZE), start, walk)).mean() > 1.0
    s = WorldSession(ground, prompt_encoder=encoder, size=SIZE)
    s.reset(start, "a golden sunset", pitch=-30.0)
    down = np.stack([s.step(r) for r in walk])
    assert s.pitch == -30.0 and np.abs(down.astype(int) - t.astype(int)).mean() > 0.5   # the floor moves differently
    for bad in (55.0, float("nan"), "up"):
        with pytest.raises(ValueError, match="pitch"):
            s.reset(start, pitch=bad)


def test_an_anchor_warp_session_tracks_its_pose_and_sees_the_start_from_it(parts, start, encoder):
    """With anchor_warp the session dead-reckons its pose from the rows it plays (turn, then walk
    along the new heading), the anchor it feeds the network changes once it has walked, and
    torch and onnxruntime still agree."""
    import math
    cfg = WorldModelConfig(widths=(16, 32), emb_dim=32, view_warp=True, ground_warp=True, anchor_warp=True)
    anchored, ground = WorldModel(cfg), WorldModel(WorldModelConfig(widths=(16, 32), emb_dim=32, view_warp=True,
                                                                     ground_warp=True))
    anchored.load_state_dict(parts[0].state_dict())
    ground.load_state_dict(parts[0].state_dict())
    still = [action_vector()] * 3
    s = WorldSession(anchored, prompt_encoder=encoder, size=SIZE)
    same = play(s, start, still).astype(int) - play(WorldSession(ground, prompt_encoder=encoder, size=SIZE), start, still)
    assert np.abs(same).max() <= 1
    assert torch.equal(s.pose, torch.zeros(1, 3))             # standing still: the anchor is the start frame
    walk = [action_vector(turn=1.0), action_vector(forward=1.0), action_vector(forward=1.0)]
    t = play(s, start, walk)
    yaw = math.radians(cfg.turn_degrees)
    assert torch.allclose(s.pose, torch.tensor([[0.2 * math.cos(yaw), 0.2 * math.sin(yaw), yaw]]), atol=1e-6)
    assert np.abs(t.astype(int) - play(WorldSession(ground, prompt_encoder=encoder, size=SIZE), start, walk)).mean() > 0.1
    o = play(WorldSession(anchored, prompt_encoder=encoder, size=SIZE, backend="onnx"), start, walk)
    assert np.abs(t.astype(int) - o.astype(int)).max() <= 1


def test_a_model_with_the_frame_position_input_exports_and_agrees(start, encoder):
    torch.manual_seed(0)
    model = WorldModel(WorldModelConfig(widths=(16, 32), emb_dim=32, position_features=2))
    with torch.no_grad():
        for p in model.parameters():
            if p.abs().sum() == 0:
                p.normal_(0, 0.05)
    t = WorldSession(model, prompt_encoder=encoder, size=SIZE, backend="torch")
    o = WorldSession(model, prompt_encoder=encoder, size=SIZE, backend="onnx")
    for s in (t, o):
        s.reset(start, "a golden sunset")
    for row in ROWS:
        assert (t.step_latent(row) - o.step_latent(row)).abs().max() < ONNX_TOLERANCE


def test_action_effects_draw_over_the_shown_frames_only(parts, start, encoder):
    """A press shows its layer for the layer's frames; what the session keeps (context, memory)
    is the frame without it, so the frames after the effect are the plain session's."""
    from alaya.models.action_effects import ActionEffects, ActionEffectsConfig
    fx = ActionEffects(ActionEffectsConfig(actions=("attack",), frames=2, size=SIZE))
    alpha, colour = torch.zeros_like(fx.alpha), torch.zeros_like(fx.colour)
    alpha[0, :, :, :8, :8] = 1.0
    colour[0, :, 0, :8, :8] = 1.0
    fx.set_layers(alpha, colour)
    rows = [action_vector(1.0), action_vector(act="attack"), action_vector(), action_vector(), action_vector(0.5)]
    plain = play(WorldSession(*parts, prompt_encoder=encoder, size=SIZE), start, rows)
    shown = play(WorldSession(*parts, prompt_encoder=encoder, size=SIZE, action_effects=fx), start, rows)
    red = np.array([255, 0, 0], np.uint8)
    assert np.array_equal(shown[0], plain[0])
    for k in (1, 2):                                              # the press's frame and the next
        assert (shown[k, :8, :8] == red).all()
        assert np.array_equal(shown[k, 8:], plain[k, 8:])
    assert np.array_equal(shown[3:], plain[3:])

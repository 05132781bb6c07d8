"""RenderSession: chunking invariance, prompt switches between frames, reset, flat state, errors."""

import functools

import numpy as np
import pytest
import torch

from alaya.data.dataset import ClipDataset
from alaya.data.contract import GBUFFER_KEYS
from alaya.runtime import RenderSession
from alaya.runtime.backends import make_backend
from tiny_models import tiny_flash_modules


def session(backend="torch", onnx_folder=None, guided=False, **kw):
    student, enc, dec = tiny_flash_modules(guided)
    return RenderSession(make_backend(backend, student, enc, dec, folder=onnx_folder), prompt="a clear sunny noon",
                         **kw)


@pytest.fixture(scope="module")
def frames(tiny_dataset):
    ds = ClipDataset(tiny_dataset)
    out = []
    for cid in ds.ids()[:2]:
        clip = ds.load(cid)
        out += [{k: clip[k][t] for k in GBUFFER_KEYS} for t in range(clip["depth"].shape[0])]
    return out


def test_output_does_not_depend_on_chunking(frames):
    whole = session().run(frames)
    s = session()
    parts = np.concatenate([s.run(frames[:1]), s.run(frames[1:4]), s.run(frames[4:])])
    assert whole.shape == (len(frames), 32, 32, 3) and whole.dtype == np.uint8
    assert np.array_equal(whole, parts)


@pytest.mark.parametrize("noise", ["frame", "fixed"])
def test_noise_modes_are_chunking_invariant_and_differ(frames, noise):
    whole = session(noise=noise).run(frames[:5])
    s = session(noise=noise)
    assert np.array_equal(whole, np.concatenate([s.run(frames[:2]), s.run(frames[2:5])]))
    starts = []                                    # the noise each frame starts from (t = 1)
    r = session(noise=noise)
    step = r.backend.step
    r.backend.step = lambda z, rr, t, *a: (starts.append(z.clone()) if float(t) == 1.0 else None) or step(z, rr, t, *a)
    r.run(frames[:3])
    assert len(starts) == 3
    assert torch.equal(starts[0], starts[2]) == (noise == "fixed")
    with pytest.raises(ValueError, match="noise"):
        session(noise="bogus")


def test_fixed_noise_follows_the_student_config(frames):
    student, enc, dec = tiny_flash_modules()
    student.config.noise = "fixed"
    backend = make_backend("torch", student, enc, dec)
    assert RenderSession(backend).noise == "fixed"
    assert RenderSession(backend, noise="frame").noise == "frame"


def test_context_and_reset(frames):
    s = session()
    first = s.step(frames[0])
    s.step(frames[1])
    s.reset()
    assert np.array_equal(s.step(frames[0]), first)
    z_with_past = session().step_latent(frames[1])
    s2 = session()
    s2.step_latent(frames[0])
    assert not torch.equal(s2.step_latent(frames[1]), z_with_past)   # the past is used


def test_set_prompt_takes_effect_on_the_next_frame(frames):
    a, b = session(), session()
    out_a = a.run(frames[:2])
    b.step(frames[0])
    b.set_prompt("a moonlit night")
    assert b.frame_index == 1                          # nothing restarted
    assert not np.array_equal(b.step(frames[1]), out_a[1])


def test_state_stays_the_same_size(frames):
    s = session()
    s.run(frames)
    shape = tuple(s.context.shape)
    s.run(frames * 3)
    assert tuple(s.context.shape) == shape == (1, 2, 4, 4, 4)


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_bad_frames_are_named_and_leave_the_stream_as_it_was(frames, backend):
    """Shapes are checked before any work; values by the stream graph (onnx) or the same function
    in torch; either way the key is named and the stream's state is untouched, so the next good
    frame continues the stream as if the bad one had never come."""
    s, ref = session(backend=backend), session(backend=backend)
    expected = ref.run(frames[:3])
    s.run(frames[:1])
    with pytest.raises(KeyError, match="motion"):
        s.step({k: v for k, v in frames[1].items() if k != "motion"})
    for key, index in (("normal", (0, 0, 0)), ("depth", (3, 5)), ("motion", (7, 7, 1))):
        bad = dict(frames[1], **{key: frames[1][key].astype(np.float32)})
        bad[key][index] = np.nan if key != "normal" else np.inf
        with pytest.raises(ValueError, match=key):
            s.step(bad)
    with pytest.raises(ValueError, match="multiples of 16"):
        s.step({k: v[:24, :24] for k, v in frames[1].items()})
    with pytest.raises(ValueError, match="albedo"):
        s.step(dict(frames[1], albedo=frames[1]["albedo"][..., :2]))
    huge = dict(frames[1], depth=frames[1]["depth"].astype(np.float64))
    huge["depth"][2, 2] = 1e300                                       # finite in float64, not in float32
    with pytest.raises(ValueError, match="depth"):
        s.step(huge)
    bigger = {k: np.concatenate([v, v], 0) for k, v in frames[1].items()}
    bigger = {k: np.concatenate([v, v], 1) for k, v in bigger.items()}  # a new size...
    bigger["motion"] = bigger["motion"].astype(np.float32)
    bigger["motion"][0, 0, 0] = np.nan                                # ...that is bad: the stream stays
    with pytest.raises(ValueError, match="motion"):
        s.step(bigger)
    assert s.frame_index == 1
    assert np.array_equal(s.run(frames[1:3]), expected[1:])


def test_stream_and_context_graphs_compute_the_torch_functions(frames, tmp_path):
    """The ONNX stream graph (G-buffer conversion, camera, latent flow, G-buffer encoder and the
    frame's own features in one run) and context graph (the warp and the context's features)
    against ``gbuffer_condition`` / ``context_condition`` in torch around the torch frame network,
    with a non-zero context that the motion moves; and the two parts add up to ``condition``."""
    from alaya.runtime.onnx_backend import ONNX_TOLERANCE, OnnxBackend
    from alaya.models.student import latent_flow, warp_context
    s = session()
    student, enc, dec = tiny_flash_modules()
    backend, in_torch = OnnxBackend.from_modules(student, enc, dec, 32, tmp_path), s.backend
    assert backend.has_stream
    torch.manual_seed(0)
    context = torch.randn(1, s.student.config.context, s.student.config.latent_channels, 4, 4)
    valid = torch.ones(1, s.student.config.context, 1, 4, 4)
    frame = dict(frames[2], motion=np.full((32, 32, 2), 6.0, np.float32))   # everything moves off by 6 pixels
    inputs = s._stream_inputs(frame, 32, 32)
    ours, theirs = backend.prepare(inputs), in_torch.prepare(inputs)
    assert ours[2] and theirs[2]
    for a, b in zip(ours[:2], theirs[:2]):
        assert torch.allclose(a, b, atol=ONNX_TOLERANCE)
    ours = backend.attach_context(*ours[:2], context, valid)
    theirs = in_torch.attach_context(*theirs[:2], context, valid)
    for a, b in zip(ours, theirs):
        assert torch.allclose(a, b, atol=ONNX_TOLERANCE)
    assert 0 < ours[2].mean() < 1                   # the warp moved part of the context out of view
    assert not torch.allclose(ours[1], context)
    # the split is exact: the frame's features are the student's whole condition of the warped context
    warped, warped_valid = warp_context(context, valid, latent_flow(inputs["motion"], 8))
    g, whole = in_torch.frame(_gbuffer_x(inputs), warped, warped_valid)
    assert torch.allclose(theirs[0], whole, atol=1e-5)


def _gbuffer_x(inputs):
    from alaya.codecs.gbuffer import gbuffer_channels
    return gbuffer_channels(*(inputs[k] for k in ("albedo", "normal", "depth", "roughness", "metallic")))


def test_onnx_backend_matches_torch(frames, tmp_path):
    from alaya.runtime.onnx_backend import ONNX_TOLERANCE
    t_sess, o_sess = session(), session(backend="onnx", onnx_folder=str(tmp_path))
    for f in frames[:4]:
        zt, zo = t_sess.step_latent(f), o_sess.step_latent(f)
        assert torch.allclose(zt, zo, atol=ONNX_TOLERANCE)
    assert sorted(p.name for p in (tmp_path / "32").iterdir()) == ["context.onnx", "decode.onnx", "frame.onnx",
                                                                  "modulation.onnx", "sample.onnx", "step.onnx",
                                                                  "stream.onnx"]
    a, b = session().run(frames[:4]), session(backend="onnx").run(frames[:4])
    assert np.abs(a.astype(int) - b.astype(int)).max() <= 1
    with pytest.raises(ValueError, match="backend"):
        session(backend="tensorrt")


def test_onnx_exports_without_a_folder_leave_nothing_behind(frames, tmp_path, monkeypatch):
    """With the graph cache off, graphs exported for a session without ``onnx_folder`` go to a
    temporary folder that is removed once onnxruntime has loaded them (every session used to
    leave one in /tmp)."""
    import tempfile
    monkeypatch.setenv("ALAYA_ONNX_CACHE", "off")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    s = session(backend="onnx")
    s.run(frames[:2])
    graphs = s.backend.for_frame(32, 32)                 # the graphs the first frame exported
    assert graphs.has_stream and graphs.sample_steps == 4
    assert list(tmp_path.iterdir()) == []


class _CountingSession:
    def __init__(self, inner):
        self.inner, self.calls = inner, 0

    def run(self, *args):
        self.calls += 1
        return self.inner.run(*args)


def test_onnx_modulations_are_computed_once_per_prompt(frames):
    """The sample graph reads the prompt's modulations (each adaptive norm's gain and shift for
    each step), computed by the modulation graph once per prompt and kept for the backend's
    MOD_CACHE most recent prompts; prompt switches mid-stream still follow torch."""
    from alaya.runtime.onnx_backend import ONNX_TOLERANCE
    t_sess, o_sess = session(), session(backend="onnx")
    backend = o_sess.backend.for_frame(32, 32)            # built at the first frame otherwise
    backend.MOD_CACHE = 2
    counter = backend.sessions["modulation"] = _CountingSession(backend.sessions["modulation"])
    prompts = ["a clear sunny noon", "a clear sunny noon", "moonlit night", "toon shading", "a clear sunny noon",
               "toon shading"]
    misses = [1, 1, 2, 3, 4, 4]                # the fifth frame's prompt was evicted by the fourth's
    for f, prompt, calls in zip(frames, prompts, misses):
        t_sess.set_prompt(prompt)
        o_sess.set_prompt(prompt)
        assert torch.allclose(t_sess.step_latent(f), o_sess.step_latent(f), atol=ONNX_TOLERANCE), prompt
        assert counter.calls == calls, prompt
    assert len(backend._mods) == 2
    mods = backend.modulations(t_sess.text)
    channels = sum(n.norm.num_channels for n in t_sess.student.adaptive_norms())
    assert mods.shape == (1, 2 * 4 * channels, 1, 1)         # gain and shift of every norm, for 4 steps


def test_factory_sessions_share_weights_but_not_state(frames):
    from alaya.runtime import SessionFactory
    ref = session()
    factory = SessionFactory(*tiny_flash_modules(), size=32, backend="torch")
    a, b = factory.new("a clear sunny noon"), factory.new("a clear sunny noon")
    out_a = a.run(frames[:3])
    assert np.array_equal(out_a, ref.run(frames[:3]))
    assert np.array_equal(b.run(frames[:3]), out_a)          # b's stream is its own
    with pytest.raises(ValueError, match="32x32"):
        factory.new().step({k: np.zeros((64, 64) + v.shape[2:], v.dtype) for k, v in frames[0].items()})


def _view_session(channels=8, pixel=0, **kw):
    import dataclasses

    from alaya.models.student import Student
    student, enc, dec = tiny_flash_modules()
    torch.manual_seed(1)
    viewer = Student(dataclasses.replace(student.config, view_channels=channels, view_pixel=pixel))
    viewer.load_state_dict(student.state_dict(), strict=False)
    with torch.no_grad():
        for p in [*viewer.view.parameters(), *(viewer.view_pixel.parameters() if pixel else ())]:
            p.normal_(0, 0.05)
    backend = make_backend(kw.pop("backend", "torch"), viewer.eval(), enc, dec, folder=kw.pop("onnx_folder", None))
    return RenderSession(backend, prompt="a clear sunny noon", **kw)


@pytest.mark.parametrize("channels, pixel", [(8, 0), (17, 4)])
def test_view_student_reads_the_camera_from_frames_or_the_session(frames, tiny_dataset, tmp_path, channels, pixel):
    """Camera only (8 channels) or camera + raw G-buffer with per-pixel features (17, 4)."""
    view_session = functools.partial(_view_session, channels, pixel)
    ds = ClipDataset(tiny_dataset)
    clip = ds.load(ds.ids()[0])
    with_camera = [{**{k: clip[k][t] for k in GBUFFER_KEYS}, "world_to_camera": clip["world_to_camera"][t],
                    "K": clip["K"]} for t in range(clip["depth"].shape[0])]
    seen = view_session().run(with_camera)
    no_k = [{k: v for k, v in f.items() if k != "K"} for f in with_camera]
    assert np.array_equal(view_session(intrinsics=clip["K"]).run(no_k), seen)
    unknown = view_session().run(no_k)                       # no K anywhere: camera unknown
    assert not np.array_equal(unknown, seen)
    s = view_session()                                       # still chunking-invariant
    assert np.array_equal(np.concatenate([s.run(with_camera[:1]), s.run(with_camera[1:])]), seen)
    from alaya.runtime.onnx_backend import ONNX_TOLERANCE
    t_sess, o_sess = view_session(), view_session(backend="onnx", onnx_folder=str(tmp_path))
    for f in with_camera:
        assert torch.allclose(t_sess.step_latent(f), o_sess.step_latent(f), atol=ONNX_TOLERANCE)


def test_onnx_sessions_with_other_step_counts_loop_over_the_step_graph(frames):
    from alaya.runtime.onnx_backend import ONNX_TOLERANCE
    t_sess, o_sess = session(steps=2), session(backend="onnx", steps=2)
    for f in frames[:3]:
        assert torch.allclose(t_sess.step_latent(f), o_sess.step_latent(f), atol=ONNX_TOLERANCE)
    assert o_sess.backend.for_frame(32, 32).sample_steps == 4 != o_sess.steps   # the unrolled graph is for 4


def test_one_make_backend_checks_names_ranges_and_sizes_for_sessions_and_factories():
    """``make_backend`` is where a backend is built and checked, for a session's own backend
    (exported per frame size met) and a factory's shared one (built for one size)."""
    from alaya.runtime import SessionFactory
    from alaya.runtime.backends import OnnxBackends, TorchBackend
    from alaya.runtime.onnx_backend import OnnxBackend
    student, enc, dec = tiny_flash_modules()
    with pytest.raises(ValueError, match="backend must be one of"):
        make_backend("tensorrt", student, enc, dec)
    with pytest.raises(ValueError, match="backend must be one of"):
        SessionFactory(student, enc, dec, size=32, backend="tensorrt")
    with pytest.raises(ValueError, match="int8_ranges"):
        make_backend("onnx-int8", student, enc, dec, 32)
    with pytest.raises(ValueError, match="int8_ranges"):
        SessionFactory(student, enc, dec, size=32, backend="onnx-int8")
    with pytest.raises(ValueError, match="multiple of 16"):
        SessionFactory(student, enc, dec, size=40, backend="torch")
    assert isinstance(make_backend("torch", student, enc, dec), TorchBackend)
    per_size = make_backend("onnx", student, enc, dec)
    assert isinstance(per_size, OnnxBackends)
    graphs = per_size.for_frame(32, 32)
    assert isinstance(graphs, OnnxBackend) and graphs.size == 32 and per_size.for_frame(32, 32) is graphs
    assert per_size.for_frame(32, 48) is per_size.torch                     # not square: torch
    shared = make_backend("torch", student, enc, dec, 32)
    with pytest.raises(ValueError, match="built for 32x32"):
        shared.for_frame(64, 64)


def test_a_session_is_handed_to_a_pipeline_through_its_public_method(frames):
    s = session()
    marker = object()
    s.set_pipeline(marker)
    with pytest.raises(RuntimeError, match="already driven"):
        s.set_pipeline(object())
    with pytest.raises(RuntimeError, match="driven by a StreamPipeline"):
        s.step(frames[0])
    s.set_pipeline(None)
    assert s.pipeline is None and s.step(frames[0]).shape == (32, 32, 3)


def test_a_guided_decoder_reads_each_frames_own_g_buffer_in_every_backend(frames, tmp_path):
    """The session hands the decoder the frame's ``decoder_guide`` (the same pixels as decoding
    the stream's latents by hand), the ONNX decode graph takes it as an input, and a frame
    without a camera still renders (its camera channels zero)."""
    from alaya.codecs.gbuffer import decoder_guide
    s = session(guided=True)
    out = s.run(frames[:3])
    latents = session(guided=True)
    dec = s.backend.nets["decode"].decoder
    state, manual = None, []
    for f in frames[:3]:
        z = latents.step_latent(f)
        img, state = dec(z, state, decoder_guide({k: np.asarray(f[k])[None] for k in f}))
        manual.append((img[0].permute(1, 2, 0) * 255).round().to(torch.uint8).numpy())
    assert np.array_equal(out, np.stack(manual))
    onnx = session(backend="onnx", onnx_folder=str(tmp_path), guided=True)
    assert np.abs(onnx.run(frames[:3]).astype(int) - out.astype(int)).max() <= 1
    assert "guide" in onnx.backend.for_frame(32, 32).inputs["decode"]
    blind = [{k: v for k, v in f.items() if k not in ("K", "world_to_camera")} for f in frames[:3]]
    assert session(guided=True).run(blind).shape == out.shape
    with pytest.raises(ValueError, match="guide"):
        onnx.backend.for_frame(32, 32).decode(torch.zeros(1, 4, 4, 4), None)

"""int8 student steps: calibration, quantization, the onnx-int8 backend, and bad ranges."""

import json

import numpy as np
import pytest
import torch

from alaya.data.contract import GBUFFER_KEYS
from alaya.data.dataset import ClipDataset
from alaya.runtime import RenderSession
from alaya.runtime.backends import make_backend
from alaya.engine.styles import STYLES
from alaya.renderers.calibrate import calibrate
from alaya.runtime.int8 import RANGES_FILE, load_ranges, quantize_step
from tiny_models import tiny_flash_modules


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tiny_dataset):
    """A tiny student, its codecs and int8 ranges calibrated on the tiny dataset."""
    root = tmp_path_factory.mktemp("int8")
    student, enc, dec = tiny_flash_modules()
    student.save_pretrained(root / "student")
    enc.save_pretrained(root / "enc")
    dec.save_pretrained(root / "dec")
    path = calibrate(root / "student", tiny_dataset, [s.phrasings for s in STYLES.values()], "train", clips=2,
                     frames=3, gbuffer_encoder=root / "enc", decoder=root / "dec", progress=False)
    assert path == root / "student" / RANGES_FILE
    return root


@pytest.fixture(scope="module")
def frames(tiny_dataset):
    ds = ClipDataset(tiny_dataset)
    out = []
    for cid in ds.ids("test") + ds.ids("val"):
        clip = ds.load(cid)
        out += [{k: clip[k][t] for k in GBUFFER_KEYS} for t in range(clip["depth"].shape[0])]
    return out


def _session(backend, ranges=None, folder=None):
    student, enc, dec = tiny_flash_modules()
    return RenderSession(make_backend(backend, student, enc, dec, folder=folder, int8_ranges=ranges),
                         prompt="a clear sunny noon")


def test_calibration_records_every_quantized_tensor(folders):
    meta = json.loads((folders / "student" / RANGES_FILE).read_text())
    assert meta["calibration"]["frames_recorded"] == 2 * 3 * 7          # clips x frames x styles
    assert meta["graph"] == "sample"
    assert meta["method"] == "percentile" and meta["percentile"] == 99.99      # the default
    ranges = load_ranges(folders / "student")
    assert all(lo <= hi for lo, hi in ranges.values())
    assert any(lo < 0 < hi for lo, hi in ranges.values())              # real activations, not a constant


def test_int8_session_follows_fp32_and_streams_the_same_in_chunks(folders, frames, tmp_path):
    import onnx
    ranges = load_ranges(folders / "student")
    fp32, int8 = _session("onnx"), _session("onnx-int8", ranges, str(tmp_path))
    zf = torch.stack([fp32.step_latent(f) for f in frames])
    zq = torch.stack([int8.step_latent(f) for f in frames])
    rel = ((zq - zf).norm() / zf.norm()).item()
    assert 0 < rel < 0.03, rel            # quantized (not identical), and close (measured 0.006)
    from alaya.runtime.int8 import KEEP_FLOAT, _kept_float
    graph = onnx.load(str(tmp_path / "32" / "sample_int8.onnx"))
    assert {p.key: p.value for p in graph.metadata_props}["alaya.steps"] == "4"
    quantized = {n.output[0] for n in graph.graph.node if n.op_type == "DequantizeLinear"}
    convs = [n for n in graph.graph.node if n.op_type == "Conv"]
    assert any(c.input[0] in quantized for c in convs)               # some convolutions read int8 inputs
    assert sum(c.name.startswith("/stem") for c in convs) == 4       # four steps, unrolled
    for c in convs:                                                  # stem and out stay float in every step
        if _kept_float(c.name, KEEP_FLOAT):
            assert c.input[0] not in quantized, c.name
        elif c.name.startswith(("/mid.0/conv1", "/mid.1/conv2", "/down0.0/conv1")):
            assert c.input[0] in quantized, c.name
    whole = _session("onnx-int8", ranges).run(frames)
    s = _session("onnx-int8", ranges)
    assert np.array_equal(np.concatenate([s.run(frames[:2]), s.run(frames[2:])]), whole)


def test_renderer_loads_the_ranges_beside_the_weights(folders, frames, tiny_dataset):
    from alaya.renderers import StudentRenderer
    from alaya.runtime import SessionFactory
    kw = dict(gbuffer_encoder=folders / "enc", decoder=folders / "dec")
    r = StudentRenderer.from_pretrained(folders / "student", backend="onnx-int8", **kw)
    assert r.session.backend.int8_ranges == load_ranges(folders / "student")
    clip = {k: np.stack([f[k] for f in frames[:3]]) for k in GBUFFER_KEYS}
    assert r.render(clip, "a foggy morning").shape == (3, 32, 32, 3)
    factory = SessionFactory.from_pretrained(folders / "student", size=32, backend="onnx-int8", **kw)
    assert factory.backend.name == "onnx-int8"


def test_int8_needs_ranges_of_these_weights(folders, tmp_path):
    from alaya.renderers import StudentRenderer
    with pytest.raises(ValueError, match="int8_ranges"):
        _session("onnx-int8")
    student, _, _ = tiny_flash_modules()
    student.save_pretrained(tmp_path / "bare")
    with pytest.raises(FileNotFoundError, match="calibrate-int8"):
        StudentRenderer.from_pretrained(tmp_path / "bare", backend="onnx-int8", gbuffer_encoder=folders / "enc",
                                        decoder=folders / "dec")
    (tmp_path / "bare" / RANGES_FILE).write_text((folders / "student" / RANGES_FILE).read_text())
    with pytest.raises(ValueError, match="other weights"):                  # same shapes, other values
        with torch.no_grad():
            student.out.weight.add_(1.0)
        student.save_pretrained(tmp_path / "bare")
        load_ranges(tmp_path / "bare")


def test_bad_ranges_are_named(folders, frames, tmp_path):
    path = folders / "student" / RANGES_FILE
    good = json.loads(path.read_text())
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    (bad_dir / "model.safetensors").write_bytes((folders / "student" / "model.safetensors").read_bytes())
    (bad_dir / RANGES_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="invalid JSON"):
        load_ranges(bad_dir)
    name = sorted(good["ranges"])[0]
    (bad_dir / RANGES_FILE).write_text(json.dumps({**good, "ranges": {**good["ranges"], name: [2.0, float("nan")]}}))
    with pytest.raises(ValueError, match="finite"):
        load_ranges(bad_dir)
    session = _session("onnx", folder=str(tmp_path / "graphs"))
    session.step(frames[0])                                          # exports the graphs
    partial = {k: v for k, v in load_ranges(folders / "student").items() if "mid" not in k}
    with pytest.raises(ValueError, match="lack"):
        quantize_step(tmp_path / "graphs" / "32" / "sample.onnx", tmp_path / "q.onnx", partial)
    assert not (tmp_path / "q.onnx").exists()


def test_torch_threads_limits_the_calling_thread_only_and_restores_it():
    import threading

    from alaya.runtime.onnx_backend import torch_threads
    before = torch.get_num_threads()
    seen = {}
    inside, release = threading.Barrier(2), threading.Event()

    def worker():
        own = torch.get_num_threads()
        with torch_threads(1):
            seen["inside"] = torch.get_num_threads()
            inside.wait()
            release.wait()
        seen["after"], seen["own"] = torch.get_num_threads(), own

    t = threading.Thread(target=worker)
    t.start()
    inside.wait()
    assert torch.get_num_threads() == before        # another thread's block leaves this one alone
    release.set()
    t.join()
    assert seen["inside"] == 1 and seen["after"] == seen["own"]
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_percentile_ranges_drop_rare_outliers(tmp_path):
    """MinMax ranges span every value seen; percentile ranges leave out the rarest, so one huge
    activation no longer stretches a tensor's 256 levels; unknown methods are refused."""
    from alaya.runtime.int8 import measure_ranges
    conv = torch.nn.Conv2d(2, 3, 3, padding=1)
    path = tmp_path / "conv.onnx"
    torch.onnx.export(conv, (torch.zeros(1, 2, 16, 16),), str(path), input_names=["x"], output_names=["y"],
                      opset_version=17, dynamo=False)
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.uniform(-1, 1, (1, 2, 16, 16)).astype(np.float32)} for _ in range(8)]
    feeds[3]["x"][0, 1, 5, 5] = 40.0                                      # one value in 4,096
    minmax = measure_ranges(path, feeds, method="minmax")
    pct = measure_ranges(path, feeds, method="percentile", percentile=99.9)
    assert minmax["x"][1] == pytest.approx(40.0)
    assert pct["x"][1] < 2.0 and -2.0 < pct["x"][0] < -0.9               # the outlier left out, negatives kept
    assert minmax["x"][0] <= pct["x"][0] < pct["x"][1] <= minmax["x"][1]
    with pytest.raises(ValueError, match="method"):
        measure_ranges(path, feeds, method="entropy")

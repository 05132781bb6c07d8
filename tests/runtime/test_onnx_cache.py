"""The cache of exported graphs: reused across backends, keyed by weights, settings and code,
finished entries only, bounded, and off on request."""

import dataclasses

import numpy as np
import pytest
import torch

from alaya.runtime import onnx_cache
from alaya.runtime.onnx_backend import OnnxBackend
from tiny_models import tiny_flash_modules


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ALAYA_ONNX_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _entries(root):
    return sorted(p.name for p in root.iterdir() if not p.name.startswith("."))


def test_a_second_backend_loads_the_cached_graphs_without_exporting(cache, monkeypatch):
    student, enc, dec = tiny_flash_modules()
    first = OnnxBackend.from_modules(student, enc, dec, 32)
    (entry,) = _entries(cache)
    assert (cache / entry / onnx_cache.COMPLETE).exists()
    assert {"stream.onnx", "sample.onnx", "decode.onnx"} <= {p.name for p in (cache / entry).iterdir()}

    def no_export(*args, **kwargs):
        raise AssertionError("exported again")
    monkeypatch.setattr("alaya.runtime.onnx_backend.export_onnx", no_export)
    second = OnnxBackend.from_modules(student, enc, dec, 32)
    z = torch.randn(1, student.config.latent_channels, 4, 4)
    features = torch.randn(1, student.config.widths[0], 4, 4)
    text = torch.randn(1, student.config.text_dim)
    assert torch.equal(first.sample(z, text, features), second.sample(z, text, features))


def test_other_weights_sizes_steps_or_ranges_get_their_own_entry(cache):
    student, enc, dec = tiny_flash_modules()
    key = onnx_cache.graphs_key((student, enc, dec), size=32, steps=4, int8=None)
    assert key == onnx_cache.graphs_key((student, enc, dec), size=32, steps=4, int8=None)
    others = {onnx_cache.graphs_key((student, enc, dec), size=64, steps=4, int8=None),
              onnx_cache.graphs_key((student, enc, dec), size=32, steps=2, int8=None),
              onnx_cache.graphs_key((student, enc, dec), size=32, steps=4,
                                    int8=onnx_cache.ranges_setting({"a": (0.0, 1.0)})),
              onnx_cache.graphs_key((student, None, dec), size=32, steps=4, int8=None)}
    student.config = dataclasses.replace(student.config, sigma_data=student.config.sigma_data + 0.1)
    others.add(onnx_cache.graphs_key((student, enc, dec), size=32, steps=4, int8=None))   # a setting in the graph
    student.config = dataclasses.replace(student.config, sigma_data=student.config.sigma_data - 0.1)
    assert onnx_cache.graphs_key((student, enc, dec), size=32, steps=4, int8=None) == key
    with torch.no_grad():
        next(student.parameters()).add_(1e-3)                      # one weight moved
    others.add(onnx_cache.graphs_key((student, enc, dec), size=32, steps=4, int8=None))
    assert key not in others and len(others) == 6
    scalar = torch.nn.Module()
    scalar.register_buffer("count", torch.tensor(3))                # 0-d tensors hash too
    assert onnx_cache.graphs_key((scalar,)) != onnx_cache.graphs_key((None,))


def test_unfinished_entries_are_rebuilt_and_old_ones_pruned(cache):
    calls = []

    def build(folder):
        calls.append(folder)
        folder.mkdir(parents=True)
        (folder / "graph.onnx").write_bytes(b"x")

    cache.mkdir(parents=True)
    (cache / "k0").mkdir()                                           # a half-written entry: no COMPLETE
    entry = onnx_cache.cached_graphs(cache, "k0", build)
    assert (entry / onnx_cache.COMPLETE).exists() and len(calls) == 1
    assert onnx_cache.cached_graphs(cache, "k0", build) == entry and len(calls) == 1    # reused
    for i in range(1, onnx_cache.CACHE_ENTRIES + 3):
        onnx_cache.cached_graphs(cache, f"k{i}", build)
    assert len(_entries(cache)) == onnx_cache.CACHE_ENTRIES
    assert "k0" not in _entries(cache)                               # the least recently used went first
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")]


def test_a_failed_export_leaves_no_entry(cache):
    def build(folder):
        folder.mkdir(parents=True)
        (folder / "partial.onnx").write_bytes(b"x")
        raise RuntimeError("killed mid-export")

    cache.mkdir(parents=True)
    with pytest.raises(RuntimeError, match="mid-export"):
        onnx_cache.cached_graphs(cache, "k", build)
    assert list(cache.iterdir()) == []


def test_the_cache_can_be_turned_off(monkeypatch, tmp_path):
    monkeypatch.setenv("ALAYA_ONNX_CACHE", "off")
    assert onnx_cache.cache_root() is None
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("ALAYA_ONNX_CACHE", str(blocker / "cache"))
    with pytest.warns(UserWarning, match="cannot be created"):
        assert onnx_cache.cache_root() is None
    student, enc, dec = tiny_flash_modules()
    with pytest.warns(UserWarning):
        backend = OnnxBackend.from_modules(student, enc, dec, 32)   # still works, from a temporary folder
    assert backend.has_stream
    assert np.isfinite(backend.modulations(torch.zeros(1, student.config.text_dim))).all()

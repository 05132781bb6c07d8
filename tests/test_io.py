"""Atomic writes (``alaya.io``): whole files or none, no temporary file left behind."""

import pytest
import torch
from safetensors.torch import load_file

from alaya.io import atomic_open, atomic_path, atomic_save_tensors, atomic_write_text


def test_text_and_tensors_arrive_whole(tmp_path):
    path = atomic_write_text(tmp_path / "a.json", "{\n}\r\n")
    assert path.read_bytes() == b"{\n}\r\n"                    # UTF-8, newlines as given
    atomic_write_text(path, "x")
    assert path.read_text() == "x"                             # replaces the old file
    atomic_save_tensors(tmp_path / "t.safetensors", {"w": torch.arange(6.0).reshape(2, 3).t()}, {"k": "v"})
    assert torch.equal(load_file(str(tmp_path / "t.safetensors"))["w"], torch.arange(6.0).reshape(2, 3).t())
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = atomic_write_text(tmp_path / "a.txt", "old")
    with pytest.raises(RuntimeError), atomic_open(path) as f:
        f.write("half")
        raise RuntimeError("killed")
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "b.png", keep_suffix=True) as tmp:
        assert tmp.name.startswith(".b.png.") and tmp.suffix == ".png"     # writers that pick a format by suffix
        tmp.write_bytes(b"half")
        raise RuntimeError("killed")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]

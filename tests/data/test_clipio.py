"""Clip files: round trips, determinism, atomicity and every kind of broken file."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from alaya.data.clipio import ClipError, read_clip, write_clip
from alaya.data.contract import REQUIRED_KEYS
from alaya.data.synthetic import make_synthetic_clip


@pytest.fixture
def clip() -> dict[str, np.ndarray]:
    return make_synthetic_clip(T=3, H=16, W=16, S=2, A=2)


def test_round_trip_is_exact(tmp_path: Path, clip: dict[str, np.ndarray]) -> None:
    path = tmp_path / "a.npz"
    write_clip(path, clip)
    back = read_clip(path)
    assert sorted(back) == sorted(clip)
    for key, arr in clip.items():
        assert back[key].dtype == arr.dtype, key
        np.testing.assert_array_equal(back[key], arr, err_msg=key)
    # The contract says clips load with plain np.load(allow_pickle=False).
    with np.load(path, allow_pickle=False) as npz:
        assert sorted(npz.files) == sorted(clip)


def test_writes_are_byte_identical(tmp_path: Path, clip: dict[str, np.ndarray]) -> None:
    write_clip(tmp_path / "a.npz", clip)
    write_clip(tmp_path / "b.npz", dict(reversed(list(clip.items()))))
    a, b = (tmp_path / "a.npz").read_bytes(), (tmp_path / "b.npz").read_bytes()
    assert a == b
    with zipfile.ZipFile(tmp_path / "a.npz") as zf:
        names = zf.namelist()
        assert names == sorted(names)
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert {i.compress_type for i in zf.infolist()} == {zipfile.ZIP_DEFLATED}


def test_write_leaves_no_temp_file(tmp_path: Path, clip: dict[str, np.ndarray]) -> None:
    write_clip(tmp_path / "a.npz", clip)
    assert [p.name for p in tmp_path.iterdir()] == ["a.npz"]


def test_failed_write_keeps_old_file_and_removes_temp(
    tmp_path: Path, clip: dict[str, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.npz"
    write_clip(path, clip)
    before = path.read_bytes()
    calls = []

    def dying_write_array(fp, array, **kwargs):  # noqa: ANN001, ANN003, ANN202
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt("killed mid-write")
        return real(fp, array, **kwargs)

    real = np.lib.format.write_array
    monkeypatch.setattr(np.lib.format, "write_array", dying_write_array)
    changed = dict(clip, depth=clip["depth"] + 1)
    with pytest.raises(KeyboardInterrupt):
        write_clip(path, changed)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["a.npz"]


def test_truncated_file_names_the_file(tmp_path: Path, clip: dict[str, np.ndarray]) -> None:
    path = tmp_path / "cut.npz"
    write_clip(path, clip)
    data = path.read_bytes()
    for keep in (len(data) // 2, len(data) - 10, 10):
        path.write_bytes(data[:keep])
        with pytest.raises(ClipError) as e:
            read_clip(path)
        assert str(path) in str(e.value)
        assert e.value.path == str(path)


def test_corrupted_bytes_name_file_and_key(tmp_path: Path, clip: dict[str, np.ndarray]) -> None:
    path = tmp_path / "bad.npz"
    write_clip(path, clip)
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("depth.npy")
    data = bytearray(path.read_bytes())
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for i in range(start + 20, start + info.compress_size - 4, 7):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ClipError) as e:
        read_clip(path)
    assert e.value.key == "depth"
    assert str(path) in str(e.value) and "'depth'" in str(e.value)
    # The other keys are intact and still readable on their own.
    assert read_clip(path, ["mask"])["mask"].shape == (3, 16, 16)


def test_missing_key(tmp_path: Path, clip: dict[str, np.ndarray]) -> None:
    partial = {k: v for k, v in clip.items() if k != "mask"}
    with pytest.raises(ClipError, match="'mask'"):
        write_clip(tmp_path / "w.npz", partial)
    assert not (tmp_path / "w.npz").exists()
    path = tmp_path / "m.npz"
    np.savez(path, **partial)
    with pytest.raises(ClipError) as e:
        read_clip(path)
    assert e.value.key == "mask" and str(path) in str(e.value)
    assert set(read_clip(path, ["depth", "normal"])) == {"depth", "normal"}
    with pytest.raises(ClipError, match="'mask'"):
        read_clip(path, ["depth", "mask"])


def test_wrong_dtype(tmp_path: Path, clip: dict[str, np.ndarray]) -> None:
    bad = dict(clip, depth=clip["depth"].astype(np.float64))
    with pytest.raises(ClipError, match=r"key 'depth': expected dtype float32, got float64"):
        write_clip(tmp_path / "w.npz", bad)
    path = tmp_path / "d.npz"
    np.savez(path, **bad)
    with pytest.raises(ClipError) as e:
        read_clip(path)
    assert e.value.key == "depth" and str(path) in str(e.value)


@pytest.mark.parametrize("key, make_bad", [
    ("depth", lambda c: c["depth"][:2]),  # T disagrees with rgb
    ("normal", lambda c: c["normal"][..., 0]),  # wrong rank
    ("K", lambda c: np.zeros((3, 4), np.float32)),  # literal dim
    ("motion", lambda c: c["motion"][:, :, :8]),  # W disagrees
    ("styles", lambda c: np.array(["a", "b", "c"])),  # S disagrees with rgb
    ("actions", lambda c: np.zeros((3, 0), np.float32)),  # A must be positive
])
def test_wrong_shapes(
    tmp_path: Path, clip: dict[str, np.ndarray], key: str, make_bad: Callable
) -> None:
    bad = dict(clip, **{key: make_bad(clip)})
    with pytest.raises(ClipError) as e:
        write_clip(tmp_path / "w.npz", bad)
    assert e.value.key == key
    path = tmp_path / "s.npz"
    np.savez(path, **bad)
    with pytest.raises(ClipError) as e:
        read_clip(path)
    assert e.value.key == key and str(path) in str(e.value)


def test_object_styles_rejected(tmp_path: Path, clip: dict[str, np.ndarray]) -> None:
    bad = dict(clip, styles=np.array(["plain", "night"], dtype=object))
    with pytest.raises(ClipError, match="'styles'"):
        write_clip(tmp_path / "w.npz", bad)
    path = tmp_path / "o.npz"
    np.savez(path, **bad)  # pickled object array
    with pytest.raises(ClipError) as e:
        read_clip(path)
    assert e.value.key == "styles"


def test_unknown_key_rejected(tmp_path: Path, clip: dict[str, np.ndarray]) -> None:
    with pytest.raises(ClipError, match="'extra'"):
        write_clip(tmp_path / "w.npz", dict(clip, extra=np.zeros(3)))


def test_subset_read_is_validated(tmp_path: Path, clip: dict[str, np.ndarray]) -> None:
    path = tmp_path / "a.npz"
    write_clip(path, clip)
    only = read_clip(path, ["depth"])
    assert list(only) == ["depth"]
    np.testing.assert_array_equal(only["depth"], clip["depth"])
    np.savez(tmp_path / "b.npz", **dict(clip, depth=clip["depth"].astype(np.float16)))
    with pytest.raises(ClipError, match="'depth'"):
        read_clip(tmp_path / "b.npz", ["depth"])


def test_not_a_zip(tmp_path: Path) -> None:
    path = tmp_path / "junk.npz"
    path.write_bytes(b"\x00" * 100)
    with pytest.raises(ClipError, match="junk.npz"):
        read_clip(path)
    with pytest.raises(ClipError, match="not found"):
        read_clip(tmp_path / "missing.npz")


def test_required_keys_cover_contract() -> None:
    clip = make_synthetic_clip()
    assert set(REQUIRED_KEYS) <= set(clip)

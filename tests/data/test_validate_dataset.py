"""validate_dataset on good and broken dataset folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from alaya.data.clipio import write_clip
from alaya.data.synthetic import make_synthetic_clip, write_synthetic_dataset
from alaya.data.validate import validate_dataset


def _dataset(tmp_path: Path, **kw) -> Path:  # noqa: ANN003
    write_synthetic_dataset(tmp_path, n_clips=3, T=3, H=12, W=16, S=2, **kw)
    return tmp_path


def test_good_dataset(tmp_path: Path) -> None:
    assert validate_dataset(_dataset(tmp_path, A=2), progress=False) == []


def test_temp_files_are_ignored(tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    (root / "clips" / ".synth_0009.npz.4242.tmp").write_bytes(b"PK\x03\x04half a clip")
    (root / ".dataset.json.99.tmp").write_text("{")
    assert validate_dataset(root, progress=False) == []


def test_missing_and_unlisted_clips(tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    (root / "clips" / "synth_0001.npz").unlink()
    write_clip(root / "clips" / "stray.npz", make_synthetic_clip(T=3, H=12, W=16))
    (root / "clips" / "notes.txt").write_text("hi")
    errors = validate_dataset(root, progress=False)
    assert len(errors) == 3, errors
    assert any("synth_0001.npz" in e and "missing" in e for e in errors)
    assert any("stray.npz" in e and "not listed" in e for e in errors)
    assert any("notes.txt" in e for e in errors)


def test_bad_clips_name_file_and_key(tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    clip = make_synthetic_clip(T=3, H=12, W=16, S=2)
    np.savez(root / "clips" / "synth_0000.npz", **dict(clip, mask=clip["mask"].astype(bool)))
    nan_clip = dict(clip, depth=clip["depth"].copy())
    nan_clip["depth"][1, 6, 8] = np.nan
    write_clip(root / "clips" / "synth_0001.npz", nan_clip)
    errors = validate_dataset(root, progress=False)
    assert any("synth_0000.npz" in e and "key 'mask'" in e for e in errors), errors
    assert any("synth_0001.npz" in e and "key 'depth'" in e and "NaN" in e for e in errors)
    assert not any("synth_0002.npz" in e for e in errors)


def test_clip_disagreeing_with_meta(tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    clips = root / "clips"
    write_clip(clips / "synth_0000.npz", make_synthetic_clip(T=4, H=12, W=16, S=2))
    write_clip(clips / "synth_0001.npz", make_synthetic_clip(T=3, H=12, W=16, S=2, A=1))
    other = make_synthetic_clip(T=3, H=12, W=16, S=2)
    other["styles"] = np.array(["plain", "vaporwave"])
    write_clip(clips / "synth_0002.npz", other)
    errors = validate_dataset(root, progress=False)
    assert any("synth_0000.npz" in e and "frames" in e for e in errors), errors
    assert any("synth_0001.npz" in e and "key 'actions'" in e for e in errors)
    assert any("synth_0002.npz" in e and "vaporwave" in e for e in errors)


def test_bad_meta(tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    data = json.loads((root / "dataset.json").read_text())
    data["width"] = -1
    (root / "dataset.json").write_text(json.dumps(data))
    errors = validate_dataset(root, progress=False)
    assert len(errors) == 1 and "dataset.json" in errors[0] and "'width'" in errors[0]


def test_every_meta_problem_in_one_run(tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    data = json.loads((root / "dataset.json").read_text())
    data["width"] = -1
    data["fps"] = "fast"
    data["colour"] = 1
    data.pop("name")
    data["styles"][next(iter(data["styles"]))]["phrasings"] = ["a"]
    data["materials"][0]["albedo"] = [1, 2, 3]
    data["materials"][1]["roughness"] = 7
    first = next(iter(data["clips"]))
    data["clips"][first]["seed"] = "x"
    data["actions"] = []
    (root / "dataset.json").write_text(json.dumps(data))
    errors = validate_dataset(root, progress=False)
    style = next(iter(data["styles"]))
    fields = ["width", "fps", "colour", "name", f"styles.{style}.phrasings", "materials[0].albedo",
              "materials[1].roughness", f"clips.{first}.seed", "actions"]
    assert len(errors) == len(fields), errors
    for field in fields:
        assert any(f"field '{field}'" in e and "dataset.json" in e for e in errors), (field, errors)


def test_broken_meta_still_checks_each_clip(tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    data = json.loads((root / "dataset.json").read_text())
    data["height"] = 0
    (root / "dataset.json").write_text(json.dumps(data))
    clip = make_synthetic_clip(T=3, H=12, W=16, S=2)
    clip["depth"] = clip["depth"].copy()
    clip["depth"][0, 0, 0] = np.nan
    write_clip(root / "clips" / "synth_0001.npz", clip)
    errors = validate_dataset(root, progress=False)
    assert any("field 'height'" in e for e in errors), errors
    assert any("synth_0001.npz" in e and "key 'depth'" in e for e in errors), errors

"""dataset.json, splits by seed, and ClipDataset."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from alaya.data.dataset import (
    ClipDataset, DatasetMeta, read_meta, split_for_seed, write_meta,
)
from alaya.data.meta_files import MetaError
from alaya.data.synthetic import synthetic_meta, write_synthetic_dataset


def test_meta_round_trip(tmp_path: Path) -> None:
    meta = synthetic_meta({"c0": 0, "c1": 1, "c2": 2}, T=3, H=16, W=16, S=2, A=2)
    path = write_meta(tmp_path, meta)
    assert read_meta(tmp_path) == meta
    assert DatasetMeta.from_json(meta.to_json()) == meta
    text = path.read_text()
    assert text == meta.to_json()
    assert list(json.loads(text)) == sorted(json.loads(text))
    assert [p.name for p in tmp_path.iterdir()] == ["dataset.json"]


def _broken(tmp_path: Path, edit) -> MetaError:  # noqa: ANN001
    meta = synthetic_meta({"c0": 0, "c1": 1}, T=3, H=16, W=16, S=2)
    data = meta.to_dict()
    edit(data)
    (tmp_path / "dataset.json").write_text(json.dumps(data))
    with pytest.raises(MetaError) as e:
        read_meta(tmp_path)
    assert "dataset.json" in str(e.value)
    return e.value


@pytest.mark.parametrize("field, edit", [
    ("styles.plain.phrasings", lambda d: d["styles"]["plain"].__setitem__("phrasings", ["a"])),
    ("materials[1].id", lambda d: d["materials"][1].__setitem__("id", 7)),
    ("materials[0].albedo", lambda d: d["materials"][0].__setitem__("albedo", [1, 2, 3])),
    ("frames", lambda d: d.__setitem__("frames", 0)),
    ("fps", lambda d: d.__setitem__("fps", "fast")),
    ("height", lambda d: d.pop("height")),
    ("colour", lambda d: d.__setitem__("colour", 1)),
    ("schema_version", lambda d: d.__setitem__("schema_version", 99)),
    ("splits", lambda d: d["splits"].pop("val")),
    ("clips.c0.split", lambda d: d["clips"]["c0"].__setitem__(
        "split", "val" if d["clips"]["c0"]["split"] != "val" else "test")),
    ("actions", lambda d: d.__setitem__("actions", [])),
])
def test_meta_errors_name_the_field(tmp_path: Path, field: str, edit) -> None:  # noqa: ANN001
    err = _broken(tmp_path, edit)
    assert err.field == field
    assert f"field '{field}'" in str(err)


def test_meta_missing_file(tmp_path: Path) -> None:
    with pytest.raises(MetaError, match="dataset.json"):
        read_meta(tmp_path)


def test_split_for_seed() -> None:
    splits = [split_for_seed(s) for s in range(4000)]
    assert splits == [split_for_seed(s) for s in range(4000)]  # deterministic
    counts = Counter(splits)
    assert abs(counts["train"] / 4000 - 0.8) < 0.03
    assert abs(counts["val"] / 4000 - 0.1) < 0.02
    assert abs(counts["test"] / 4000 - 0.1) < 0.02
    assert {split_for_seed(s, (1.0, 0.0, 0.0)) for s in range(200)} == {"train"}
    assert {split_for_seed(s, (0.0, 0.0, 1.0)) for s in range(200)} == {"test"}
    with pytest.raises(ValueError):
        split_for_seed(1, (0.5, 0.2, 0.2))


def test_clip_dataset(tmp_path: Path) -> None:
    meta = write_synthetic_dataset(tmp_path, n_clips=4, T=2, H=8, W=12, S=1)
    ds = ClipDataset(tmp_path)
    assert len(ds) == 4 and list(ds) == sorted(meta.clips)
    assert sorted(sum((ds.ids(s) for s in ("train", "val", "test")), [])) == ds.ids()
    cid = ds.ids()[0]
    assert ds.path(cid) == tmp_path / "clips" / f"{cid}.npz" and cid in ds
    assert ds.load(cid, ["depth"])["depth"].shape == (2, 8, 12)
    assert len(ds.load(cid)) == 13
    assert [c for c, _ in ds.items(keys=["mask"])] == ds.ids()
    with pytest.raises(KeyError):
        ds.path("nope")
    with pytest.raises(KeyError):
        ds.ids("holdout")

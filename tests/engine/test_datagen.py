"""``alaya datagen``: a valid dataset, resumable after a kill, refusing mixed settings."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from alaya.data.clipio import read_clip
from alaya.data.dataset import read_meta
from alaya.data.validate import validate_dataset
from alaya.engine.datagen import DatagenConfig, clip_plan, generate_dataset

ALAYA = [sys.executable, "-m", "alaya.cli"]


def tiny(out, **kw):
    args = dict(out=str(out), clips=3, frames=3, size=32, styles=("clear_noon", "toon"), seed=1)
    args.update(kw)
    return DatagenConfig(**args)


def test_datagen_writes_a_valid_dataset(tmp_path):
    root = generate_dataset(tiny(tmp_path / "ds"), progress=False)
    assert validate_dataset(root, progress=False) == []
    meta = read_meta(root)
    assert meta.frames == 3 and meta.height == 32 and set(meta.styles) == {"clear_noon", "toon"}
    assert sum(len(v) for v in meta.splits.values()) == 3
    for cid, info in meta.clips.items():
        clip = read_clip(root / "clips" / f"{cid}.npz")
        assert clip["rgb"].shape == (2, 3, 32, 32, 3)
        assert list(clip["styles"]) == ["clear_noon", "toon"]


def test_splits_follow_scene_seeds():
    a = clip_plan(DatagenConfig(out="x", clips=40, seed=3))
    b = clip_plan(DatagenConfig(out="x", clips=80, seed=3))
    for cid, info in a.items():
        assert b[cid] == info, "the same scene seed keeps its split and rig"
    assert {c["split"] for c in b.values()} == {"train", "val", "test"}


def test_resume_rerenders_missing_and_broken_clips(tmp_path):
    root = generate_dataset(tiny(tmp_path / "ds"), progress=False)
    clips = sorted((root / "clips").glob("*.npz"))
    good = clips[0].read_bytes()
    clips[0].write_bytes(good[: len(good) // 2])        # truncated by a crash elsewhere
    clips[1].unlink()
    (root / "clips" / ".clip_00002.npz.999.tmp").write_bytes(b"half")
    assert validate_dataset(root, progress=False) != []
    generate_dataset(tiny(tmp_path / "ds"), progress=False)
    assert validate_dataset(root, progress=False) == []
    assert clips[0].read_bytes() == good, "re-rendering is deterministic"
    assert not list((root / "clips").glob(".*.tmp"))


def test_refuses_to_mix_settings(tmp_path):
    generate_dataset(tiny(tmp_path / "ds"), progress=False)
    with pytest.raises(ValueError, match="other settings"):
        generate_dataset(tiny(tmp_path / "ds", frames=4), progress=False)
    with pytest.raises(FileExistsError):
        generate_dataset(tiny(tmp_path / "ds", resume=False), progress=False)


def test_killed_datagen_resumes_to_a_valid_dataset(tmp_path):
    out = tmp_path / "ds"
    cmd = ALAYA + ["datagen", "--out", str(out), "--clips", "6", "--frames", "6", "--size", "64",
                   "--styles", "clear_noon", "golden_sunset", "toon", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and len(list((out / "clips").glob("clip_*.npz"))) < 2:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = len(list((out / "clips").glob("clip_*.npz")))
    assert 1 <= done < 6, f"kill should land mid-run ({done} clips written)"
    for path in (out / "clips").glob("clip_*.npz"):
        read_clip(path)                                 # every visible clip is complete
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert validate_dataset(out, progress=False) == []
    assert len(list((out / "clips").glob("clip_*.npz"))) == 6


def test_cli_validate_names_bad_file_and_key(tmp_path):
    root = generate_dataset(tiny(tmp_path / "ds"), progress=False)
    path = sorted((root / "clips").glob("*.npz"))[1]
    clip = dict(np.load(path, allow_pickle=False))
    clip["depth"] = clip["depth"].astype(np.float64)
    with open(path, "wb") as f:
        np.savez(f, **clip)
    r = subprocess.run(ALAYA + ["validate", str(root), "--quiet"], capture_output=True, text=True)
    assert r.returncode != 0
    assert path.name in r.stderr and "depth" in r.stderr
    r = subprocess.run(ALAYA + ["datagen", "--out", str(tmp_path / "x"), "--size", "100"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "multiple of 16" in r.stderr


def test_cli_inspect_writes_pictures(tmp_path):
    root = generate_dataset(tiny(tmp_path / "ds"), progress=False)
    r = subprocess.run(ALAYA + ["inspect", str(root), "--out", str(tmp_path / "ins")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    pngs = list((tmp_path / "ins").glob("*.png"))
    gifs = list((tmp_path / "ins").glob("*.gif"))
    assert len(pngs) == 1 and len(gifs) == 3        # two styles + the G-buffer strip
    assert "clear_noon" in r.stdout


def test_data_layer_does_not_import_the_engine():
    code = ("import sys, alaya.data.clipio, alaya.data.dataset, alaya.data.validate, "
            "alaya.data.inspect, alaya.data.importer; "
            "print(any(m.startswith('alaya.engine') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("clips, seed", [(2, 0), (2, 11), (3, 0), (3, 11), (8, 0)])
def test_small_datasets_get_test_and_val_clips(clips, seed):
    plan = clip_plan(DatagenConfig(out="x", clips=clips, seed=seed))
    splits = [c["split"] for c in plan.values()]
    assert "train" in splits and "test" in splits
    assert ("val" in splits) == (clips >= 3)
    assert plan == clip_plan(DatagenConfig(out="y", clips=clips, seed=seed)), "deterministic"


def test_large_datasets_keep_the_hash_split():
    from alaya.data.dataset import split_for_seed
    for clips, seed in ((80, 3), (240, 1)):
        plan = clip_plan(DatagenConfig(out="x", clips=clips, seed=seed))
        assert all(c["split"] == split_for_seed(c["seed"]) for c in plan.values())


def test_cli_datagen_two_clips_has_a_test_clip(tmp_path):
    r = subprocess.run(ALAYA + ["datagen", "--out", str(tmp_path / "ds"), "--clips", "2", "--frames", "1",
                                "--size", "16", "--styles", "clear_noon", "--quiet"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    meta = read_meta(tmp_path / "ds")
    assert len(meta.splits["train"]) == 1 and len(meta.splits["test"]) == 1
    assert validate_dataset(tmp_path / "ds", progress=False) == []

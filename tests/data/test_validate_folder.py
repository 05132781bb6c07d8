"""``alaya validate`` on episodes folders: detected by their layout, checked like the reader does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from alaya.data.clipio import write_npz
from alaya.data.episodes import EPISODES_DIR, EPISODES_FILE, read_episode
from alaya.data.validate import is_episodes_folder, validate_folder

ALAYA = [sys.executable, "-m", "alaya.cli"]


def _record_game(out: Path) -> Path:
    r = subprocess.run(ALAYA + ["record", "game", "--out", str(out), "--episodes", "2", "--frames", "4",
                                "--size", "32", "--styles", "golden_sunset", "--quiet"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def test_record_game_output_validates(tmp_path: Path) -> None:
    root = _record_game(tmp_path / "play")
    assert is_episodes_folder(root) and validate_folder(root) == []
    r = subprocess.run(ALAYA + ["validate", str(root)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "cannot read" not in r.stderr and "episode" in r.stdout


def test_broken_episodes_are_all_reported(tmp_path: Path) -> None:
    root = _record_game(tmp_path / "play")
    first, second = sorted((root / EPISODES_DIR).glob("*.npz"))
    ep = read_episode(first)
    ep["actions"] = ep["actions"].copy()
    ep["actions"][2, 0] = 5.0                           # forward out of [-1, 1]
    write_npz(first, ep)
    ep = read_episode(second)
    ep = {k: v if k in ("styles", "K") else (v[:, :3] if k == "rgb" else v[:3]) for k, v in ep.items()}
    write_npz(second, ep)
    data = json.loads((root / EPISODES_FILE).read_text())
    data["fps"] = 0
    (root / EPISODES_FILE).write_text(json.dumps(data))
    errors = validate_folder(root)
    assert any("field 'fps'" in e for e in errors), errors
    assert any(first.name in e and "key 'actions'" in e for e in errors), errors
    data["fps"] = 30.0                                 # with a valid meta: its frame counts too
    (root / EPISODES_FILE).write_text(json.dumps(data))
    errors = validate_folder(root)
    assert any(first.name in e and "key 'actions'" in e for e in errors), errors
    assert any(second.name in e and "key 'rgb'" in e and "frames" in e for e in errors), errors
    r = subprocess.run(ALAYA + ["validate", str(root)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "2 problem(s)" in r.stderr, r.stderr


def test_a_dataset_folder_is_not_an_episodes_folder(tmp_path: Path) -> None:
    from alaya.data.synthetic import write_synthetic_dataset
    write_synthetic_dataset(tmp_path, n_clips=1, T=2, H=8, W=8, S=1)
    assert not is_episodes_folder(tmp_path) and validate_folder(tmp_path, progress=False) == []
    assert not is_episodes_folder(tmp_path / "nothing")
    assert np.all([e.startswith(str(tmp_path / "nothing")) for e in validate_folder(tmp_path / "nothing")])

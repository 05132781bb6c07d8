"""Commands run from any working directory: the default weights are the shipped ones wherever
the package is (``alaya.paths``), ``$ALAYA_WEIGHTS`` moves them, and a path the user gives stays
relative to the working directory."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from alaya.data.clipio import write_clip
from alaya.data.synthetic import make_synthetic_clip
from alaya.paths import REPO_WEIGHTS, WEIGHTS_ENV, default_weights, weights_dir

ALAYA = [sys.executable, "-m", "alaya"]


def test_the_resolver(monkeypatch, tmp_path):
    monkeypatch.delenv(WEIGHTS_ENV, raising=False)
    assert weights_dir() == REPO_WEIGHTS and REPO_WEIGHTS.is_absolute()
    assert default_weights("student") == str(REPO_WEIGHTS / "student")
    monkeypatch.setenv(WEIGHTS_ENV, str(tmp_path))
    assert default_weights("tiny_decoder") == str(tmp_path / "tiny_decoder")


def test_the_defaults_are_the_shipped_weights(monkeypatch):
    monkeypatch.delenv(WEIGHTS_ENV, raising=False)
    from alaya.cli import build_parser
    from alaya.serve.play import PlayConfig
    a = build_parser().parse_args(["serve", "--grpc", "1"])
    assert Path(a.weights) == REPO_WEIGHTS / "student" and Path(a.decoder).parent == REPO_WEIGHTS
    assert Path(PlayConfig().world_weights) == REPO_WEIGHTS / "world_model"
    assert build_parser().parse_args(["serve", "--grpc", "1", "--weights", "w/s"]).weights == "w/s"


def run(args, cwd, weights_env: str | None = None):
    env = {k: v for k, v in os.environ.items() if k != WEIGHTS_ENV} | {"OMP_NUM_THREADS": "1"}
    if weights_env is not None:
        env[WEIGHTS_ENV] = weights_env
    return subprocess.run(ALAYA + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(not (REPO_WEIGHTS / "student" / "config.json").exists(), reason="no shipped weights")
def test_render_from_another_folder(tmp_path):
    """``alaya render`` of a tiny clip from a folder far from the repository, with the shipped
    student found on its own; then a relative --weights is read relative to that folder."""
    write_clip(tmp_path / "clip.npz", make_synthetic_clip(T=2, H=32, W=32, S=1))
    done = run(["render", "--model", "student", "--backend", "torch", "--clip", "clip.npz", "--frames", "2",
                "--prompt", "a clear sunny noon", "--out", "frames.gif"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "frames.gif").stat().st_size > 0
    relative = run(["render", "--model", "student", "--backend", "torch", "--clip", "clip.npz",
                    "--weights", "weights/student", "--prompt", "x", "--out", "again.gif"], cwd=tmp_path)
    assert relative.returncode != 0 and "weights/student" in relative.stderr
    assert str(REPO_WEIGHTS) not in relative.stderr                       # not quietly the shipped one
    moved = run(["render", "--model", "student", "--backend", "torch", "--clip", "clip.npz", "--prompt", "x", "--out", "x.gif"],
                cwd=tmp_path, weights_env=str(tmp_path / "elsewhere"))
    assert moved.returncode != 0 and str(tmp_path / "elsewhere" / "student") in moved.stderr

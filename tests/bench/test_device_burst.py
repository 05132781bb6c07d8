"""The GPU burst script (scripts/device/teacher_burst.sh) dry-runs on the CPU: it renders a
dataset, sizes its step count from a probe, trains, and leaves loadable float16 weights, the
metrics and its timings in $OUT."""

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from alaya.models.teacher import Teacher

ROOT = Path(__file__).resolve().parents[2]


def test_teacher_burst_dry_run(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path / "out"), "DATA": str(tmp_path / "data"), "RUN": str(tmp_path / "run"),
           "PY": sys.executable, "SKIP_WHEELS": "1", "SKIP_GL": "1", "DEVICE": "cpu", "TINY": "1", "BF16": "",
           "OMP_NUM_THREADS": "2"}
    r = subprocess.run(["bash", "scripts/device/teacher_burst.sh"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = tmp_path / "out"
    burst = json.loads((out / "burst.json").read_text())
    assert burst["steps"] > 3 and burst["preset"] == "tiny" and burst["total_s"] >= burst["train_s"] > 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["step"] == burst["steps"]
    config = json.loads((out / "teacher" / "config.json").read_text())
    assert config["stored_dtype"] == "float16" and config["trained"]["steps"] == burst["steps"]
    teacher = Teacher.from_pretrained(out / "teacher")
    assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in teacher.parameters())
    assert (out / "metrics.png").stat().st_size > 0


def test_guided_burst_dry_run(tmp_path):
    """The guided decoder's burst (scripts/device/guided_burst.sh) on the CPU: data, the shipped
    student's latents, a probe, a run sized from it, the weights and the log in OUT."""
    from alaya.codecs.guided import GuidedDecoder
    env = {**os.environ, "OUT": str(tmp_path / "out"), "DATA": str(tmp_path / "data"), "RUN": str(tmp_path / "run"),
           "PY": sys.executable, "SKIP_WHEELS": "1", "SKIP_GL": "1", "DEVICE": "cpu", "TINY": "1",
           "BUDGET_S_TINY": "60", "OMP_NUM_THREADS": "2"}
    r = subprocess.run(["bash", "scripts/device/guided_burst.sh"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = tmp_path / "out"
    burst = json.loads((out / "burst.json").read_text())
    assert burst["steps"] > 3 and burst["total_s"] >= burst["train_s"] >= 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["step"] == burst["steps"]
    decoder = GuidedDecoder.from_pretrained(out / "guided_decoder")
    assert all(torch.isfinite(p).all() for p in decoder.parameters())

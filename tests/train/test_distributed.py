"""The shared training loop runs unchanged under torchrun (2 CPU processes, gloo)."""

import os
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

WORKER = Path(__file__).with_name("ddp_teacher_worker.py")


def test_two_ranks_train_a_tiny_teacher_to_identical_weights(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(WORKER), str(tmp_path)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    a, b = load_file(str(tmp_path / "rank0.safetensors")), load_file(str(tmp_path / "rank1.safetensors"))
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert torch.count_nonzero(a["out.weight"]) > 0, "the weights were trained"
    log = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(log) == 4, "only rank 0 logs"

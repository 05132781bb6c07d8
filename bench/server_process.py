"""What the server benchmarks share (``bench/play.py``, ``bench/serve.py``): a free port, the
model options, and an ``alaya`` server subprocess that is always stopped."""

from __future__ import annotations

import argparse
import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--backend", default="onnx-int8", choices=["onnx-int8", "onnx", "torch"])
    p.add_argument("--weights", default="weights/student")


@contextlib.contextmanager
def alaya_server(*args: str) -> Iterator[subprocess.Popen]:
    """``python -m alaya ARGS`` running for the block (stderr piped, for the caller's errors),
    terminated after it (killed if it does not stop within 10 s)."""
    proc = subprocess.Popen([sys.executable, "-m", "alaya", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()

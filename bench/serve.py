"""gRPC benchmark: a real ``alaya serve --grpc`` server (a subprocess) and a Python engine client.

The client sends ``--frames`` engine frames of a live fly-through (rendered beforehand, so that the
client costs little on the shared cores) over one ``Render`` stream, twice: **streaming** — frames
sent ahead of the replies, as ``RenderClient.render`` does with a generator — and **lock-step** —
each frame sent only once the previous reply came back. Reported for each: frames per second at
the client (median of the intervals between replies, after ``--warmup`` frames) and the time
from sending a frame to its reply (lock-step; streaming frames queue behind each other, so their
latency is the queue's). The server runs each stream in a ``StreamPipeline``, so a streaming
client has frame n + 1 prepared while frame n renders.

Usage: python bench/serve.py [--frames 300] [--size 128] [--backend onnx-int8]
Prints a summary, then one JSON object as its last line (keys ``fps`` (streaming),
``lockstep_fps``, ``lockstep_p50_ms``, ``lockstep_p99_ms``).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import time

import numpy as np

from server_process import add_model_arguments, alaya_server, free_port


def engine_frames(n: int, size: int) -> list[dict]:
    from alaya.engine.stream import EngineStream, StreamConfig
    stream = EngineStream(11, StreamConfig(size=size, rig="fly"))
    try:
        return [{k: np.array(v) for k, v in stream.step().items()} for _ in range(n)]
    finally:
        stream.close()


def wait_ready(client, proc: subprocess.Popen, timeout: float = 300) -> None:
    import grpc
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode}: {proc.stderr.read()[-2000:]}")
        try:
            client.info(timeout=2)
            return
        except grpc.RpcError:
            time.sleep(0.5)
    raise TimeoutError("the server did not come up")


def streaming(client, messages) -> tuple[list[float], list[float]]:
    sent, arrivals = {}, []

    def source():
        for m in messages:
            sent[m.frame_id] = time.perf_counter()
            yield m

    latency = []
    for reply in client.render(source()):
        now = time.perf_counter()
        arrivals.append(now)
        latency.append(now - sent[reply.frame_id])
    return arrivals, latency


def lockstep(client, messages) -> tuple[list[float], list[float]]:
    outbox: queue.SimpleQueue = queue.SimpleQueue()
    arrivals, latency = [], []

    def source():
        for m in messages:
            outbox.get()                                  # the previous reply came back
            m_sent = time.perf_counter()
            latency.append(-m_sent)
            yield m

    outbox.put(None)
    for reply in client.render(source()):
        now = time.perf_counter()
        arrivals.append(now)
        latency[-1] += now
        outbox.put(None)
    return arrivals, latency


def summary(arrivals, latency, warmup: int) -> dict:
    gaps = np.diff(arrivals)[warmup:]
    lat = np.array(latency[warmup:]) * 1e3
    return {"fps": float(1 / np.median(gaps)), "p50_ms": float(np.median(lat)), "p99_ms": float(np.percentile(lat, 99)),
            "frames": len(arrivals)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--frames", type=int, default=300)
    p.add_argument("--warmup", type=int, default=10)
    add_model_arguments(p)
    a = p.parse_args()
    from alaya.serve.grpc_client import RenderClient, frame_to_message
    frames = engine_frames(a.frames, a.size)
    port = free_port()
    with alaya_server("serve", "--grpc", str(port), "--size", str(a.size), "--backend", a.backend,
                      "--weights", a.weights) as proc, RenderClient(f"127.0.0.1:{port}") as client:
        wait_ready(client, proc)

        def messages():
            return [frame_to_message(f, frame_id=i, prompt="a clear sunny noon" if i == 0 else None)
                    for i, f in enumerate(frames)]
        streaming(client, messages()[:a.warmup + 2])                    # warm-up (graphs, caches)
        result = {"streaming": summary(*streaming(client, messages()), a.warmup),
                  "lockstep": summary(*lockstep(client, messages()), a.warmup)}
    s, l = result["streaming"], result["lockstep"]
    print(f"gRPC at {a.size}px ({a.backend}), {a.frames} frames: streaming {s['fps']:.1f} FPS; lock-step "
          f"{l['fps']:.1f} FPS, send-to-reply p50 {l['p50_ms']:.1f} ms, p99 {l['p99_ms']:.1f} ms")
    print(json.dumps({"fps": s["fps"], "lockstep_fps": l["fps"], "lockstep_p50_ms": l["p50_ms"],
                      "lockstep_p99_ms": l["p99_ms"], "streaming": s, "lockstep": l, "size": a.size,
                      "backend": a.backend, "frames": a.frames, "cpus": os.cpu_count()}))


if __name__ == "__main__":
    main()

"""Play benchmark: a real ``alaya play`` server (a subprocess) and real WebSocket clients.

One session by default: delivered FPS and frame latency (from the engine starting the frame to
the JPEG arriving at the client; both clocks are this machine's) over ``--seconds``, counted from
the first frame (``--warmup`` skips some), while the client holds "forward" and turns now and
then; the first 10 s (when the server is still loading the text model in the background) are
also reported apart (``first10_*``), and ``--prompt TEXT`` types a free-text prompt at
``--prompt-at`` seconds. ``max_gap_ms``: the longest wait between two frames. With ``--sessions N`` it
opens N sessions at once plus one more, which must be refused when N is the server's limit, and
reports each session's FPS and the server's resident memory at the start and the end. With
``--world`` the server is ``alaya play --world`` (the shipped world model at its own size, onnx):
the client holds "forward", turns now and then and casts a one-shot action (jump, attack, spell,
summon in turn) every few seconds.

Usage: python bench/play.py [--seconds 20] [--sessions 1] [--size 128] [--backend onnx-int8] [--prompt TEXT] [--world]
Prints a summary, then one JSON object as its last line (keys ``fps``, ``p50_ms``, ``p99_ms``,
``first10_fps``, ``first10_p99_ms``, ``max_gap_ms``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import subprocess
import time
import urllib.request

import numpy as np

from alaya.hardware import rss_mb
from server_process import add_model_arguments, alaya_server, free_port

HEADER = struct.Struct("<Qd")


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if json.loads(r.read())["status"] == "ok":
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError("the server did not come up")


# what the driving client sends: held forward, a turn each second, and in the world mode a
# one-shot action every ACT_EVERY turns
DRIVE = {False: ({"type": "move", "forward": 0.5}, {"type": "look", "dyaw": 0.2, "dpitch": 0.0}),
         True: ({"type": "move", "forward": 1.0}, {"type": "look", "turn": 0.5, "pitch": 0.0})}
ONE_SHOTS, ACT_EVERY = ("jump", "attack", "spell", "summon"), 4


async def client(url: str, seconds: float, warmup: float, drive: bool = True, prompt: str | None = None,
                 prompt_at: float = 2.0, world: bool = False) -> dict:
    import websockets
    latencies, arrivals, turns = [], [], 0
    move, look = DRIVE[world]
    async with websockets.connect(url, max_size=1 << 22) as ws:
        if drive:
            await ws.send(json.dumps(move))
        t0 = None                                          # the first frame's arrival
        while t0 is None or time.time() - t0 < warmup + seconds:
            msg = await asyncio.wait_for(ws.recv(), timeout=60)
            now = time.time()
            if isinstance(msg, str):
                m = json.loads(msg)
                if m.get("type") == "error" and "server full" in m.get("message", ""):
                    return {"refused": m["message"]}
                continue
            _, engine_start = HEADER.unpack_from(msg)
            if t0 is None:
                t0 = turned = now
            if now - t0 >= warmup:
                latencies.append((now - engine_start) * 1e3)
                arrivals.append(now)
            if drive and now - turned > 1.0:
                await ws.send(json.dumps(look))
                turned, turns = now, turns + 1
                if world and turns % ACT_EVERY == 0:
                    name = ONE_SHOTS[turns // ACT_EVERY % len(ONE_SHOTS)]
                    await ws.send(json.dumps({"type": "action", "name": name}))
            if prompt is not None and now - t0 >= prompt_at:
                await ws.send(json.dumps({"type": "prompt", "text": prompt}))
                prompt = None
    return {**stats(np.array(arrivals), np.array(latencies)),
            **{f"first10_{k}": v for k, v in stats(*first(np.array(arrivals), np.array(latencies), 10.0)).items()}}


def first(arrivals: np.ndarray, latencies: np.ndarray, seconds: float) -> tuple[np.ndarray, np.ndarray]:
    keep = arrivals - arrivals[0] < seconds
    return arrivals[keep], latencies[keep]


def stats(arrivals: np.ndarray, latencies: np.ndarray) -> dict:
    """Delivered FPS, latency percentiles and the longest gap between frames, of one client."""
    span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else float("nan")
    return {"fps": (len(arrivals) - 1) / span, "p50_ms": float(np.percentile(latencies, 50)),
            "p99_ms": float(np.percentile(latencies, 99)), "max_ms": float(latencies.max()),
            "max_gap_ms": float(np.diff(arrivals).max() * 1e3) if len(arrivals) > 1 else float("nan"),
            "frames": len(arrivals)}


async def refused_client(url: str) -> str | None:
    import websockets
    async with websockets.connect(url) as ws:
        try:
            while True:
                msg = await asyncio.wait_for(ws.recv(), timeout=30)
                if isinstance(msg, str) and "server full" in msg:
                    return json.loads(msg)["message"]
                if isinstance(msg, bytes):
                    return None
        except websockets.ConnectionClosed as err:
            return err.rcvd.reason if err.rcvd else None


async def run(a, ws_url: str) -> dict:
    if a.sessions == 1:
        return await client(ws_url, a.seconds, a.warmup, prompt=a.prompt, prompt_at=a.prompt_at, world=a.world)
    tasks = [asyncio.create_task(client(ws_url, a.seconds, a.warmup, world=a.world)) for _ in range(a.sessions)]
    await asyncio.sleep(5)
    refusal = await refused_client(ws_url)
    results = await asyncio.gather(*tasks)
    fps = [r["fps"] for r in results]
    return {"fps": float(np.min(fps)), "fps_sessions": fps, "p50_ms": float(np.median([r["p50_ms"] for r in results])),
            "p99_ms": float(np.max([r["p99_ms"] for r in results])), "refused_extra": refusal}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--warmup", type=float, default=0, help="seconds after the first frame not counted")
    p.add_argument("--prompt", default=None, help="a free-text prompt typed at --prompt-at seconds")
    p.add_argument("--prompt-at", type=float, default=2.0)
    p.add_argument("--sessions", type=int, default=1)
    p.add_argument("--fps", type=float, default=30)
    p.add_argument("--world", action="store_true", help="alaya play --world: the world model, no engine")
    p.add_argument("--world-weights", default="weights/world_model")
    add_model_arguments(p)
    a = p.parse_args()
    port = free_port()
    model = (["--world", "--world-weights", a.world_weights, "--backend", "onnx"] if a.world else
             ["--size", str(a.size), "--backend", a.backend, "--weights", a.weights])
    with alaya_server("play", "--port", str(port), "--fps", str(a.fps), *model,
                      "--max-sessions", str(max(a.sessions, 1))) as proc:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        rss_start = rss_mb(proc.pid)
        result = asyncio.run(run(a, f"ws://127.0.0.1:{port}/ws"))
        result.update(rss_start_mb=rss_start, rss_end_mb=rss_mb(proc.pid), sessions=a.sessions,
                      size=None if a.world else a.size, backend="onnx" if a.world else a.backend, seconds=a.seconds,
                      target_fps=a.fps, cpus=os.cpu_count(), mode="world" if a.world else "engine")
    where = "the world model's size" if a.world else f"{a.size}px"
    print(f"{a.sessions} session(s) at {where}: {result['fps']:.1f} FPS delivered (slowest session), "
          f"latency p50 {result['p50_ms']:.0f} ms, p99 {result['p99_ms']:.0f} ms; server RSS "
          f"{result['rss_start_mb']:.0f} -> {result['rss_end_mb']:.0f} MB")
    if "first10_fps" in result:
        print(f"first 10 s: {result['first10_fps']:.1f} FPS, latency p99 {result['first10_p99_ms']:.0f} ms, "
              f"longest gap {result['first10_max_gap_ms']:.0f} ms; whole run: longest gap {result['max_gap_ms']:.0f} ms")
    print(json.dumps(result))


if __name__ == "__main__":
    main()

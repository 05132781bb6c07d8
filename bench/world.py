"""World-model benchmark: frames per second of one playing session (action row in, RGB out).

For each size (64 and 128 by default) it starts a ``WorldSession`` on the shipped weights (the
onnxruntime backend unless ``--backend torch``), plays ``--frames`` frames of a scripted action
sequence (walking, turning, and a one-shot action now and then) and reports the median and
99th-percentile frame time and FPS. A frame is everything ``WorldSession.step`` does: for a
memory-conditioned model (``WorldModelConfig.memory``) that includes rendering the scene memory
at the frame's camera and inserting the generated frame (``memory_points`` reports what it
holds at the end) and how much the process's resident memory grew from the end of the warm-up
to the last frame (``rss_growth_mb``; a 10-minute session is ``--frames 18000``). Torch uses one
thread, as in the server; the networks run as ``alaya play --world`` runs them: a session
alone steps on graphs with a thread per core (``--solo-threads``, default the usable cores;
``WorldSessionFactory``'s ``solo_threads``). ``fps_<size>_shared`` is the same session on the
one-thread graphs that sessions side by side share (``--solo-threads 0`` skips the second run).
The session starts as ``alaya play --world`` does: from the first shipped start frame with its
recorded depth and camera (at another size, resized, without them).

Usage: python bench/world.py [--frames 1000] [--sizes 64 128] [--backend onnx] [--weights DIR] [--steps N]
                             [--solo-threads N]
Prints a table, then one JSON object as its last line (keys ``fps_64``, ``fps_128``,
``fps_128_shared``, ``rss_growth_mb_128``, ...).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from alaya.data.actions import ONE_SHOT, action_vector  # noqa: E402
from alaya.hardware import rss_mb, usable_cores  # noqa: E402
from alaya.runtime.world_folder import load_start_depths, load_start_frames, load_start_views  # noqa: E402
from alaya.runtime.world_factory import WorldSessionFactory  # noqa: E402


def scripted_actions(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    rows, hold = [], 0
    nav = (0.0, 0.0, 0.0)
    for _ in range(n):
        if hold <= 0:
            nav = (float(rng.choice([0.0, 1.0, 1.0, -1.0])), float(rng.choice([0.0, 0.0, 1.0, -1.0])),
                   float(rng.choice([0.0, 1.0, -1.0])))
            hold = int(rng.integers(10, 40))
        hold -= 1
        act = ONE_SHOT[int(rng.integers(len(ONE_SHOT)))] if rng.random() < 0.03 else None
        rows.append(action_vector(nav[0], nav[1], nav[2], 0.0, act))
    return rows


def run(size: int, frames: int, backend: str, weights: str, warmup: int = 20, steps: int | None = None,
        solo_threads: int = 0) -> dict:
    factory = WorldSessionFactory.from_pretrained(weights, size=size, backend=backend, threads=1,
                                                  solo_threads=solo_threads)
    if steps:
        factory.model.config.steps = steps
        factory = WorldSessionFactory(factory.model, size=size, backend=backend, threads=1, solo_threads=solo_threads,
                                      camera_motion=factory.camera_motion, region=factory.region)
    start = load_start_frames(weights)[0]
    given = {}                     # as play starts: the start's recorded depth and camera where shipped at this size
    if start.shape[0] != size:
        start = np.asarray(Image.fromarray(start).resize((size, size), Image.BICUBIC))
    else:
        given = {"depth": load_start_depths(weights, size)[0], "view": load_start_views(weights)[0]}
    session = factory.new("a golden sunset", seed=0)
    session.reset(start, **given)
    rows = scripted_actions(frames + warmup)
    times, rss_start = [], rss_mb()
    for k, row in enumerate(tqdm(rows, desc=f"world {size}", disable=len(rows) < 2000)):
        t0 = time.perf_counter()
        session.step(row)
        if k >= warmup:
            times.append(time.perf_counter() - t0)
        if k == warmup - 1:
            rss_start = rss_mb()
    ms = np.array(times) * 1000
    memory = getattr(session, "memory", None)
    return {"size": size, "frames": frames, "p50_ms": float(np.median(ms)), "p99_ms": float(np.percentile(ms, 99)),
            "fps": float(1000 / np.median(ms)), "memory_points": None if memory is None else len(memory),
            "rss_growth_mb": rss_mb() - rss_start}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--frames", type=int, default=1000)
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 128])
    p.add_argument("--backend", default="onnx", choices=["onnx", "torch"])
    p.add_argument("--weights", default="weights/world_model")
    p.add_argument("--steps", type=int, default=None, help="sampling steps (default: the model's)")
    p.add_argument("--solo-threads", type=int, default=usable_cores(),
                   help="threads of a lone session's graphs, as alaya play (default: the usable cores; 0: none)")
    a = p.parse_args()
    torch.set_num_threads(1)
    rows = [run(s, a.frames, a.backend, a.weights, steps=a.steps, solo_threads=a.solo_threads) for s in a.sizes]
    shared = ([run(s, a.frames, a.backend, a.weights, steps=a.steps) for s in a.sizes]
              if a.solo_threads > 1 and a.backend != "torch" else [])
    print("| size | graphs | median ms | p99 ms | FPS |\n|---|---|---|---|---|")
    for r, kind in [(r, f"{a.solo_threads} threads, alone") for r in rows] + [(r, "1 thread, shared") for r in shared]:
        print(f"| {r['size']} | {kind} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['fps']:.1f} |")
    out = {f"fps_{r['size']}": round(r["fps"], 2) for r in rows}
    out.update({f"fps_{r['size']}_shared": round(r["fps"], 2) for r in shared})
    out.update({f"p50_ms_{r['size']}": round(r["p50_ms"], 2) for r in rows})
    out.update({f"p99_ms_{r['size']}": round(r["p99_ms"], 2) for r in rows})
    out.update({f"memory_points_{r['size']}": r["memory_points"] for r in rows if r["memory_points"] is not None})
    out.update({f"rss_growth_mb_{r['size']}": round(r["rss_growth_mb"], 1) for r in rows})
    out.update({"backend": a.backend, "frames": a.frames, "weights": a.weights, "solo_threads": a.solo_threads})
    print(json.dumps(out))


if __name__ == "__main__":
    main()

"""Engine benchmark: physics, G-buffer raster + readback, and each reference style, per frame.

Usage: python bench/engine.py [--frames N] [--sizes 128 256] [--seeds 0 1 2]

Times are medians in milliseconds over N frames of live streams (orbit, fly and walk rigs, a few
scene seeds). ``physics_gbuffer_fps_128`` is the throughput of the full engine loop (physics
step, G-buffer raster, readback into clip-contract arrays) at 128x128 with physics pipelined
on a worker thread; ``physics_gbuffer_fps_128_serial`` is the same loop on one thread.
Prints a table, then one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np


def median_ms(samples: list[float]) -> float:
    return round(float(np.median(samples)) * 1e3, 3)


def bench_size(size: int, frames: int, seeds: list[int], ctx) -> dict:
    from alaya.engine.stream import EngineStream, StreamConfig
    from alaya.engine.styles import STYLE_NAMES, get_style

    physics, raster, loop_serial, loop_piped = [], [], [], []
    styles: dict[str, list[float]] = {s: [] for s in STYLE_NAMES}
    for seed in seeds:
        for rig in ("orbit", "fly", "walk"):
            stream = EngineStream(seed, StreamConfig(size=size, rig=rig), ctx)
            for _ in range(5):
                stream.step()
            for i in range(frames):
                t0 = time.perf_counter()
                geoms, view = stream._simulate()
                t1 = time.perf_counter()
                stream.raster.render(geoms, view)
                t2 = time.perf_counter()
                physics.append(t1 - t0)
                raster.append(t2 - t1)
                stream.world_to_camera = view
                if i % 4 == 0:
                    for name in STYLE_NAMES:
                        t3 = time.perf_counter()
                        stream.reference.render(get_style(name), view)
                        styles[name].append(time.perf_counter() - t3)
            for _ in range(frames):
                t0 = time.perf_counter()
                stream.step()
                loop_serial.append(time.perf_counter() - t0)
            stream.close()
            piped = EngineStream(seed, StreamConfig(size=size, rig=rig, pipelined=True), ctx)
            for _ in range(5):
                piped.step()
            for _ in range(frames):
                t0 = time.perf_counter()
                piped.step()
                loop_piped.append(time.perf_counter() - t0)
            piped.close()
    out = {
        f"physics_ms_{size}": median_ms(physics),
        f"gbuffer_ms_{size}": median_ms(raster),
        f"physics_gbuffer_ms_{size}_serial": median_ms(loop_serial),
        f"physics_gbuffer_ms_{size}": median_ms(loop_piped),
        f"physics_gbuffer_fps_{size}_serial": round(1.0 / float(np.median(loop_serial)), 1),
        f"physics_gbuffer_fps_{size}": round(1.0 / float(np.median(loop_piped)), 1),
    }
    for name, samples in styles.items():
        out[f"style_ms_{size}_{name}"] = median_ms(samples)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--frames", type=int, default=150)
    p.add_argument("--sizes", type=int, nargs="+", default=[128, 256])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = p.parse_args()
    from alaya.engine.raster import create_context
    ctx = create_context()
    result = {"bench": "engine", "frames_per_stream": args.frames, "seeds": args.seeds,
              "cpu_count": os.cpu_count(), "machine": platform.machine(),
              "renderer": ctx.info["GL_RENDERER"], "python": sys.version.split()[0]}
    for size in args.sizes:
        result.update(bench_size(size, args.frames, args.seeds, ctx))
    for key, value in result.items():
        if key.endswith("_ms") or "_ms_" in key or "fps" in key:
            print(f"{key:40s} {value}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()

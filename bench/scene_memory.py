"""Scene-memory benchmark: the per-frame cost of ``alaya.models.scene_memory.SceneMemory`` and how
many points it holds while a scripted player plays the game.

For each size (64 and 128 by default) the game (``GameStream``, scripted player, one style) plays
``--frames`` frames first; then, timed, as a world model plays with it: the memory (default
config) is rendered at each frame's camera, then that frame is inserted (which reuses the
render's projection). Reported: median and 99th-percentile render and insert times, wall-clock
and CPU (the process's own time: this machine is shared), the points held at the end and at most,
and their bytes. Torch uses one thread, as in the server.

Usage: python bench/scene_memory.py [--frames 600] [--sizes 64 128] [--seed 3] [--max-points N] [--stride S]
Prints a table, then one JSON object as its last line (keys ``render_ms_64``, ``insert_ms_64``,
``render_cpu_ms_64``, ``points_64``, ... ``render_ms_128``, ..., and ``load``, the machine's load
average when it ran).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from alaya.engine.game import GameConfig, GameStream  # noqa: E402
from alaya.engine.players import ScriptedPlayer  # noqa: E402
from alaya.models.scene_memory import SceneMemory, SceneMemoryConfig  # noqa: E402


def play(size: int, frames: int, seed: int) -> list[dict]:
    """The game's frames (rgb, depth, K, world_to_camera) under a scripted player."""
    game, player = GameStream(seed, GameConfig(size=size)), ScriptedPlayer(seed)
    out = []
    try:
        for t in range(frames):
            if t:
                game.apply(player.act(game))
            f = game.step()
            out.append({"rgb": game.render_style("golden_sunset"), "depth": f["depth"], "K": f["K"],
                        "view": f["world_to_camera"]})
    finally:
        game.close()
    return out


def run(size: int, frames: int, seed: int, config: SceneMemoryConfig) -> dict:
    shots = play(size, frames, seed)
    memory = SceneMemory(config)
    times: dict[str, list[float]] = {"render": [], "insert": [], "render_cpu": [], "insert_cpu": []}
    held = []
    for t, s in enumerate(shots):
        w0, c0 = time.perf_counter(), time.process_time()
        memory.render(s["K"], s["view"], size, size)
        w1, c1 = time.perf_counter(), time.process_time()
        memory.insert(s["rgb"], s["depth"], s["K"], s["view"], time=t)
        w2, c2 = time.perf_counter(), time.process_time()
        for key, value in (("render", w1 - w0), ("insert", w2 - w1), ("render_cpu", c1 - c0), ("insert_cpu", c2 - c1)):
            times[key].append(value)
        held.append(len(memory))
    ms = lambda xs, q: round(1000 * float(np.percentile(xs, q)), 2)  # noqa: E731
    out = {}
    for key, xs in times.items():
        out[f"{key}_ms_{size}"] = ms(xs, 50)
        out[f"{key}_p99_ms_{size}"] = ms(xs, 99)
    return out | {f"points_{size}": held[-1], f"points_max_{size}": max(held),
                  f"mbytes_{size}": round(memory.nbytes / 2**20, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--max-points", type=int, default=SceneMemoryConfig.max_points)
    ap.add_argument("--stride", type=int, default=1, help="insert every stride-th pixel each way")
    a = ap.parse_args()
    torch.set_num_threads(1)
    config = SceneMemoryConfig(max_points=a.max_points, stride=a.stride)
    result = {"frames": a.frames, "max_points": a.max_points, "stride": a.stride, "load": os.getloadavg()[0]}
    for size in a.sizes:
        r = run(size, a.frames, a.seed, config)
        print(f"{size}x{size}: render {r[f'render_ms_{size}']} ms (p99 {r[f'render_p99_ms_{size}']}, "
              f"CPU {r[f'render_cpu_ms_{size}']}), insert {r[f'insert_ms_{size}']} ms "
              f"(p99 {r[f'insert_p99_ms_{size}']}, CPU {r[f'insert_cpu_ms_{size}']}), "
              f"{r[f'points_{size}']} points held (max {r[f'points_max_{size}']}, {r[f'mbytes_{size}']} MB)")
        result.update(r)
    print(json.dumps(result))


if __name__ == "__main__":
    main()

"""Flash frame budget: where a student frame's CPU time goes, against one teacher call.

A teacher frame is ``2 * steps`` network calls (guided Euler); the student's speed-up over it is
bounded by how much of one frame's work fits beside another's on the machine's cores. This bench
measures, in one process and on the same host:

- the student's parts of a frame, one after the other on one thread (``threads=1`` graphs, as
  the pipeline runs them), over engine frames rendered beforehand: ``engine`` (physics + G-buffer
  raster), ``prepare`` (checks, tiny G-buffer encoder, the frame's own features), ``sample``
  (the context and the student's steps: the chain that depends on the frame before) and
  ``decode`` (the tiny decoder); medians in ms;
- the teacher: one network call on a ``--window``-frame window (fp32, and bf16 autocast on CPUs
  with native bf16), per frame, and a frame's ``2 * --teacher-steps`` calls.

From them: ``bound_fps``, the most frames a second these parts allow on ``--cores`` cores when
the sampler's chain runs on one core and everything else beside it (``1000 / max(sample,
total / cores)``), and ``bound_speedup`` (and ``_bf16``) over a teacher frame's network calls
alone; ``frame_ms_for_100x`` is the student frame's wall time that 100× those calls would need.
An estimate, not the ablation's measurement: the parts are timed one after the other on one
thread (the pipeline's threads keep their caches warmer: its frames ran ~10% faster than
``sample`` here), and the teacher renderer also encodes and decodes (its frames ran 10–25%
slower than its calls alone), so ``bench/flash_ablation.py`` measures higher ratios.

Usage: python bench/flash_budget.py [--student weights/student] [--backend onnx-int8]
                                    [--frames 200] [--window 16] [--teacher-steps 50] [--cores 2]
Prints a table, then one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch


def student_parts(folder: str, backend: str, frames: int, size: int, warm: int = 10) -> dict[str, float]:
    """Median ms of engine, prepare, sample and decode over ``frames`` frames after ``warm``."""
    from alaya.engine.stream import EngineStream, StreamConfig
    from alaya.renderers import StudentRenderer
    session = StudentRenderer.from_pretrained(folder, backend=backend, threads=1).session
    session.set_prompt("a clear sunny noon")
    stream = EngineStream(11, StreamConfig(size=size, rig="fly"))
    gbuffers, engine = [], []
    try:
        for _ in range(frames + warm):
            t0 = time.perf_counter()
            gbuffers.append(stream.step())
            engine.append(time.perf_counter() - t0)
    finally:
        stream.close()
    parts = {"prepare": [], "sample": [], "decode": []}
    for g in gbuffers:
        t0 = time.perf_counter()
        prepared = session.prepare(g)
        t1 = time.perf_counter()
        latents, fresh = session.sample(prepared)
        t2 = time.perf_counter()
        rgb = session.decode(prepared.backend, latents, fresh, prepared.guide)
        t3 = time.perf_counter()
        if rgb.shape != (size, size, 3):
            raise RuntimeError(f"decoded frame has shape {rgb.shape}, expected {(size, size, 3)}")
        for name, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2)):
            parts[name].append(dt)
    out = {"engine": engine[warm:], **{k: v[warm:] for k, v in parts.items()}}
    return {k: float(np.median(v) * 1e3) for k, v in out.items()}


def teacher_call_ms(teacher, window: int, size: int, precision: str, repeats: int = 5) -> float:
    """Median ms of one ``teacher`` network call on a ``window``-frame window of random inputs, at
    ``precision`` (as the teacher renderer calls it)."""
    from alaya.renderers.teacher import precision_autocast
    c, h = teacher.config, size // 8
    z = torch.randn(1, window, c.latent_channels, h, h)
    g = torch.randn(1, window, c.gbuffer_channels, h, h)
    text = torch.randn(1, c.text_dim)
    view = torch.zeros(1, window, c.view_channels, size, size) if c.view_channels else None
    t = torch.full((1,), 0.5)
    times = []
    with torch.no_grad(), precision_autocast(precision):
        for i in range(repeats + 1):
            t0 = time.perf_counter()
            teacher(z, t, g, text, view=view)
            if i:                                    # the first call warms up
                times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1e3)


def budget(parts: dict[str, float], teacher_frame_ms: float, cores: int) -> dict[str, float]:
    """The pipelined bound from a frame's parts (ms) and a teacher frame's network time (ms)."""
    if cores < 1:
        raise ValueError(f"cores must be >= 1, got {cores}")
    total = sum(parts.values())
    frame_ms = max(parts["sample"], total / cores)
    return {"total_ms": total, "other_ms": total - parts["sample"], "bound_frame_ms": frame_ms,
            "bound_fps": 1000 / frame_ms, "bound_speedup": teacher_frame_ms / frame_ms,
            "frame_ms_for_100x": teacher_frame_ms / 100}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--student", default="weights/student")
    p.add_argument("--teacher", default="weights/teacher")
    p.add_argument("--backend", default="onnx-int8", choices=["onnx-int8", "onnx", "torch"])
    p.add_argument("--frames", type=int, default=200)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--window", type=int, default=16, help="the teacher's frames per call")
    p.add_argument("--teacher-steps", type=int, default=50, help="guided Euler steps: 2 calls each")
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    p.add_argument("--teacher-bf16", default="auto", choices=["auto", "on", "off"])
    a = p.parse_args()
    if a.frames < 1 or a.window < 1 or a.teacher_steps < 1:
        raise SystemExit("--frames, --window and --teacher-steps must be >= 1")
    from alaya.engine.raster import share_cores_with_a_model
    from alaya.models.teacher import Teacher
    from alaya.hardware import wants_bf16
    share_cores_with_a_model()
    parts = student_parts(a.student, a.backend, a.frames, a.size)
    torch.set_num_threads(os.cpu_count() or 1)
    calls = 2 * a.teacher_steps
    precisions = ["fp32"] + (["bf16"] if wants_bf16(a.teacher_bf16) else [])
    model = Teacher.from_pretrained(a.teacher).eval()          # loaded once for every precision
    teacher = {}
    for precision in precisions:
        call = teacher_call_ms(model, a.window, a.size, precision)
        teacher[precision] = {"call_ms": call, "call_ms_per_frame": call / a.window,
                              "frame_ms": calls * call / a.window}
    result = {**{f"{k}_ms": v for k, v in parts.items()}, **budget(parts, teacher["fp32"]["frame_ms"], a.cores)}
    if "bf16" in teacher:
        bf16 = budget(parts, teacher["bf16"]["frame_ms"], a.cores)
        result.update(bound_speedup_bf16=bf16["bound_speedup"], frame_ms_for_100x_bf16=bf16["frame_ms_for_100x"])
    result.update(teacher=teacher, teacher_calls=calls, cores=a.cores, backend=a.backend, size=a.size,
                  frames=a.frames, window=a.window)
    print("| part | ms a frame |")
    print("|---|---|")
    for k in parts:
        print(f"| {k} | {parts[k]:.2f} |")
    for precision, t in teacher.items():
        print(f"| teacher call ({precision}), per frame | {t['call_ms_per_frame']:.2f} (a frame: {calls} calls, "
              f"{t['frame_ms']:.0f} ms) |")
    print(f"\nbound on {a.cores} cores: {result['bound_fps']:.1f} FPS = {result['bound_speedup']:.1f}x the teacher's "
          f"network calls" + (f" ({result['bound_speedup_bf16']:.1f}x in bf16)" if "bf16" in teacher else "")
          + f"; 100x needs a frame in {result['frame_ms_for_100x']:.2f} ms")
    print(json.dumps(result))


if __name__ == "__main__":
    main()

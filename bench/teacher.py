"""Teacher benchmark: seconds per generated frame at 128x128 (50 Euler steps with classifier-free
guidance, so 100 network calls per window), parameters, and peak resident memory.

Usage: python bench/teacher.py [--weights weights/teacher] [--frames 16] [--steps 50] [--size 128]
                              [--precision fp32|bf16]

A synthetic G-buffer clip (a live engine stream rendered on the spot when EGL works, random
arrays otherwise) of ``--frames`` frames goes through the full renderer: G-buffer latents, the
sampler, and the decoder; s_per_frame = wall time / frames (torch threads = cores; the network
calls in ``--precision``: fp32 by default, bf16 autocast pays off on CPUs with native bf16).
Without shipped weights the default teacher config is timed with random weights (reported in
``weights``). Prints a line of text, then one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch


def gbuffer_clip(frames: int, size: int) -> tuple[dict, str]:
    try:
        from alaya.engine.stream import EngineStream, StreamConfig
        stream = EngineStream(3, StreamConfig(size=size))
        frames_ = [stream.step() for _ in range(frames)]
        stream.close()
        clip = {k: np.stack([f[k] for f in frames_]) for k in frames_[0] if k != "K"}
        return {**clip, "K": frames_[0]["K"]}, "engine"
    except Exception as err:   # no EGL: the timing does not depend on the content
        print(f"engine unavailable ({err}); timing random G-buffers", file=sys.stderr)
        rng = np.random.default_rng(0)
        n = rng.normal(size=(frames, size, size, 3))
        return {"depth": rng.uniform(1, 20, (frames, size, size)).astype(np.float32),
                "normal": (n / np.linalg.norm(n, axis=-1, keepdims=True)).astype(np.float16),
                "albedo": rng.integers(0, 256, (frames, size, size, 3), dtype=np.uint8),
                "roughness": rng.integers(0, 256, (frames, size, size), dtype=np.uint8),
                "metallic": rng.integers(0, 256, (frames, size, size), dtype=np.uint8)}, "random"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--weights", default="weights/teacher")
    p.add_argument("--autoencoder", default="weights/autoencoder")
    p.add_argument("--frames", type=int, default=16)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--guidance", type=float, default=2.0)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    a = p.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    from alaya.codecs.autoencoder import Autoencoder
    from alaya.data.contract import renderer_input
    from alaya.models.teacher import Teacher, teacher_config
    from alaya.renderers import SamplerConfig, TeacherRenderer

    shipped = (Path(a.weights) / "model.safetensors").exists()
    teacher = Teacher.from_pretrained(a.weights) if shipped else Teacher(teacher_config("small"))
    renderer = TeacherRenderer(teacher, Autoencoder.from_pretrained(a.autoencoder),
                               sampler=SamplerConfig(steps=a.steps, guidance=a.guidance, window=a.frames,
                                                     precision=a.precision))
    clip, source = gbuffer_clip(a.frames, a.size)
    renderer.prompt_encoder.encode("a clear sunny noon")    # load the text model outside the timing
    with torch.no_grad():
        renderer.render(renderer_input(clip, 0, 2), "a clear sunny noon")   # warm-up
        t0 = time.perf_counter()
        frames = renderer.render(clip, "a clear sunny noon")
        seconds = time.perf_counter() - t0
    assert frames.shape == (a.frames, a.size, a.size, 3)
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = {"s_per_frame": round(seconds / a.frames, 4), "params": sum(q.numel() for q in teacher.parameters()),
              "peak_rss_mb": round(rss_kb / 1024, 1), "size": a.size, "steps": a.steps,
              "guidance": a.guidance, "precision": a.precision, "frames": a.frames, "network_calls": 2 * a.steps if a.guidance != 1 else a.steps,
              "weights": a.weights if shipped else "random (no shipped weights)", "gbuffer_source": source,
              "threads": torch.get_num_threads()}
    print(f"teacher: {result['s_per_frame']:.3f} s/frame at {a.size}px, {a.steps} steps, "
          f"guidance {a.guidance}, {a.precision}; {result['params']:,} params; peak RSS {result['peak_rss_mb']} MB")
    print(json.dumps(result))


if __name__ == "__main__":
    main()

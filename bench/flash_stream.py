"""Flash on an unbounded live stream: drift, memory and prompt switching of the final student.

1. Drift and memory: one engine stream of ``--frames`` frames (default 10,000) rendered by the
   student; PSNR against the reference renderer (same style as the prompt) over the first and
   the last ``--window`` frames (500), and resident memory after the first window vs at the end.
2. Prompt switching: for each pair of styles, ``--switch-at`` frames with the first style's
   prompt, then ``set_prompt`` to the second's; the style classifier labels every output frame.
   ``switch_frames`` is how many frames after the switch until it reports the new style and
   keeps reporting it; every input frame must give exactly one output frame (none dropped).

Usage: python bench/flash_stream.py [--student weights/student] [--frames 10000] [--size 128]
Prints a summary, then one JSON object as its last line (keys ``psnr_first``, ``psnr_last``,
``psnr_drift_db``, ``rss_growth_mb``, ``fps``, ``switch_frames_max``, ``dropped_frames``).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch

from alaya.hardware import rss_mb

PAIRS = (("clear_noon", "moonlit_night"), ("neon_night", "snowy_winter"), ("toon", "golden_sunset"),
         ("foggy_morning", "neon_night"))


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2) / 255 ** 2
    return float(10 * np.log10(1 / max(mse, 1e-10)))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--student", default="weights/student")
    p.add_argument("--classifier", default="weights/style_classifier")
    p.add_argument("--frames", type=int, default=10_000)
    p.add_argument("--window", type=int, default=500)
    p.add_argument("--style", default="clear_noon")
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--switch-at", type=int, default=16)
    p.add_argument("--switch-frames", type=int, default=24, help="frames rendered after each switch")
    p.add_argument("--backend", default="onnx-int8", choices=["onnx-int8", "onnx", "torch"])
    a = p.parse_args()
    if a.frames < 2 * a.window:
        raise SystemExit(f"--frames ({a.frames}) must be at least twice --window ({a.window})")
    torch.set_num_threads(os.cpu_count() or 1)
    from tqdm import tqdm

    from alaya.engine.stream import EngineStream, StreamConfig
    from alaya.engine.styles import get_style
    from alaya.evaluation.style_classifier import StyleClassifier
    from alaya.renderers import StudentRenderer

    session = StudentRenderer.from_pretrained(a.student, backend=a.backend).session
    prompt = lambda style: get_style(style).phrasings[0]     # noqa: E731
    session.set_prompt(prompt(a.style))
    stream = EngineStream(21, StreamConfig(size=a.size, rig="fly"))
    first, last, times = [], [], []
    rss_start = None
    try:
        for i in tqdm(range(a.frames), desc="stream", dynamic_ncols=True, mininterval=2):
            t0 = time.perf_counter()
            out = session.step(stream.step())
            times.append(time.perf_counter() - t0)
            if i < a.window or i >= a.frames - a.window:
                (first if i < a.window else last).append(psnr(out, stream.render_style(a.style)))
            if i == a.window - 1:
                rss_start = rss_mb()
        rss_end = rss_mb()
    finally:
        stream.close()

    classifier = StyleClassifier.from_pretrained(a.classifier)
    switches, dropped = {}, 0
    for s_from, s_to in PAIRS:
        stream = EngineStream(5, StreamConfig(size=a.size, rig="orbit"))
        session.reset()
        session.set_prompt(prompt(s_from))
        outs = []
        try:
            for i in range(a.switch_at + a.switch_frames):
                if i == a.switch_at:
                    session.set_prompt(prompt(s_to))
                outs.append(session.step(stream.step()))
        finally:
            stream.close()
        dropped += a.switch_at + a.switch_frames - len(outs)
        labels = classifier.predict(np.stack(outs[a.switch_at:]))
        wrong = [i for i, label in enumerate(labels) if label != s_to]
        switches[f"{s_from}->{s_to}"] = (wrong[-1] + 1) if wrong else 0   # frames until it stays right
        if wrong and wrong[-1] == len(labels) - 1:
            switches[f"{s_from}->{s_to}"] = None                           # never settled
    settled = [v for v in switches.values() if v is not None]
    result = {"psnr_first": float(np.mean(first)), "psnr_last": float(np.mean(last)),
              "psnr_drift_db": float(np.mean(last) - np.mean(first)),
              "rss_growth_mb": rss_end - rss_start, "rss_mb": rss_end, "fps": float(1 / np.median(times)),
              "switch_frames": switches,
              "switch_frames_max": max(settled) if len(settled) == len(switches) else None,
              "dropped_frames": dropped, "frames": a.frames, "window": a.window, "style": a.style,
              "size": a.size, "backend": a.backend}
    print(f"{a.frames} frames: PSNR first {a.window} {result['psnr_first']:.2f} dB, last {a.window} "
          f"{result['psnr_last']:.2f} dB; RSS +{result['rss_growth_mb']:.1f} MB; {result['fps']:.1f} FPS median; "
          f"prompt switch settles in {switches} frames")
    print(json.dumps(result))


if __name__ == "__main__":
    main()

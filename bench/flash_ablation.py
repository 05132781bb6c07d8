"""Flash ablation: the teacher and the student after each distillation stage, in one run, on the
same held-out clips — frames per second end to end (G-buffer in, RGB out), PSNR against the
reference renderer, warping error, sharpness against the reference's (``metrics.sharpness_ratio``:
below 1 blurrier) and style accuracy — then the final student on a live engine
stream (physics + raster + student + decode), median FPS over ``--live-frames`` frames: in a
``StreamPipeline`` as ``alaya play`` runs it (the JSON's ``fps`` and ``speedup_vs_teacher``), and
one frame after the other (``live_sequential``, ``speedup_vs_teacher_sequential``).

Usage:
  python bench/flash_ablation.py [--data data/ds128] [--clips 2] [--frames 12]
      [--stages ar=DIR,guidance=DIR,steps=DIR,meanflow=DIR] [--student weights/student]
      [--compare NAME=DIR,...]
      [--live-frames 1000] [--backend onnx|torch] [--teacher-bf16 auto|on|off]

Without ``--data`` it renders ``--clips`` fresh engine clips from seeds no dataset of ours uses.
Intermediate stages are measured when ``--stages`` names their weights (they are not shipped;
``alaya train student`` writes them); ``--compare`` adds other finished students (rows of their
own, in ``--backend``). The final student runs in ``--backend`` (default
``onnx-int8``: its steps quantized, from the ranges shipped beside the weights); with
``onnx-int8`` the same student in plain ``onnx`` is measured too (row ``tiny-fp32``). Stage settings: ``ar`` samples 8 Euler steps with
guidance 2 (16 calls a frame), ``guidance`` 8 steps, ``steps`` and ``meanflow`` 4 steps, all
with the full codecs in torch; the final student runs the tiny G-buffer encoder and the guided
decoder in ``--backend`` (row ``tiny``), and the same student with the tiny 8x8-block decoder
(row ``tiny-decoder``).
The teacher is the shipped renderer as it runs by default (torch, fp32: its quality numbers are
measured so); on a CPU with native bf16 (``--teacher-bf16 auto``, the default) the same teacher
with its network calls in bf16 autocast is measured too (row ``teacher-bf16``, JSON
``teacher_bf16_fps`` and ``speedup_vs_teacher_bf16``): the teacher at its fastest on this CPU,
the stricter reference for the student's speed-up. Prints a Markdown table, then one JSON object
as its last line (keys ``fps``, ``speedup_vs_teacher``, ``psnr``, ``teacher_psnr``,
``warp_error``, ``teacher_warp_error``, ``style_accuracy`` for the final student, and ``stages``
with every row).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

STAGE_SETTINGS = {"ar": dict(steps=8, guidance=2.0), "guidance": dict(steps=8), "steps": dict(steps=4),
                  "meanflow": dict(steps=4)}


def held_out_data(clips: int, frames: int, size: int) -> str:
    from alaya.data.dataset import read_meta, write_meta
    from alaya.engine.datagen import DatagenConfig, generate_dataset
    root = Path(tempfile.mkdtemp(prefix="alaya-flash-bench-")) / "ds"
    generate_dataset(DatagenConfig(out=str(root), clips=clips, frames=frames, size=size, seed=90_210), progress=False)
    meta = read_meta(root)
    ids = sorted(meta.clips)
    write_meta(root, dataclasses.replace(meta, splits={"train": [], "val": [], "test": ids},
                                         clips={c: {**meta.clips[c], "split": "test"} for c in ids}))
    return str(root)


def live_fps(student_folder: str, frames: int, size: int, backend: str, pipelined: bool = True) -> dict:
    """Median FPS of a live engine stream (physics + G-buffer raster) through the student and the
    tiny decoder over ``frames`` frames after a warm-up. ``pipelined``: as ``alaya play`` runs it,
    in a ``StreamPipeline`` (one thread per graph; frame n + 1 engine-stepped and prepared while
    frame n is sampled and frame n - 1 decoded), a frame's time being the interval between two
    consecutive outputs, and its latency the time from the start of its engine step to its RGB.
    Otherwise one frame after the other on this thread (``RenderSession.step``)."""
    from alaya.engine.stream import EngineStream, StreamConfig
    from alaya.renderers import StudentRenderer
    from alaya.runtime.pipeline import StreamPipeline
    renderer = StudentRenderer.from_pretrained(student_folder, backend=backend, threads=1 if pipelined else None)
    session = renderer.session
    session.set_prompt("a clear sunny noon")
    stream = EngineStream(11, StreamConfig(size=size, rig="fly"))
    warm = 10
    done, starts, engine_ms, failed = [], [], [], []
    try:
        if pipelined:
            with StreamPipeline(session) as pipeline:
                for i in range(frames + warm):
                    t0 = time.perf_counter()
                    g = stream.step()
                    engine_ms.append(time.perf_counter() - t0)
                    starts.append(t0)
                    pipeline.submit(g).add_done_callback(
                        lambda f: done.append(time.perf_counter()) if f.exception() is None else failed.append(f))
        else:
            for i in range(frames + warm):
                t0 = time.perf_counter()
                g = stream.step()
                engine_ms.append(time.perf_counter() - t0)
                starts.append(t0)
                session.step(g)
                done.append(time.perf_counter())
    finally:
        stream.close()
    if failed:
        raise RuntimeError(f"{len(failed)} frames of the live stream failed: {failed[0].exception()!r}")
    times = np.diff(done)[warm:] if pipelined else (np.array(done) - np.array(starts))[warm:]
    latency = (np.array(done) - np.array(starts))[warm:]
    return {"fps": float(1 / np.median(times)), "frame_ms_p50": float(np.median(times) * 1e3),
            "frame_ms_p99": float(np.percentile(times, 99) * 1e3), "engine_ms_p50": float(np.median(engine_ms) * 1e3),
            "latency_ms_p50": float(np.median(latency) * 1e3), "latency_ms_p99": float(np.percentile(latency, 99) * 1e3),
            "frames": frames, "pipelined": pipelined}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", help="dataset folder (its test split); default: fresh engine clips")
    p.add_argument("--clips", type=int, default=2)
    p.add_argument("--frames", type=int, default=12)
    p.add_argument("--size", type=int, default=128, help="frame size of generated clips and the live stream")
    p.add_argument("--teacher", default="weights/teacher")
    p.add_argument("--teacher-steps", type=int, default=50)
    p.add_argument("--autoencoder", default="weights/autoencoder")
    p.add_argument("--stages", default="", help="comma list stage=weights_folder (ar, guidance, steps, meanflow)")
    p.add_argument("--student", default="weights/student", help="the final student (tiny codecs)")
    p.add_argument("--compare", default="", help="comma list name=weights_folder: other finished students (tiny "
                   "codecs, e.g. the one a 'compress' stage started from), measured in --backend")
    p.add_argument("--live-frames", type=int, default=1000)
    p.add_argument("--backend", default="onnx-int8", choices=["onnx-int8", "onnx", "torch"],
                   help="the final student's backend (onnx-int8: its steps quantized; also measured in onnx)")
    p.add_argument("--teacher-bf16", default="auto", choices=["auto", "on", "off"],
                   help="also measure the teacher in bf16 autocast (auto: on CPUs with native bf16)")
    a = p.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    from alaya.engine.raster import share_cores_with_a_model
    share_cores_with_a_model()          # the live stream runs the engine beside the student, as play does
    from alaya.codecs.autoencoder import Autoencoder
    from alaya.data.contract import renderer_input
    from alaya.evaluation.render_eval import RenderEvalConfig, evaluate_renderer
    from alaya.models.student import Student
    from alaya.renderers import SamplerConfig, StudentRenderer, TeacherRenderer
    from alaya.text import PromptEncoder

    data = a.data or held_out_data(a.clips, a.frames, a.size)
    cfg = RenderEvalConfig(data=data, clips=a.clips, frames=a.frames, paraphrases=False)
    encoder = PromptEncoder()
    ae = Autoencoder.from_pretrained(a.autoencoder).eval()
    renderers = {"teacher": TeacherRenderer.from_pretrained(a.teacher, a.autoencoder, prompt_encoder=encoder,
                                                            sampler=SamplerConfig(steps=a.teacher_steps, guidance=2.0,
                                                                                  window=a.frames))}
    from alaya.hardware import wants_bf16
    if wants_bf16(a.teacher_bf16):
        fp32 = renderers["teacher"]           # the same modules, its calls in bf16 autocast
        renderers["teacher-bf16"] = TeacherRenderer(
            fp32.teacher, fp32.autoencoder, prompt_encoder=encoder,
            sampler=SamplerConfig(steps=a.teacher_steps, guidance=2.0, window=a.frames, precision="bf16"))
    for item in filter(None, a.stages.split(",")):
        name, folder = item.split("=", 1)
        if name not in STAGE_SETTINGS:
            raise SystemExit(f"--stages: unknown stage '{name}' (choose from {sorted(STAGE_SETTINGS)})")
        renderers[name] = StudentRenderer(Student.from_pretrained(folder), "full", autoencoder=ae,
                                          prompt_encoder=encoder, **STAGE_SETTINGS[name])
    for item in filter(None, a.compare.split(",")):
        name, folder = item.split("=", 1)
        if name in STAGE_SETTINGS or name in ("teacher", "teacher-bf16", "tiny", "tiny-fp32", "tiny-decoder"):
            raise SystemExit(f"--compare: '{name}' names a row of its own; choose another name")
        renderers[name] = StudentRenderer.from_pretrained(folder, prompt_encoder=encoder, backend=a.backend)
    from alaya.paths import default_weights
    renderers["tiny-decoder"] = StudentRenderer.from_pretrained(  # the same student, the 8x8 block decoder
        a.student, prompt_encoder=encoder, backend=a.backend, decoder=default_weights("tiny_decoder"))
    if a.backend == "onnx-int8":        # the same student with float steps, for the int8 row's cost
        renderers["tiny-fp32"] = StudentRenderer.from_pretrained(a.student, prompt_encoder=encoder, backend="onnx")
    renderers["tiny"] = StudentRenderer.from_pretrained(a.student, prompt_encoder=encoder, backend=a.backend)

    rows = {}
    for name, r in renderers.items():
        r.render(renderer_input(_first_clip(data), 0, 2), "a clear sunny noon")    # warm-up (and ONNX export)
        res = evaluate_renderer(lambda clip, style, prompt, seed: r.render(clip, prompt, seed), cfg, progress=False)
        rows[name] = {"fps": 1 / res["s_per_frame"], "psnr": res["psnr"], "ssim": res["ssim"],
                      "warp_error": res["warp_error"], "style_accuracy": res["style_accuracy"],
                      "sharpness_ratio": res["sharpness_ratio"], "psnr_geometry": res["psnr_geometry"],
                      "block_grid_ratio": res["block_grid_ratio"], "gradient_error": res["gradient_error"],
                      "calls_per_frame": _calls(name, r)}
    live, sequential = {}, {}
    if a.live_frames > 0:
        sequential = live_fps(a.student, a.live_frames, a.size, a.backend, pipelined=False)
        live = live_fps(a.student, a.live_frames, a.size, a.backend, pipelined=True)
    t, s = rows["teacher"], rows["tiny"]
    print("| renderer | calls/frame | FPS (clips) | PSNR | PSNR geometry | SSIM | warp error | sharpness | "
          "block grid | gradient error | style acc |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['calls_per_frame']} | {r['fps']:.2f} | {r['psnr']:.2f} | {r['psnr_geometry']:.2f} | "
              f"{r['ssim']:.3f} | {r['warp_error']:.4f} | {r['sharpness_ratio']:.2f} | {r['block_grid_ratio']:.2f} | "
              f"{r['gradient_error']:.3f} | {r['style_accuracy']:.3f} |")
    for title, run in (("pipelined (StreamPipeline, as alaya play)", live), ("one frame after the other", sequential)):
        if run:
            print(f"\nlive engine stream, final student ({a.backend}), {title}: {run['fps']:.1f} FPS median over "
                  f"{run['frames']} frames (frame p50 {run['frame_ms_p50']:.1f} ms, p99 {run['frame_ms_p99']:.1f} ms; "
                  f"latency p50 {run['latency_ms_p50']:.1f} ms, p99 {run['latency_ms_p99']:.1f} ms; "
                  f"engine {run['engine_ms_p50']:.1f} ms)")
    fps = live.get("fps", s["fps"])
    t16 = rows.get("teacher-bf16")
    print(json.dumps({"fps": fps, "speedup_vs_teacher": fps / t["fps"], "psnr": s["psnr"], "teacher_psnr": t["psnr"],
                      "warp_error": s["warp_error"], "teacher_warp_error": t["warp_error"],
                      "style_accuracy": s["style_accuracy"], "teacher_fps": t["fps"], "clip_fps": s["fps"],
                      "live": live, "live_sequential": sequential,
                      "speedup_vs_teacher_sequential": sequential["fps"] / t["fps"] if sequential else None,
                      "teacher_bf16_fps": t16["fps"] if t16 else None,
                      "speedup_vs_teacher_bf16": fps / t16["fps"] if t16 else None,
                      "backend": a.backend, "size": a.size, "clips": a.clips, "frames": a.frames,
                      "data": data if a.data else "generated", "stages": rows, "threads": torch.get_num_threads()}))


def _first_clip(data: str) -> dict:
    from alaya.data.contract import renderer_input
    from alaya.data.dataset import ClipDataset
    ds = ClipDataset(data)
    return renderer_input(ds.load(ds.ids("test")[0]))


def _calls(name: str, renderer) -> int:
    from alaya.renderers import TeacherRenderer
    if isinstance(renderer, TeacherRenderer):
        s = renderer.sampler
        return s.steps * (2 if s.guidance != 1 else 1)
    return renderer.steps * (2 if renderer.guidance != 1 else 1)


if __name__ == "__main__":
    main()

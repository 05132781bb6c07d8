"""The benchmark scripts run and end with one JSON object holding their documented keys."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def last_json(args):
    out = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_engine_bench_prints_json():
    r = last_json(["bench/engine.py", "--frames", "3", "--sizes", "32", "--seeds", "0"])
    for key in ("physics_ms_32", "gbuffer_ms_32", "physics_gbuffer_fps_32",
                "physics_gbuffer_fps_32_serial", "style_ms_32_toon", "style_ms_32_clear_noon"):
        assert key in r and r[key] > 0


@pytest.mark.skipif(not (ROOT / "weights" / "tiny_decoder" / "model.safetensors").exists(),
                    reason="codec weights not shipped")
def test_codec_bench_prints_json():
    r = last_json(["bench/codecs.py", "--repeats", "2"])
    for key in ("tiny_decoder_ms", "tiny_gbuffer_encoder_ms", "autoencoder_tiny_ms",
                "full_encoder_ms", "full_decoder_ms", "tiny_decoder_params"):
        assert key in r and r[key] > 0


@pytest.mark.skipif(not (ROOT / "weights" / "autoencoder" / "model.safetensors").exists(),
                    reason="codec weights not shipped")
def test_teacher_bench_prints_json():
    r = last_json(["bench/teacher.py", "--frames", "2", "--steps", "2", "--size", "32"])
    assert r["s_per_frame"] > 0 and r["params"] > 100_000 and r["peak_rss_mb"] > 50
    assert r["network_calls"] == 4 and r["size"] == 32 and r["precision"] == "fp32"


@pytest.mark.skipif(not (ROOT / "weights" / "student" / "model.safetensors").exists(),
                    reason="student weights not shipped")
def test_flash_ablation_bench_prints_json():
    r = last_json(["bench/flash_ablation.py", "--clips", "1", "--frames", "2", "--size", "32",
                   "--teacher-steps", "2", "--live-frames", "3", "--compare", "again=weights/student",
                   "--teacher-bf16", "on"])
    for key in ("fps", "speedup_vs_teacher", "psnr", "teacher_psnr", "warp_error", "teacher_warp_error",
                "style_accuracy"):
        assert key in r
    assert r["fps"] > 0 and r["speedup_vs_teacher"] > 1 and 0 <= r["style_accuracy"] <= 1
    assert set(r["stages"]) == {"teacher", "teacher-bf16", "again", "tiny-fp32", "tiny", "tiny-decoder"}
    assert r["live"]["frames"] == 3
    for row in r["stages"].values():
        assert {"psnr_geometry", "block_grid_ratio", "gradient_error"} <= set(row)
    assert r["teacher_bf16_fps"] == r["stages"]["teacher-bf16"]["fps"] > 0
    assert r["speedup_vs_teacher_bf16"] == pytest.approx(r["fps"] / r["teacher_bf16_fps"])
    assert r["stages"]["again"]["psnr"] == r["stages"]["tiny"]["psnr"]     # the same student, the same frames


@pytest.mark.skipif(not (ROOT / "weights" / "student" / "model.safetensors").exists(),
                    reason="student weights not shipped")
def test_flash_stream_bench_prints_json():
    r = last_json(["bench/flash_stream.py", "--frames", "6", "--window", "2", "--size", "32",
                   "--switch-at", "2", "--switch-frames", "2"])
    for key in ("psnr_first", "psnr_last", "psnr_drift_db", "rss_growth_mb", "fps", "dropped_frames"):
        assert key in r
    assert r["dropped_frames"] == 0 and len(r["switch_frames"]) == 4


@pytest.mark.skipif(not (ROOT / "weights" / "world_model" / "model.safetensors").exists(),
                    reason="world-model weights not shipped")
def test_world_bench_prints_json():
    r = last_json(["bench/world.py", "--frames", "5", "--sizes", "64", "128", "--solo-threads", "2"])
    assert r["fps_64"] > 0 and r["fps_128"] > 0 and r["frames"] == 5 and r["solo_threads"] == 2
    assert r["fps_64_shared"] > 0 and r["fps_128_shared"] > 0            # the one-thread graphs, the same session
    assert r["p99_ms_64"] >= r["p50_ms_64"]
    assert np.isfinite(r["rss_growth_mb_128"])


@pytest.mark.skipif(not (ROOT / "weights" / "world_model" / "model.safetensors").exists(),
                    reason="world-model weights not shipped")
def test_play_bench_drives_the_world_model_in_a_real_server():
    r = last_json(["bench/play.py", "--world", "--seconds", "4", "--warmup", "1"])
    assert r["mode"] == "world" and r["backend"] == "onnx" and r["sessions"] == 1
    assert r["fps"] > 0 and r["frames"] > 10 and r["p99_ms"] >= r["p50_ms"] > 0


@pytest.mark.skipif(not (ROOT / "weights" / "student" / "model.safetensors").exists(),
                    reason="student weights not shipped")
def test_serve_bench_prints_json():
    r = last_json(["bench/serve.py", "--frames", "8", "--warmup", "2", "--size", "32"])
    assert r["fps"] > 0 and r["lockstep_fps"] > 0 and r["lockstep_p99_ms"] >= r["lockstep_p50_ms"] > 0
    assert r["streaming"]["frames"] == r["lockstep"]["frames"] == 8


@pytest.mark.skipif(not (ROOT / "weights" / "student" / "model.safetensors").exists(),
                    reason="student weights not shipped")
def test_flash_budget_bench_adds_up():
    """The bound follows from the measured parts: the sampler's chain on one core, the rest of the
    frame's work shared over the cores; the teacher frame is its calls' time."""
    r = last_json(["bench/flash_budget.py", "--frames", "3", "--size", "32", "--window", "2",
                   "--teacher-steps", "3", "--cores", "2", "--teacher-bf16", "on"])
    parts = [r[f"{k}_ms"] for k in ("engine", "prepare", "sample", "decode")]
    assert all(p > 0 for p in parts)
    assert r["total_ms"] == pytest.approx(sum(parts))
    assert r["other_ms"] == pytest.approx(sum(parts) - r["sample_ms"])
    assert r["bound_frame_ms"] == pytest.approx(max(r["sample_ms"], sum(parts) / 2))
    assert r["bound_fps"] == pytest.approx(1000 / r["bound_frame_ms"])
    assert r["teacher_calls"] == 6
    for precision in ("fp32", "bf16"):
        t = r["teacher"][precision]
        assert t["frame_ms"] == pytest.approx(6 * t["call_ms"] / 2)
    assert r["bound_speedup"] == pytest.approx(r["teacher"]["fp32"]["frame_ms"] / r["bound_frame_ms"])
    assert r["frame_ms_for_100x"] == pytest.approx(r["teacher"]["fp32"]["frame_ms"] / 100)
    assert r["bound_speedup_bf16"] == pytest.approx(r["teacher"]["bf16"]["frame_ms"] / r["bound_frame_ms"])

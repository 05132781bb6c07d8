"""The live evaluation's report folder: ``live.json`` (what ``--json`` prints),
``live_minute.gif`` (one live minute, generated beside the real game, upscaled, subsampled to
stay under ``GIF_LIMIT`` bytes), ``live_sharpness.png`` (sharpness over time, generated
against real, per script) and ``live_actions.png`` (each one-shot action's first frames: the real
game, generated, generated without it), each written atomically."""

from __future__ import annotations

import json
import os
from pathlib import Path

import imageio.v3 as iio
import numpy as np
from PIL import Image, ImageDraw

from alaya.evaluation.live_actions import action_sheet
from alaya.evaluation.world_live import public_json
from alaya.io import atomic_path, atomic_write_text

GIF_LIMIT = 5_000_000
GIF_STRIDES = (2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 60)
FPS = 30


def side_by_side(gen: np.ndarray, real: np.ndarray, scale: int, first: int = 1, step: int = 1,
                 fps: float = FPS) -> np.ndarray:
    """uint8 (T, 16 + S*scale, 2*S*scale, 3): each generated frame beside the real one, upscaled
    ``scale`` times (nearest), under a strip naming them and the time of frame ``first + i*step``."""
    if gen.shape != real.shape:
        raise ValueError(f"generated {gen.shape} and real {real.shape} frames disagree")
    T, S = gen.shape[:2]
    big = np.concatenate([gen, real], 2).repeat(scale, 1).repeat(scale, 2)
    head = 16
    out = np.full((T, head + S * scale, 2 * S * scale, 3), 24, np.uint8)
    out[:, head:] = big
    for i in range(T):
        strip = Image.fromarray(out[i, :head])
        draw = ImageDraw.Draw(strip)
        draw.text((3, 2), "generated", fill=(230, 230, 230))
        draw.text((S * scale + 3, 2), "real game", fill=(230, 230, 230))
        t = f"{(first + i * step) / fps:5.1f} s"
        draw.text((2 * S * scale - 6 * len(t) - 3, 2), t, fill=(230, 230, 230))
        out[i, :head] = np.asarray(strip)
    return out


def write_live_gif(gen: np.ndarray, real: np.ndarray, path: Path, limit: int = GIF_LIMIT) -> int:
    """The side-by-side GIF of ``gen`` and ``real`` (frames 1, 2, ...) upscaled 2x, every k-th
    frame with the smallest k of ``GIF_STRIDES`` that stays under ``limit`` bytes, played at real
    time; returns k."""
    for k in GIF_STRIDES:
        frames = side_by_side(gen[k - 1::k], real[k - 1::k], 2, first=k, step=k)
        data = iio.imwrite("<bytes>", frames, extension=".gif", duration=1000 * k / FPS, loop=0)
        if len(data) < limit or k == GIF_STRIDES[-1]:
            break
    with atomic_path(path, keep_suffix=True) as tmp:
        tmp.write_bytes(data)
    return k


def sharpness_plot(result: dict, path: Path) -> None:
    """Per script: mean Laplacian variance per frame over the scenes, generated against real (log
    scale), with the windows and their ratios."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["series"])
    fig, axes = plt.subplots(len(names), 1, figsize=(8, 2.6 * len(names)), squeeze=False)
    for ax, name in zip(axes[:, 0], names):
        s, info = result["series"][name], result["scripts"][name]
        t = np.arange(1, len(s["gen"]) + 1)
        ax.semilogy(t, np.maximum(s["real"], 1e-6), color="0.35", linewidth=0.8, label="real game")
        ax.semilogy(t, np.maximum(s["gen"], 1e-6), color="#c44e52", linewidth=0.8, label="generated")
        for (a, b), r in zip(info["windows"], info["sharpness_windows"]):
            ax.axvline(a - 0.5, color="0.8", linewidth=0.6, zorder=0)
            ax.text((a + b) / 2, 1.0, f"{r:.2f}", transform=ax.get_xaxis_transform(), ha="center", va="top",
                    fontsize=7)
        for mark in ("still_frames", "turning_point", "back"):
            if mark == "still_frames" and mark in info:
                ax.axvspan(info["frames"] - info[mark] + 0.5, info["frames"] + 0.5, color="#dde8f5", zorder=0)
            elif mark in info:
                ax.axvline(info[mark], color="#4c72b0", linestyle=":", linewidth=0.8)
        ax.set_title(f"{name}: {info['scenes']} scene(s); generated / real per window above", fontsize=9)
        ax.set_ylabel("Laplacian variance", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc="lower left")
    axes[-1, 0].set_xlabel("frame")
    fig.tight_layout()
    with atomic_path(path, keep_suffix=True) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)


def write_live_report(result: dict, folder: str | os.PathLike[str]) -> dict[str, Path]:
    """``live.json``, ``live_sharpness.png`` and (when a minute was kept) ``live_minute.gif`` in
    ``folder``; returns their paths by name."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = {"json": folder / "live.json", "plot": folder / "live_sharpness.png"}
    gif = result.get("gif") or {}
    if gif:
        out["gif"] = folder / "live_minute.gif"
        stride = write_live_gif(gif["generated"], gif["real"], out["gif"])
        result.setdefault("config", {})["gif"] = {"scene": gif["scene"], "script": gif["script"], "stride": stride}
    if result.get("action_frames"):
        out["actions"] = folder / "live_actions.png"
        with atomic_path(out["actions"], keep_suffix=True) as tmp:
            Image.fromarray(action_sheet(result["action_frames"])).save(tmp, format="PNG")
    atomic_write_text(out["json"], json.dumps(public_json(result), indent=2) + "\n")
    if result.get("series"):
        sharpness_plot(result, out["plot"])
    return out

"""The world-model report: ``results.json``, ``report.md``, PSNR-vs-horizon and long-rollout
plots, a contact sheet (real vs generated over the horizon), out-and-back loop frames and a GIF
of the long rollout, written atomically into one folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import imageio.v3 as iio
import numpy as np
from PIL import Image, ImageDraw

from alaya.evaluation.world_eval import public_json
from alaya.io import atomic_path, atomic_write_text


def _save_png(image: Image.Image, path: Path) -> None:
    with atomic_path(path, keep_suffix=True) as tmp:
        image.save(tmp)


def contact_sheet(samples: list[dict]) -> Image.Image:
    """Two rows per sample (real, generated), one column per horizon step; the start frame
    (real) opens both rows."""
    h, w = samples[0]["real"].shape[1:3]
    n = samples[0]["real"].shape[0]
    label_w, head_h = 150, 16
    sheet = Image.new("RGB", (label_w + w * n, head_h + 2 * h * len(samples)), (24, 24, 24))
    draw = ImageDraw.Draw(sheet)
    for k in range(n):
        draw.text((label_w + k * w + 2, 2), "start" if k == 0 else str(k), fill=(230, 230, 230))
    for i, s in enumerate(samples):
        gen = np.concatenate([s["real"][:1], s["generated"]])
        for r, (label, frames) in enumerate((("real", s["real"]), ("generated", gen))):
            y = head_h + (2 * i + r) * h
            draw.text((4, y + h // 2 - 6), f"{s['episode'][:12]} {s['style'][:8]}\n{label}"
                      if r == 0 else label, fill=(230, 230, 230))
            for k, f in enumerate(frames):
                sheet.paste(Image.fromarray(f), (label_w + k * w, y))
    return sheet


def loop_sheet(loop_samples: dict[str, dict[str, np.ndarray]]) -> Image.Image:
    """One row per loop kind: start | turning point | return (small frames upscaled to >= 96 px)."""
    cols = ("start", "turning_point", "return")
    h0 = next(iter(loop_samples.values()))["start"].shape[0]
    h = w = h0 * max(1, -(-96 // h0))
    label_w, head_h = 60, 16
    sheet = Image.new("RGB", (label_w + w * len(cols), head_h + h * len(loop_samples)), (24, 24, 24))
    draw = ImageDraw.Draw(sheet)
    for j, c in enumerate(cols):
        draw.text((label_w + j * w + 2, 2), c.replace("_", " "), fill=(230, 230, 230))
    for i, (kind, frames) in enumerate(loop_samples.items()):
        draw.text((4, head_h + i * h + h // 2 - 6), kind, fill=(230, 230, 230))
        for j, c in enumerate(cols):
            tile = Image.fromarray(frames[c]).resize((w, h), Image.NEAREST)
            sheet.paste(tile, (label_w + j * w, head_h + i * h))
    return sheet


def _plots(result: dict, folder: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    H = result["config"]["horizon"]
    k = np.arange(1, H + 1)
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for key, label, style in (("psnr", "model, true actions", "-o"), ("psnr_shuffled", "model, shuffled actions", "--"),
                              ("baseline_psnr", "copy last frame", ":k")):
        ax.plot(k, [result[f"{key}_step{i}"] for i in k], style, label=label, markersize=3)
    ax.set_xlabel("horizon step")
    ax.set_ylabel("PSNR (dB)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    _save_fig(fig, folder / "psnr_horizon.png")

    series = result["rollout_series"]
    w = result["rollout_window_used"]
    n = len(series["brightness"])
    fig, axes = plt.subplots(3, 1, figsize=(7, 6), sharex=True)
    colour = np.asarray(series["colour"])
    for ax, (title, ys) in zip(axes, (("brightness (mean luma)", [series["brightness"]]),
                                      ("sharpness (Laplacian variance)", [series["sharpness"]]),
                                      ("mean colour", [colour[:, 0], colour[:, 1], colour[:, 2]]))):
        for y, c in zip(ys, ("#4c72b0",) if len(ys) == 1 else ("r", "g", "b")):
            ax.plot(np.arange(n), y, color=c, linewidth=0.7)
        ax.axvspan(0, w, color="0.85", zorder=0)
        ax.axvspan(n - w, n, color="0.85", zorder=0)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=7)
    axes[-1].set_xlabel("frame")
    fig.tight_layout()
    _save_fig(fig, folder / "rollout.png")


def _save_fig(fig, path: Path) -> None:
    import matplotlib.pyplot as plt
    with atomic_path(path, keep_suffix=True) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)


def write_gif(frames: np.ndarray, path: Path, fps: int = 16) -> None:
    with atomic_path(path, keep_suffix=True) as tmp:
        iio.imwrite(tmp, frames, extension=".gif", duration=1000 / fps, loop=0)


def _fmt(v) -> str:
    return "—" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)


def write_world_report(result: dict, folder: str | os.PathLike, title: str) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    data = public_json(result)
    atomic_write_text(folder / "results.json", json.dumps({**data, "rollout_series": result["rollout_series"]},
                                                          indent=2))
    _plots(result, folder)
    _save_png(contact_sheet(result["samples"]), folder / "contact_sheet.png")
    if result["loop_samples"]:          # loops the data's actions cannot play are skipped
        _save_png(loop_sheet(result["loop_samples"]), folder / "loops.png")
    write_gif(result["rollout_head"], folder / "rollout.gif")
    cfg, H = data["config"], data["config"]["horizon"]
    headline = ["psnr_step1", f"psnr_step{H}", f"baseline_psnr_step{H}", f"ssim_step{H}", "psnr_mean",
                "psnr_shuffled_mean", "delta_psnr_actions", "idm_accuracy_real", "idm_accuracy_generated",
                "idm_ratio", "idm_action_recall_ratio_min", "late_early_sharpness_ratio", "late_early_brightness_ratio",
                "colour_drift",
                "game_late_early_sharpness_ratio", "game_late_early_brightness_ratio", "game_colour_drift",
                "game_start_psnr", "loop_turn_psnr_turn", "loop_turn_psnr_return", "loop_move_psnr_turn",
                "loop_move_psnr_return", *sorted(k for k in data if k.startswith("still_psnr_step")),
                "still_sharpness_ratio", "s_per_frame"]
    lines = [f"# {title}", "",
             f"Episodes: {', '.join(data['episodes'])}; {cfg['windows']} windows of {H} steps per episode "
             f"and style ({sum(v['windows'] for v in data['per_style'].values())} in all), seed {cfg['seed']}; "
             f"long rollout {cfg['rollout_frames']} frames; loops of {cfg['loop_frames']} + "
             f"{cfg['loop_frames']} frames and standing still {cfg.get('still_frames', 0)} frames from "
             f"{cfg['loops']} starts.", "",
             "| metric | value |", "|---|---|",
             *[f"| {k} | {_fmt(data[k])} |" for k in headline if k in data], ""]
    styles = data["per_style"]
    if len(styles) > 1:
        cols = [k for k in next(iter(styles.values())) if k != "windows"]
        lines += ["## Per style", "", "| style | windows | " + " | ".join(cols) + " |",
                  "|---" * (len(cols) + 2) + "|"]
        lines += [f"| {s} | {v['windows']} | " + " | ".join(_fmt(v.get(k)) for k in cols) + " |"
                  for s, v in styles.items()]
        lines.append("")
    lines += ["## Replay over the horizon", "", "![psnr vs horizon](psnr_horizon.png)", "",
              "Rows: real frames, then the model's from the same start frame with the true actions.", "",
              "![contact sheet](contact_sheet.png)", "",
              "## Long rollout", "", f"Shaded: the first and last {data['rollout_window_used']} frames "
              "compared by the ratios.", "", "![rollout](rollout.png)", "",
              f"First {len(result['rollout_head'])} frames: ![rollout gif](rollout.gif)", "",
              "## Out-and-back loops", "", "Start, turning point, return (first start frame).", "",
              "![loops](loops.png)", ""]
    path = folder / "report.md"
    atomic_write_text(path, "\n".join(lines))
    return path

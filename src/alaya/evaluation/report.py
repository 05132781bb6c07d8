"""The evaluation report: ``results.json``, ``report.md``, a side-by-side sheet of frames and
per-style bar charts, written atomically into one folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from alaya.evaluation.render_eval import public_json
from alaya.io import atomic_path, atomic_write_text

COLUMNS = ("albedo", "reference", "output", "paraphrase")


def side_by_side(samples: dict[str, dict[str, np.ndarray]]) -> Image.Image:
    """One row per style: G-buffer albedo | reference | output | output for a paraphrase."""
    cols = [c for c in COLUMNS if any(c in s for s in samples.values())]
    h, w = next(iter(samples.values()))["reference"].shape[:2]
    label_w, head_h = 110, 16
    sheet = Image.new("RGB", (label_w + w * len(cols), head_h + h * len(samples)), (24, 24, 24))
    draw = ImageDraw.Draw(sheet)
    for j, c in enumerate(cols):
        draw.text((label_w + j * w + 4, 2), c, fill=(230, 230, 230))
    for i, (style, frames) in enumerate(samples.items()):
        draw.text((4, head_h + i * h + h // 2 - 6), style, fill=(230, 230, 230))
        for j, c in enumerate(cols):
            if c in frames:
                sheet.paste(Image.fromarray(frames[c]), (label_w + j * w, head_h + i * h))
    return sheet


def per_style_plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per = result["per_style"]
    styles = list(per)
    keys = [k for k in ("psnr", "psnr_geometry", "ssim", "sharpness_ratio", "block_grid_ratio", "style_accuracy",
                        "style_accuracy_paraphrase", "warp_error")
            if k in per[styles[0]]]
    fig, axes = plt.subplots(1, len(keys), figsize=(3.3 * len(keys), 3.2), squeeze=False)
    for ax, k in zip(axes[0], keys):
        ax.bar(range(len(styles)), [per[s][k] for s in styles], color="#4c72b0")
        if k == "warp_error":
            ax.plot(range(len(styles)), [per[s]["reference_warp_error"] for s in styles], "k_",
                    markersize=14, label="reference")
            ax.legend(fontsize=7)
        ax.set_xticks(range(len(styles)), [s.replace("_", "\n") for s in styles], fontsize=6)
        ax.set_title(k, fontsize=9)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    with atomic_path(path, keep_suffix=True) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)


def write_report(result: dict, folder: str | os.PathLike, title: str) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    data = public_json(result)
    atomic_write_text(folder / "results.json", json.dumps(data, indent=2))
    sheet = side_by_side(result["samples"])
    with atomic_path(folder / "side_by_side.png", keep_suffix=True) as tmp:
        sheet.save(tmp)
    per_style_plot(result, folder / "per_style.png")
    cols = [k for k in data["per_style"][next(iter(data["per_style"]))]]
    lines = [f"# {title}", "",
             f"Data: `{data['config']['data']}`, split `{data['config']['split']}`, clips "
             f"{', '.join(data['clips'])}, {data['config']['frames']} frames each.", "",
             f"Seconds per generated frame: {data['s_per_frame']:.3f}", "",
             "| style | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for s, v in data["per_style"].items():
        lines.append(f"| {s} | " + " | ".join(f"{v[k]:.4g}" for k in cols) + " |")
    lines.append("| **all** | " + " | ".join(f"**{data[k]:.4g}**" for k in cols) + " |")
    lines += ["", "Columns: G-buffer albedo, reference render, output for a training phrasing, output "
              "for a held-out paraphrase (middle frame of the first clip).", "",
              "![side by side](side_by_side.png)", "", "![per style](per_style.png)", ""]
    path = folder / "report.md"
    atomic_write_text(path, "\n".join(lines))
    return path

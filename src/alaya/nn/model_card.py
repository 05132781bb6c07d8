"""MODEL_CARD.md for a ``save_pretrained`` folder: what it is, data, steps, time, hardware,
metrics — filled from the folder's config.json and its training run's metrics.jsonl."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

from alaya.io import atomic_write_text
from alaya.nn.pretrained import read_config


def _training_time(run_dir: Path) -> float | None:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return None
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows[-1].get("elapsed_s") if rows else None


def write_model_card(folder: str | os.PathLike, title: str, summary: str, usage: str,
                     data: str, notes: str = "") -> Path:
    folder = Path(folder)
    meta = read_config(folder)
    trained = meta.get("trained", {})
    run_dir = Path(trained.get("run_dir", ""))
    seconds = (60 * float(trained["wall_minutes"]) if "wall_minutes" in trained     # runs in several chunks
               else _training_time(run_dir) if trained.get("run_dir") else None)
    weights = folder / "model.safetensors"
    from safetensors import safe_open
    with safe_open(str(weights), "pt") as f:
        n_params = sum(_numel(f.get_slice(k).get_shape()) for k in f.keys())
    metrics = meta.get("metrics", {})
    lines = [
        f"# {title}", "", summary, "",
        "## Use", "", "```python", usage.strip(), "```", "",
        "## Architecture", "", f"`{meta['class']}` with config:", "", "```json",
        json.dumps(meta["config"], indent=2), "```", "",
        f"Parameters: {n_params:,} ({weights.stat().st_size / 1e6:.2f} MB as "
        f"{meta.get('stored_dtype', 'float32')} safetensors).", "",
        "## Training", "",
        f"- Data: {data}",
        f"- Steps: {trained.get('steps', '?')}, batch size {trained.get('batch_size', '?')}"
        + (f", {trained['pairs']} cached frame pairs" if "pairs" in trained else "")
        + (f", {trained['crop']}px crops" if "crop" in trained else ""),
        f"- Wall time: {seconds / 60:.1f} min" if seconds else "- Wall time: see the run folder",
        f"- Hardware: {trained['hardware']}" if "hardware" in trained
        else f"- Hardware: {os.cpu_count()}-core {platform.machine()} CPU, PyTorch fp32, no GPU",
        "",
        "## Metrics (test split)", "", "| metric | value |", "|---|---|",
        *[f"| {k} | {v:.4g} |" for k, v in metrics.get("test", {}).items()],
        "", notes.strip(), "",
    ]
    path = folder / "MODEL_CARD.md"
    atomic_write_text(path, "\n".join(lines))
    return path


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n

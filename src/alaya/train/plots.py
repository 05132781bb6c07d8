"""Loss curves of a run folder: ``metrics.jsonl`` -> ``metrics.png`` (one panel per metric)
and ``metrics.csv`` (one column per metric, for spreadsheets and pandas)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from alaya.io import atomic_path, atomic_write_text

SKIP = {"step", "elapsed_s"}


def read_metrics(run_dir: str | os.PathLike) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:        # a line cut short by a kill
                continue
    return rows


def write_csv(rows: list[dict], path: Path) -> None:
    import csv
    import io
    keys = ["step"] + sorted({k for r in rows for k in r} - {"step"})
    buf = io.StringIO()
    w = csv.DictWriter(buf, keys)
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(path, buf.getvalue())


def plot_metrics(run_dir: str | os.PathLike, out: str | os.PathLike | None = None) -> Path | None:
    """Write the run's curves (log scale for losses) to ``out`` (default RUN/metrics.png), and
    RUN/metrics.csv."""
    rows = read_metrics(run_dir)
    if not rows:
        return None
    write_csv(rows, Path(run_dir) / "metrics.csv")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted({k for r in rows for k in r} - SKIP)
    fig, axes = plt.subplots(1, len(keys), figsize=(3.2 * len(keys), 2.8), squeeze=False)
    for ax, key in zip(axes[0], keys):
        pts = [(r["step"], r[key]) for r in rows if key in r and r[key] is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="." if len(pts) < 30 else None)
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
        if "loss" in key and all(p[1] > 0 for p in pts):
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(out) if out else Path(run_dir) / "metrics.png"
    with atomic_path(out, keep_suffix=True) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)
    return out

"""Look at a dataset: a text summary, a contact sheet of every channel, and animated GIFs.

``inspect_dataset(root, out_dir)`` writes, for one clip (default: the first test clip),
``summary.txt``, ``<clip_id>_sheet.png`` (rows: frames; columns: every G-buffer channel and
every style), ``<clip_id>_rgb_<style>.gif`` per style and ``<clip_id>_gbuffer.gif``
(albedo | normal | depth). PIL merges identical consecutive GIF frames (keeping the total
duration), so a fully static clip yields fewer GIF frames than T.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from alaya.data.dataset import CLIPS_DIR, ClipDataset
from alaya.data.visualize import channel_images, depth_image, normal_image

LABEL_H = 14  # pixels of label strip above the columns
MARGIN_W = 34  # pixels of frame-number strip left of the rows
MIN_TILE = 64  # tiles are upscaled (nearest) to at least this width


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "style"


def _frame_rows(T: int, frames: int) -> list[int]:
    return sorted(set(np.linspace(0, T - 1, max(1, min(frames, T))).round().astype(int).tolist()))


def write_contact_sheet(
    clip_arrays: Mapping[str, np.ndarray], out_png: str | os.PathLike[str], frames: int = 4
) -> Path:
    """A PNG grid: rows are ``frames`` evenly spaced frames, columns every channel and style,
    each column labelled. Returns the path written."""
    images = channel_images(clip_arrays)
    T, H, W = clip_arrays["depth"].shape
    scale = max(1, -(-MIN_TILE // W))
    tw, th = W * scale, H * scale
    rows = _frame_rows(T, frames)
    sheet = Image.new("RGB", (MARGIN_W + tw * len(images), LABEL_H + th * len(rows)), "white")
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default()
    for c, (label, stack) in enumerate(images.items()):
        x = MARGIN_W + c * tw
        draw.text((x + 2, 1), label[: max(3, tw // 6)], fill="black", font=font)
        for r, t in enumerate(rows):
            tile = Image.fromarray(stack[t]).resize((tw, th), Image.Resampling.NEAREST)
            sheet.paste(tile, (x, LABEL_H + r * th))
    for r, t in enumerate(rows):
        draw.text((2, LABEL_H + r * th + 2), f"t={t}", fill="black", font=font)
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(out_png)
    return out_png


def _save_gif(stack: np.ndarray, path: Path, scale: int, fps: float) -> Path:
    """(T, H, W, 3) uint8 -> animated GIF, looping forever."""
    T, H, W, _ = stack.shape
    frames = [Image.fromarray(f).resize((W * scale, H * scale), Image.Resampling.NEAREST)
              for f in stack]
    frames[0].save(path, save_all=True, append_images=frames[1:], loop=0,
                   duration=max(1, round(1000 / fps)))
    return path


def write_style_gifs(
    clip_arrays: Mapping[str, np.ndarray], out_dir: str | os.PathLike[str], scale: int = 2,
    *, fps: float = 30.0, prefix: str = "",
) -> dict[str, Path]:
    """One GIF per style (``<prefix>rgb_<style>.gif``) plus ``<prefix>gbuffer.gif`` showing
    albedo | normal | depth side by side, frame duration 1000 / fps ms.
    Returns {"rgb:<style>": path, ..., "gbuffer": path}."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for style, rgb in zip(clip_arrays["styles"], clip_arrays["rgb"]):
        path = out_dir / f"{prefix}rgb_{_safe_name(str(style))}.gif"
        out[f"rgb:{style}"] = _save_gif(rgb, path, scale, fps)
    side = np.concatenate([
        clip_arrays["albedo"], normal_image(clip_arrays["normal"]),
        depth_image(clip_arrays["depth"], clip_arrays["mask"]),
    ], axis=2)  # (T, H, 3W, 3)
    out["gbuffer"] = _save_gif(side, out_dir / f"{prefix}gbuffer.gif", scale, fps)
    return out


def _value_range(arr: np.ndarray) -> str:
    if arr.dtype.kind == "U":
        return ", ".join(str(s) for s in arr)
    a = arr.astype(np.float64)
    finite = a[np.isfinite(a)]
    rng = f"{finite.min():.4g}..{finite.max():.4g}" if finite.size else "no finite values"
    return rng + ("" if finite.size == a.size else f" ({a.size - finite.size} non-finite)")


def summarize(root: str | os.PathLike[str]) -> str:
    """A multi-line text summary of a dataset folder."""
    ds = ClipDataset(root)
    m = ds.meta
    clips_dir = Path(root) / CLIPS_DIR
    size = sum(p.stat().st_size for p in clips_dir.glob("*.npz")) if clips_dir.is_dir() else 0
    lines = [
        f"dataset {m.name!r} (schema {m.schema_version}) at {root}",
        f"clips: {len(ds)} ("
        + ", ".join(f"{s} {len(ids)}" for s, ids in m.splits.items()) + ")",
        f"resolution: {m.width}x{m.height} (WxH), {m.frames} frames per clip at {m.fps:g} fps",
        f"styles ({len(m.styles)}): {', '.join(m.styles)}",
        f"materials ({len(m.materials)}): {', '.join(x['name'] for x in m.materials)}",
        f"actions: {', '.join(m.actions) if m.actions else 'none'}",
        f"size on disk: {size / 2**20:.2f} MiB",
    ]
    ids = ds.ids()
    if ids:
        lines.append(f"first clip {ids[0]}:")
        for key, arr in ds.load(ids[0]).items():
            lines.append(f"  {key:16s} {str(arr.dtype):8s} {str(arr.shape):22s} "
                         f"{_value_range(arr)}")
    return "\n".join(lines)


def inspect_dataset(
    root: str | os.PathLike[str], out_dir: str | os.PathLike[str], clip_id: str | None = None
) -> dict[str, Path]:
    """Summary, contact sheet and GIFs for one clip (default: first test clip, else first
    clip). Returns {"summary", "contact_sheet", "gbuffer", "rgb:<style>"...: path}."""
    ds = ClipDataset(root)
    if clip_id is None:
        candidates = ds.ids("test") or ds.ids()
        if not candidates:
            raise ValueError(f"{root}: dataset has no clips")
        clip_id = candidates[0]
    clip = ds.load(clip_id)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = out_dir / "summary.txt"
    summary.write_text(summarize(root) + "\n", encoding="utf-8")
    out = {"summary": summary,
           "contact_sheet": write_contact_sheet(clip, out_dir / f"{clip_id}_sheet.png")}
    gifs = write_style_gifs(clip, out_dir, fps=ds.meta.fps, prefix=f"{clip_id}_")
    out.update(gifs)
    return out

"""Memory-only baseline: what the scene memory (``alaya.models.scene_memory``) gives a world model
for free, on recorded game episodes with depth (``alaya record game``, docs/world.md).

Frozen: for each episode of the split, the true frames 0 .. N-1 (``--feed``) go into a fresh
memory; frames N .. T-1 are then rendered from the memory alone at their recorded poses. Per
frame: coverage (of the pixels with geometry, true depth > 0; the sky is never stored) and PSNR
on the covered pixels against the true frame. Reported as curves over the frames since feeding
stopped, and for two kinds of frames:

* standing still: the camera where it was at frame N-1 (within 1 cm and 0.1 degrees); the world
  may still move (bodies settling, effects);
* walking back: the camera within 0.5 m and 20 degrees of a fed pose, after it had been away
  (more than 1 m or 60 degrees from every fed pose). Scripted players seldom come back, so few
  frames qualify; the revisits below measure the same on every episode.

Rolling (``--rolling``): every true frame up to t-1 is in the memory when it renders frame t, as
in play with a perfect model: what the memory covers of the next frame, and how well. Then, with
the whole episode in the memory, revisits: the memory rendered at the poses of frames 0, 30, 60,
... (the player long gone from there) against those true frames.

Usage: python bench/memory_baseline.py --data /work/data/episodes128 [--split test] [--feed 30]
                                       [--rolling] [--replace]
                                       [--picture docs/reports/world/memory_baseline.png]
Prints a table, then one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from alaya.data.episodes import EpisodeDataset  # noqa: E402
from alaya.evaluation.metrics import psnr_masked  # noqa: E402
from alaya.io import atomic_path  # noqa: E402
from alaya.models.scene_memory import SceneMemory, SceneMemoryConfig  # noqa: E402

STILL = (0.01, 0.1)           # metres, degrees: the same pose
BACK, AWAY = (0.5, 20.0), (1.0, 60.0)


def pose_gap(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Camera distance (metres) and rotation angle (degrees) between view matrices a (4, 4) and
    each of b (M, 4, 4)."""
    eye = lambda m: -np.swapaxes(m[..., :3, :3], -1, -2) @ m[..., :3, 3:]  # noqa: E731
    dist = np.linalg.norm((eye(b) - eye(a))[..., 0], axis=-1)
    rel = b[..., :3, :3] @ a[:3, :3].T
    cos = np.clip((np.trace(rel, axis1=-2, axis2=-1) - 1) / 2, -1, 1)
    return dist, np.degrees(np.arccos(cos))


def frame_stats(out, rgb: np.ndarray, depth: np.ndarray) -> tuple[float, float]:
    """(coverage of the pixels with geometry, PSNR on the covered pixels)."""
    solid = depth > 0
    cov = out.coverage[0].numpy() > 0
    coverage = float(cov[solid].mean()) if solid.any() else float("nan")
    real = torch.from_numpy(rgb).permute(2, 0, 1).float()[None] / 255
    return coverage, psnr_masked(out.rgb[None], real, cov[None])


def frozen(ep: dict, style: int, feed: int, config: SceneMemoryConfig) -> dict:
    rgb, depth, views, K = ep["rgb"][style], ep["depth"].astype(np.float32), ep["world_to_camera"], ep["K"]
    T, H, W, _ = rgb.shape
    memory = SceneMemory(config)
    for t in range(feed):
        memory.insert(rgb[t], depth[t], K, views[t], time=t)
    rows, away = [], False
    for t in range(feed, T):
        out = memory.render(K, views[t], H, W)
        coverage, psnr = frame_stats(out, rgb[t], depth[t])
        dist, angle = pose_gap(views[t].astype(np.float64), views[:feed].astype(np.float64))
        away |= bool(((dist > AWAY[0]) | (angle > AWAY[1])).all())
        kind = ("still" if dist[-1] < STILL[0] and angle[-1] < STILL[1] else
                "back" if away and ((dist < BACK[0]) & (angle < BACK[1])).any() else "")
        rows.append({"t": t - feed + 1, "coverage": coverage, "psnr": psnr, "kind": kind, "out": out})
    return {"rows": rows, "points": len(memory), "mbytes": memory.nbytes / 2**20}


def rolling(ep: dict, style: int, config: SceneMemoryConfig) -> dict:
    rgb, depth, views, K = ep["rgb"][style], ep["depth"].astype(np.float32), ep["world_to_camera"], ep["K"]
    T, H, W, _ = rgb.shape
    memory = SceneMemory(config)
    memory.insert(rgb[0], depth[0], K, views[0], time=0)
    rows, insert_s, render_s = [], [], []
    for t in range(1, T):
        t0 = time.perf_counter()
        out = memory.render(K, views[t], H, W)
        t1 = time.perf_counter()
        memory.insert(rgb[t], depth[t], K, views[t], time=t)
        insert_s.append(time.perf_counter() - t1)
        render_s.append(t1 - t0)
        coverage, psnr = frame_stats(out, rgb[t], depth[t])
        dist, angle = pose_gap(views[t].astype(np.float64), views[t - 1:t].astype(np.float64))
        rows.append({"coverage": coverage, "psnr": psnr, "still": bool(dist[0] < STILL[0] and angle[0] < STILL[1])})
    revisits = []
    for s in range(0, T - 60, 30):                         # the whole episode remembered, seen again
        out = memory.render(K, views[s], H, W)
        coverage, psnr = frame_stats(out, rgb[s], depth[s])
        revisits.append({"ago": T - 1 - s, "coverage": coverage, "psnr": psnr, "frame": s,
                         "out": out if s == 0 else None})
    return {"rows": rows, "revisits": revisits, "points": len(memory),
            "insert_ms": 1000 * float(np.median(insert_s)), "render_ms": 1000 * float(np.median(render_s))}


def mean(xs) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return round(float(np.mean(xs)), 3) if xs else float("nan")


def holes(img: np.ndarray, covered: np.ndarray) -> np.ndarray:
    """``img`` (H, W, 3) uint8 with the uncovered pixels shown as a grey checker."""
    H, W = covered.shape
    y, x = np.mgrid[0:H, 0:W]
    checker = np.where(((y // 4 + x // 4) % 2)[..., None] == 0, 90, 140).astype(np.uint8)
    return np.where(covered[..., None], img, checker)


def picture(cases: list[tuple[str, dict, list[dict], dict | None, int]], path: Path, scale: int = 2) -> None:
    """One row per episode: at a few moments the true frame above, the memory's render below;
    the frozen memory at +1, +15, +60, +150, +270 frames, then (with ``--rolling``) the whole
    episode's memory seen from frame 0's pose."""
    tiles = []
    for eid, ep, rows, revisit, style in cases:
        rgb, feed = ep["rgb"][style], len(ep["rgb"][style]) - len(rows)
        picks = [(f"+{rows[i]['t']}", rows[i], feed + i) for i in (0, 14, 59, 149, len(rows) - 1)]
        if revisit is not None:
            picks.append(("all 300, at frame 0", revisit, 0))
        column = []
        for label, r, frame in picks:
            out = (r["out"].rgb.permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)
            pair = np.concatenate([rgb[frame], holes(out, r["out"].coverage[0].numpy() > 0)], 0)
            img = Image.fromarray(pair).resize((pair.shape[1] * scale, pair.shape[0] * scale), Image.NEAREST)
            draw = ImageDraw.Draw(img)
            for xy, text in (((3, 2), f"{eid} {label}"),
                             ((3, img.height // 2 + 2), f"cov {r['coverage']:.2f}  {r['psnr']:.1f} dB")):
                draw.text((xy[0] + 1, xy[1] + 1), text, fill=(0, 0, 0))        # a shadow: legible on the sky
                draw.text(xy, text, fill=(255, 255, 255))
            column.append(np.asarray(img))
        tiles.append(np.concatenate([np.pad(c, ((0, 0), (0, 4), (0, 0)), constant_values=255) for c in column], 1))
    sheet = np.concatenate([np.pad(t, ((0, 6), (0, 0), (0, 0)), constant_values=255) for t in tiles], 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path, keep_suffix=True) as tmp:
        Image.fromarray(sheet).save(tmp)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="episodes folder with depth (alaya record game)")
    ap.add_argument("--split", default="test")
    ap.add_argument("--feed", type=int, default=30, help="true frames fed before rendering from memory alone")
    ap.add_argument("--style", default=None, help="default: the dataset's first style")
    ap.add_argument("--episodes", type=int, default=0, help="at most this many episodes (0: all)")
    ap.add_argument("--rolling", action="store_true", help="also the rolling (one frame ahead) measure")
    ap.add_argument("--picture", default=None, help="PNG: memory renders beside the true frames")
    ap.add_argument("--replace", action="store_true", help="SceneMemoryConfig(replace=True): newest samples win")
    a = ap.parse_args()
    torch.set_num_threads(1)
    ds = EpisodeDataset(a.data)
    style_name = a.style or next(iter(ds.meta.styles))
    ids = ds.ids(a.split)[: a.episodes or None]
    config = SceneMemoryConfig(replace=a.replace)
    per_t: dict[int, list[tuple[float, float]]] = {}
    kinds: dict[str, list[tuple[float, float]]] = {"still": [], "back": []}
    cases, roll, points = [], [], []
    for eid in ids:
        ep = ds.load(eid)
        if "depth" not in ep or "world_to_camera" not in ep or "K" not in ep:
            raise SystemExit(f"{eid}: needs depth, world_to_camera and K (record with alaya record game)")
        style = [str(s) for s in ep["styles"]].index(style_name)
        f = frozen(ep, style, a.feed, config)
        points.append(f["points"])
        for r in f["rows"]:
            per_t.setdefault(r["t"], []).append((r["coverage"], r["psnr"]))
            if r["kind"]:
                kinds[r["kind"]].append((r["coverage"], r["psnr"]))
        if a.rolling:
            roll.append(rolling(ep, style, config))
        if len(cases) < 3:
            cases.append((eid, ep, f["rows"], roll[-1]["revisits"][0] if a.rolling else None, style))
        else:
            del ep
        print(f"{eid}: {f['points']} points ({f['mbytes']:.2f} MB), coverage at +1 / +30 / +150: "
              + " / ".join(f"{f['rows'][i]['coverage']:.2f}" for i in (0, 29, 149) if i < len(f["rows"])),
              flush=True)
    marks = [t for t in (1, 5, 15, 30, 60, 90, 150, 270) if t in per_t]
    result = {"episodes": len(ids), "split": a.split, "style": style_name, "feed": a.feed, "replace": a.replace,
              "points_mean": int(np.mean(points)),
              "coverage_at": {t: mean([c for c, _ in per_t[t]]) for t in marks},
              "psnr_at": {t: mean([p for _, p in per_t[t]]) for t in marks}}
    for kind, vals in kinds.items():
        result[f"{kind}_frames"] = len(vals)
        result[f"{kind}_coverage"] = mean([c for c, _ in vals])
        result[f"{kind}_psnr"] = mean([p for _, p in vals])
    if roll:
        rows = [r for e in roll for r in e["rows"]]
        still = [r for r in rows if r["still"]]
        result.update({"rolling_coverage": mean([r["coverage"] for r in rows]),
                       "rolling_psnr": mean([r["psnr"] for r in rows]),
                       "rolling_still_frames": len(still),
                       "rolling_still_psnr": mean([r["psnr"] for r in still]),
                       "rolling_points_end": int(np.mean([e["points"] for e in roll])),
                       "rolling_insert_ms": round(float(np.median([e["insert_ms"] for e in roll])), 2),
                       "rolling_render_ms": round(float(np.median([e["render_ms"] for e in roll])), 2)})
        visits = [r for e in roll for r in e["revisits"]]
        result.update({"revisit_frames": len(visits),
                       "revisit_coverage": mean([r["coverage"] for r in visits]),
                       "revisit_psnr": mean([r["psnr"] for r in visits]),
                       "revisit_290_ago_coverage": mean([r["coverage"] for r in visits if r["ago"] >= 269]),
                       "revisit_290_ago_psnr": mean([r["psnr"] for r in visits if r["ago"] >= 269])})
    if a.picture:
        picture(cases, Path(a.picture))
    for t in marks:
        print(f"+{t:3d} frames: coverage {result['coverage_at'][t]:.3f}, PSNR on covered {result['psnr_at'][t]:.2f} dB")
    print(json.dumps(result))


if __name__ == "__main__":
    main()

"""The ceiling of a play memory: how good the scene memory stays with a perfect generator (beside
the training renders of ``alaya.train.world_memory``, which insert every true frame whole).

A session renders its memory at each frame's camera, the model generates the frame, and the
frame goes into the memory by play's rule (``memory_conditioning.generated_insert``). Here the
"model" is the recording itself: its generated frame is the true frame, its depth the true
depth, and its gate the ideal one (``gate_target``: keep the memory where it is within 0.04 of
the truth). What the memory then shows, against the true frame, is the best any model can get
out of that insert rule; a rule that loses detail even with a perfect model loses it in play.

    python -m alaya.train.memory_ceiling --data /work/data/episodes128 --episodes ep00002 --json

Rules: ``holes`` (a generated frame goes in only where the memory did not cover),
``gated`` (also where the gate replaced the memory, which may also remove what it sees past:
play's default, ``memory_replace_below`` 0.5), ``truth`` (every true frame whole, as the
training renders are built: the upper bound).
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from alaya.data.episodes import EpisodeDataset
from alaya.evaluation.metrics import laplacian_variance
from alaya.models.memory_conditioning import encode_depth, gate_target, generated_insert
from alaya.models.scene_memory import SceneMemory, SceneMemoryConfig

RULES = ("holes", "gated", "truth")


@torch.no_grad()
def memory_ceiling(episode: dict[str, np.ndarray], rule: str, sky_depth: float = 25.0, max_points: int = 100_000,
                   style: int = 0) -> dict:
    """Per frame 1 ... T-1 of a recorded episode (rgb, depth, K, world_to_camera): coverage, PSNR
    of the memory against the true frame where it covers, and sharpness (Laplacian variance of the
    shown frame, the memory where it covers and the truth elsewhere, over the true frame's)."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    rgb = torch.from_numpy(np.asarray(episode["rgb"][style])).float() / 255          # (T, H, W, 3)
    depth = torch.from_numpy(np.asarray(episode["depth"], np.float32))
    K = torch.from_numpy(np.asarray(episode["K"], np.float32))
    views = torch.from_numpy(np.asarray(episode["world_to_camera"], np.float32))
    T, H, W, _ = rgb.shape
    memory = SceneMemory(SceneMemoryConfig(max_points=max_points, see_through=rule == "truth"))
    out = {"coverage": [], "psnr_covered": [], "sharpness": []}
    for t in range(T):
        true, d = rgb[t], depth[t]
        d_sky = torch.where(d > 0, d, torch.full_like(d, sky_depth)) if sky_depth > 0 else d
        if t == 0 or rule == "truth":
            if t:
                _measure(memory.render(K, views[t], H, W), true, out)
            memory.insert(true, d_sky, K, views[t], time=t)
            continue
        view = memory.render(K, views[t], H, W)
        _measure(view, true, out)
        cov = view.coverage[0]
        keep = gate_target(view.rgb[None], view.coverage[None], true.permute(2, 0, 1)[None])[0, 0]
        shown = torch.where(keep[..., None] > 0, view.rgb.permute(1, 2, 0), true)
        shown_depth = torch.where(keep > 0, view.depth[0], d)
        image = torch.cat([shown.permute(2, 0, 1), encode_depth(shown_depth)[None], keep[None]])
        rgb8, d_in, replaced = generated_insert(image, K, views[t], cov, True, sky_depth,
                                                0.5 if rule == "gated" else 0.0)
        memory.insert(rgb8, d_in, K, views[t], time=t, see_through=replaced)
    out = {k: np.asarray(v) for k, v in out.items()}
    return {"rule": rule, "frames": T - 1, "points": len(memory), "coverage": float(out["coverage"].mean()),
            "psnr_covered": float(out["psnr_covered"].mean()), "sharpness": float(out["sharpness"].mean()),
            "per_frame": {k: v.tolist() for k, v in out.items()}}


def _measure(view, true: torch.Tensor, out: dict) -> None:
    cov = view.coverage[0] > 0.5
    mem = view.rgb.permute(1, 2, 0)
    err = ((mem - true) ** 2).mean(-1)[cov]
    out["coverage"].append(float(cov.float().mean()))
    out["psnr_covered"].append(float(10 * torch.log10(1 / err.mean().clamp(min=1e-10))) if cov.any() else float("nan"))
    shown = torch.where(cov[..., None], mem, true)
    lap = laplacian_variance(torch.stack([shown, true]).permute(0, 3, 1, 2))
    out["sharpness"].append(float(lap[0] / lap[1].clamp(min=1e-9)))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="recorded game episodes (depth and cameras)")
    p.add_argument("--episodes", nargs="+", default=None, help="episode ids (default: the first 2 of the test split)")
    p.add_argument("--rules", nargs="+", default=list(RULES), choices=RULES)
    p.add_argument("--sky-depth", type=float, default=25.0)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    ds = EpisodeDataset(a.data)
    ids = a.episodes or ds.ids("test")[:2]
    result = {}
    for rule in a.rules:
        runs = [memory_ceiling(ds.load(e), rule, a.sky_depth) for e in ids]
        result[rule] = {k: float(np.nanmean([r[k] for r in runs])) for k in ("coverage", "psnr_covered", "sharpness")}
        if not a.json:
            print(rule, result[rule])
    print(json.dumps({"episodes": ids, **result}))


if __name__ == "__main__":
    main()

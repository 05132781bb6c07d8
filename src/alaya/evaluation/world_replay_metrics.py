"""The replay evaluation's summaries (``alaya.evaluation.world_eval``): per-step PSNR and SSIM
over the replayed windows against copying the last frame and against shuffled actions, the
inverse-dynamics model's accuracy on generated frames over its accuracy on real ones (overall and
per one-shot key), and the windows the contact sheet shows."""

from __future__ import annotations

import numpy as np

from alaya.evaluation.inverse_dynamics import InverseDynamics, accuracy


def pick_samples(rows: list[dict], pairs: list[tuple], n: int) -> list[dict]:
    """Up to ``n`` replay windows for the contact sheet: one per episode, new styles first."""
    out, episodes, styles = [], set(), set()
    for new_style in (True, False):
        for r, (real, gen, _) in zip(rows, pairs):
            if len(out) < n and r["episode"] not in episodes and not (new_style and r["style"] in styles):
                out.append({"episode": r["episode"], "style": r["style"], "t0": r["t0"], "real": real,
                            "generated": gen[1:]})
                episodes.add(r["episode"])
                styles.add(r["style"])
    return out


def replay_metrics(rows: list[dict], H: int, summary: bool = False) -> dict:
    """Per-step means over windows (``psnr_step{k}`` ...) and means over the horizon."""
    out = {}
    mean = {k: np.mean([r[k] for r in rows], 0) for k in ("psnr", "ssim", "baseline_psnr", "psnr_shuffled")}
    steps = (H,) if summary else range(1, H + 1)
    for k in steps:
        for key in ("psnr", "ssim", "baseline_psnr", "psnr_shuffled"):
            out[f"{key}_step{k}"] = float(mean[key][k - 1])
    for key in mean:
        out[f"{key}_mean"] = float(mean[key].mean())
    out["delta_psnr_actions"] = out["psnr_mean"] - out["psnr_shuffled_mean"]
    out["windows"] = len(rows)
    return out


def idm_metrics(idm: InverseDynamics, pairs: list[tuple], detail: bool = True) -> dict:
    """IDM balanced accuracy on real and on generated consecutive pairs, against true actions;
    ``pairs``: (real (H+1, ...), generated with the real start (H+1, ...), actions (H, 8))."""
    real_prev, real_next = (np.concatenate([p[0][a:b] for p in pairs]) for a, b in ((0, -1), (1, None)))
    gen_prev, gen_next = (np.concatenate([p[1][a:b] for p in pairs]) for a, b in ((0, -1), (1, None)))
    actions = np.concatenate([p[2] for p in pairs])
    acc_real = accuracy(idm, real_prev, real_next, actions)
    acc_gen = accuracy(idm, gen_prev, gen_next, actions)
    r, g = acc_real["balanced_accuracy"], acc_gen["balanced_accuracy"]
    out = {"idm_accuracy_real": r, "idm_accuracy_generated": g, "idm_ratio": g / r if r > 0 else None}
    if detail:
        recall = {k[len("recall_"):]: acc_gen[k] / acc_real[k] for k in acc_real
                  if k.startswith("recall_") and k != "recall_none" and k in acc_gen and acc_real[k] > 0}
        out["idm_action_recall_ratio"] = recall
        out["idm_action_recall_ratio_min"] = min(recall.values()) if recall else None
        out["idm"] = {"real": acc_real, "generated": acc_gen}
    return out

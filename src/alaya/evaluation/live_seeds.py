"""The live evaluation read over several seeds (``alaya eval world --live --seeds N``).

``--seed`` draws the ``play`` script and seeds every session's noise, and a line read at one seed
can pass by chance: the shipped world model's standing-still sharpness read 0.64 at seed 0 and
0.58–0.60 at seeds 1–3 (docs/world_journal.md, "Other seeds"). ``over_seeds`` makes one result of the
results at several seeds: each headline the worst of the seeds (the lowest of a line that must be
high, the highest of one that must be low), every seed's headlines under ``per_seed``, and the rest
(config, scenes, scripts, actions) from the first seed.
"""

from __future__ import annotations

LOWER_IS_WORSE = ("sharpness_min", "still_psnr_min", "still_psnr_mean", "still_psnr_static_min",
                  "walk_back_return_psnr", "psnr_mean", "fps", "action_ratio_min", "action_placement_min")
HIGHER_IS_WORSE = ("sharpness_max", "orientation_max", "structure_max", "structure_game_ratio", "colour_drift",
                   "colour_drift_pooled", "game_colour_change", "still_hf_ratio_max", "walk_back_return_camera",
                   "camera_position_max")
HEADLINES = LOWER_IS_WORSE + HIGHER_IS_WORSE + ("sharpness_in_band",)


def over_seeds(results: list[dict], seeds: list[int]) -> dict:
    """One live result (``public_json`` dicts, one per seed, in ``seeds``' order) as the worst
    case over the seeds; ``per_seed``: each seed's headline values."""
    if not results or len(results) != len(seeds):
        raise ValueError(f"results: expected one per seed ({len(seeds)}), got {len(results)}")
    out = dict(results[0])
    for key in LOWER_IS_WORSE + HIGHER_IS_WORSE:
        values = [r[key] for r in results if r.get(key) is not None]
        out[key] = (min if key in LOWER_IS_WORSE else max)(values) if values else None
    bands = [r.get("sharpness_in_band") for r in results if r.get("sharpness_in_band") is not None]
    out["sharpness_in_band"] = all(bands) if bands else None
    out["config"] = {**results[0].get("config", {}), "seeds": list(seeds)}
    out["per_seed"] = [{"seed": s, **{k: r.get(k) for k in HEADLINES}} for s, r in zip(seeds, results)]
    return out

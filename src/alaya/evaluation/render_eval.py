"""``alaya eval render``: a renderer against the reference renderer on held-out clips.

For the first ``clips`` clips of a split and every style, the renderer gets the clip's G-buffer
and a prompt — one of the style's training phrasings from ``dataset.json`` — and its frames are
compared with the reference render of that style: PSNR, SSIM, warping error, flicker, structure
F1, sharpness against the reference's (``alaya.evaluation.metrics``) and the style classifier's
accuracy. A second pass prompts
with held-out paraphrases (``paraphrases.json``, checked to appear nowhere in ``dataset.json``)
for ``style_accuracy_paraphrase``. Results are averaged per style and overall.

A renderer here is a function ``render(clip, style, prompt, seed) -> uint8 (T, H, W, 3)``. A
generative renderer must use only the clip's G-buffer keys and the prompt; ``style`` is there
for the oracle baselines (``reference``: the reference frames themselves; ``codec``: them
through the autoencoder, the ceiling of any latent renderer).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from alaya.data.contract import GBUFFER_KEYS, renderer_input
from alaya.data.dataset import ClipDataset
from alaya.evaluation import metrics as M
from alaya.evaluation.style_classifier import StyleClassifier
from alaya.paths import default_weights

RenderFn = Callable[[dict, str, str, int], np.ndarray]


@dataclass
class RenderEvalConfig:
    data: str
    split: str = "test"
    clips: int = 4
    frames: int = 16
    styles: tuple[str, ...] | None = None
    paraphrases: bool = True
    classifier: str = default_weights("style_classifier")
    seed: int = 0


def load_paraphrases() -> dict[str, list[str]]:
    text = resources.files("alaya.evaluation").joinpath("paraphrases.json").read_text()
    return {k: v for k, v in json.loads(text).items() if not k.startswith("_")}


def check_held_out(paraphrases: dict[str, list[str]], dataset_json: str) -> None:
    """Raise if any paraphrase appears in the dataset's metadata (then it is not held out)."""
    low = dataset_json.lower()
    leaked = [p for ps in paraphrases.values() for p in ps if p.lower() in low]
    if leaked:
        raise ValueError(f"paraphrases {leaked} appear in dataset.json, so they are not held out")


def reference_renderer(clip: dict, style: str, prompt: str, seed: int) -> np.ndarray:
    return clip["rgb"][list(clip["styles"]).index(style)]


def codec_renderer(autoencoder) -> RenderFn:
    from alaya.codecs.autoencoder import to_images

    @torch.no_grad()
    def render(clip: dict, style: str, prompt: str, seed: int) -> np.ndarray:
        x = to_images(reference_renderer(clip, style, prompt, seed))
        y = autoencoder.decode(autoencoder.encode(x)).clamp(0, 1)
        return (y.permute(0, 2, 3, 1) * 255).round().to(torch.uint8).numpy()
    return render


def _check_output(out: np.ndarray, ref: np.ndarray, cid: str, style: str) -> np.ndarray:
    out = np.asarray(out)
    if out.dtype != np.uint8 or out.shape != ref.shape:
        raise ValueError(f"renderer returned {out.dtype} {out.shape} for clip {cid} style {style}; "
                         f"expected uint8 {ref.shape}")
    return out


def evaluate_renderer(render: RenderFn, cfg: RenderEvalConfig, progress: bool = True) -> dict:
    """Metrics overall (top-level keys), ``per_style`` and a few sample frames (``samples``)."""
    ds = ClipDataset(cfg.data)
    ids = ds.ids(cfg.split)[:cfg.clips]
    if not ids:
        raise ValueError(f"{cfg.data}: split '{cfg.split}' has no clips")
    meta_styles = ds.meta.styles
    styles = list(cfg.styles or meta_styles)
    unknown = [s for s in styles if s not in meta_styles]
    if unknown:
        raise ValueError(f"styles {unknown} are not in {cfg.data}/dataset.json")
    paraphrases = load_paraphrases() if cfg.paraphrases else {}
    if paraphrases:
        check_held_out(paraphrases, (Path(cfg.data) / "dataset.json").read_text())
        missing = [s for s in styles if s not in paraphrases]
        if missing:
            raise ValueError(f"no held-out paraphrases for styles {missing}")
    classifier = StyleClassifier.from_pretrained(cfg.classifier)
    rows: list[dict] = []
    samples: dict[str, dict[str, np.ndarray]] = {}
    seconds, n_frames = 0.0, 0
    bar = tqdm(total=len(ids) * len(styles) * (2 if paraphrases else 1), desc="eval render",
               disable=not progress, dynamic_ncols=True)
    for ci, cid in enumerate(ids):
        clip = ds.load(cid)
        T = min(cfg.frames, clip["depth"].shape[0])
        clip = {**clip, **renderer_input(clip, 0, T), "rgb": clip["rgb"][:, :T]}
        gbuffer = {k: clip[k] for k in GBUFFER_KEYS}
        mask, edges = M.occlusion_mask(gbuffer), M.gbuffer_edges(gbuffer)
        geometry = clip["mask"] if "mask" in clip else clip["depth"] > 0
        for style in styles:
            ref_np = reference_renderer(clip, style, "", 0)
            ref = M.frames_to_tensor(ref_np)
            phr = meta_styles[style]["phrasings"]
            prompt = phr[ci % len(phr)]
            t0 = time.perf_counter()
            out_np = _check_output(render(clip, style, prompt, cfg.seed + ci), ref_np, cid, style)
            seconds += time.perf_counter() - t0
            n_frames += T
            out = M.frames_to_tensor(out_np)
            pred = classifier.predict(out_np)
            row = {"clip": cid, "style": style, "prompt": prompt,
                   "psnr": float(M.psnr(out, ref).mean()), "psnr_geometry": M.psnr_masked(out, ref, geometry),
                   "ssim": float(M.ssim(out, ref).mean()),
                   "warp_error": M.warp_error(out, gbuffer, mask), "flicker": M.flicker(out, ref),
                   "structure_f1": M.structure_f1(out, gbuffer, edges),
                   "sharpness_ratio": M.sharpness_ratio(out, ref),
                   "block_grid_ratio": M.block_grid_ratio(out, ref), "gradient_error": M.gradient_error(out, ref),
                   "style_accuracy": float(np.mean([p == style for p in pred])),
                   "reference_warp_error": M.warp_error(ref, gbuffer, mask),
                   "reference_structure_f1": M.structure_f1(ref, gbuffer, edges)}
            bar.update()
            if ci == 0:
                samples[style] = {"albedo": clip["albedo"][T // 2], "reference": ref_np[T // 2],
                                  "output": out_np[T // 2]}
            if paraphrases:
                para = paraphrases[style][ci % len(paraphrases[style])]
                out_p = _check_output(render(clip, style, para, cfg.seed + ci), ref_np, cid, style)
                pred_p = classifier.predict(out_p)
                row.update({"paraphrase": para,
                            "style_accuracy_paraphrase": float(np.mean([p == style for p in pred_p])),
                            "psnr_paraphrase": float(M.psnr(M.frames_to_tensor(out_p), ref).mean())})
                if ci == 0:
                    samples[style]["paraphrase"] = out_p[T // 2]
                bar.update()
            rows.append(row)
    bar.close()
    keys = [k for k in rows[0] if k not in ("clip", "style", "prompt", "paraphrase")]
    result = {k: _mean([r[k] for r in rows]) for k in keys}
    result["per_style"] = {s: {k: _mean([r[k] for r in rows if r["style"] == s]) for k in keys} for s in styles}
    result["s_per_frame"] = seconds / max(n_frames, 1)
    result["config"] = asdict(cfg)
    result["clips"] = ids
    result["rows"] = rows
    result["samples"] = samples
    return result


def _mean(values: list[float]) -> float:
    """The mean of the finite values (a clip with no geometry has no ``psnr_geometry``); NaN if none."""
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def public_json(result: dict) -> dict:
    """The result without sample frames (what ``--json`` prints and ``results.json`` holds)."""
    return {k: v for k, v in result.items() if k != "samples"}

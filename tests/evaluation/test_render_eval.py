"""The renderer evaluation on oracle renderers with known answers: the reference itself, a
wrong style, frames shifted in space; plus the held-out paraphrase guarantee and the report."""

import json
from pathlib import Path

import numpy as np
import pytest

from alaya.evaluation.render_eval import (RenderEvalConfig, check_held_out, evaluate_renderer,
                                          load_paraphrases, reference_renderer)
from alaya.evaluation.report import write_report
from alaya.evaluation.style_classifier import StyleClassifier

WEIGHTS = Path(__file__).resolve().parents[2] / "weights"

pytestmark = pytest.mark.skipif(not (WEIGHTS / "style_classifier" / "model.safetensors").exists(),
                                reason="style classifier not shipped")


def config(data, **kw):
    return RenderEvalConfig(data=str(data), clips=1, frames=6,
                            classifier=str(WEIGHTS / "style_classifier"), **kw)


def test_reference_is_perfect_and_recognised(styles128_dataset, tmp_path):
    r = evaluate_renderer(reference_renderer, config(styles128_dataset), progress=False)
    assert r["psnr"] == 100.0 and r["ssim"] > 0.999 and r["flicker"] == 0.0 and r["sharpness_ratio"] == 1.0
    assert r["warp_error"] == pytest.approx(r["reference_warp_error"])
    assert r["style_accuracy"] >= 0.9
    assert r["style_accuracy_paraphrase"] == r["style_accuracy"]   # the oracle ignores prompts
    report = write_report(r, tmp_path / "report", "reference")
    assert "| **all** |" in report.read_text()
    data = json.loads((tmp_path / "report" / "results.json").read_text())
    for key in ("psnr", "ssim", "warp_error", "flicker", "sharpness_ratio", "style_accuracy",
                "style_accuracy_paraphrase"):
        assert key in data
    assert (tmp_path / "report" / "side_by_side.png").stat().st_size > 1000


def test_wrong_style_is_caught(styles128_dataset):
    def wrong(clip, style, prompt, seed):
        styles = list(clip["styles"])
        return clip["rgb"][(styles.index(style) + 1) % len(styles)]
    r = evaluate_renderer(wrong, config(styles128_dataset, paraphrases=False), progress=False)
    assert r["style_accuracy"] <= 0.2
    assert r["psnr"] < 25


def test_shifted_frames_lose_psnr_and_temporal_consistency(styles128_dataset):
    def shifted(clip, style, prompt, seed):   # each frame shifted by a different amount
        ref = reference_renderer(clip, style, prompt, seed)
        return np.stack([np.roll(f, 2 + (i % 2), axis=1) for i, f in enumerate(ref)])
    r = evaluate_renderer(shifted, config(styles128_dataset, paraphrases=False), progress=False)
    assert r["psnr"] < 30
    assert r["warp_error"] > 1.3 * r["reference_warp_error"]


def test_classifier_knows_every_style_of_fresh_renders(styles128_dataset):
    from alaya.data.frames import FrameBank
    from alaya.evaluation.style_classifier import accuracy
    clf = StyleClassifier.from_pretrained(WEIGHTS / "style_classifier")
    acc = accuracy(clf, FrameBank.load(styles128_dataset, "test", gbuffer=False))
    assert acc["accuracy"] >= 0.9, acc


def test_paraphrases_are_held_out(styles128_dataset):
    paraphrases = load_paraphrases()
    assert len(paraphrases) == 7 and all(len(v) >= 4 for v in paraphrases.values())
    check_held_out(paraphrases, (styles128_dataset / "dataset.json").read_text())
    leaked = {"toon": ["a cartoon with bold outlines"]}
    with pytest.raises(ValueError, match="not held out"):
        check_held_out(leaked, (styles128_dataset / "dataset.json").read_text())


def test_renderer_output_of_the_wrong_shape_is_named(styles128_dataset):
    def bad(clip, style, prompt, seed):
        return np.zeros((2, 64, 64, 3), np.uint8)
    with pytest.raises(ValueError, match="renderer returned"):
        evaluate_renderer(bad, config(styles128_dataset, paraphrases=False), progress=False)

"""Style classifier training: runs end to end on a tiny dataset and saves what it learned."""

import json

import torch

from alaya.evaluation.style_classifier import StyleClassifier, StyleClassifierConfig
from alaya.train.loop import TrainConfig
from alaya.train.style_classifier import StyleClassifierTrainConfig, augment, train_style_classifier


def test_augment_is_a_function_of_the_generator():
    x = torch.rand(3, 3, 16, 16)
    a, b = (augment(x, torch.Generator().manual_seed(5)) for _ in range(2))
    assert torch.equal(a, b) and a.shape == x.shape and 0 <= float(a.min()) and float(a.max()) <= 1


def test_style_classifier_trains_and_saves(tiny_dataset, tmp_path):
    cfg = StyleClassifierTrainConfig(
        data=str(tiny_dataset), out=str(tmp_path / "clf"), classifier=StyleClassifierConfig(channels=(4, 8), size=16),
        train=TrainConfig(run_dir=str(tmp_path / "run"), steps=2, batch_size=4, log_every=1, val_every=2,
                          ckpt_every=2, progress=False, warmup=1))
    model = train_style_classifier(cfg)
    loaded = StyleClassifier.from_pretrained(tmp_path / "clf")
    assert loaded.config.styles == ("clear_noon", "toon") == model.config.styles
    metrics = json.loads((tmp_path / "clf" / "config.json").read_text())["metrics"]
    assert 0 <= metrics["test"]["accuracy"] <= 1 and set(metrics["test"]) == {
        "accuracy", "accuracy_clear_noon", "accuracy_toon"} and "val_accuracy" in metrics["val"]

"""The guided decoder's recipe: student latents cached once, deterministic batches, exact resume."""

import json

import numpy as np
import torch

from alaya.codecs.guided import GuidedDecoder, GuidedDecoderConfig
from alaya.train.guided_decoder import GuidedDecoderTrainConfig, gradient_l1, train_guided_decoder
from alaya.train.loop import TrainConfig


def test_gradient_l1_is_zero_for_a_shifted_brightness_and_sees_lost_detail():
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    assert float(gradient_l1(x + 0.1, x)) < 1e-6
    flat = x.mean((2, 3), keepdim=True).expand_as(x)
    assert float(gradient_l1(flat, x)) > 0.1


def _cfg(data, run, out, steps):
    return GuidedDecoderTrainConfig(
        data=str(data), backend="torch", out=str(out), max_clips=1,
        decoder=GuidedDecoderConfig(widths=(4, 4, 8, 8)),
        train=TrainConfig(run_dir=str(run), steps=steps, batch_size=2, lr=1e-3, warmup=1, log_every=1,
                          val_every=2, ckpt_every=2, progress=False))


def test_trains_from_the_students_latents_and_resumes_exactly(tiny_dataset, tmp_path):
    run, out = tmp_path / "run", tmp_path / "out"
    train_guided_decoder(_cfg(tiny_dataset, run, out, 2))
    cache = run / "latents_train.safetensors"
    stamp = cache.stat().st_mtime_ns
    resumed = train_guided_decoder(_cfg(tiny_dataset, run, out, 4))
    assert cache.stat().st_mtime_ns == stamp                       # the latents were not recomputed
    straight = train_guided_decoder(_cfg(tiny_dataset, tmp_path / "run2", tmp_path / "out2", 4))
    for a, b in zip(resumed.state_dict().values(), straight.state_dict().values()):
        assert torch.equal(a, b)
    loaded = GuidedDecoder.from_pretrained(out)
    assert loaded.config.widths == (4, 4, 8, 8)
    card = json.loads((out / "config.json").read_text())
    assert np.isfinite(card["metrics"]["val"]["psnr"]) and card["trained"]["steps"] == 4

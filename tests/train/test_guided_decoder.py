"""The guided decoder's recipe: student latents cached once, deterministic batches, exact resume."""

import json

import numpy as np
import torch

from alaya.codecs.gbuffer import GUIDE_CHANNELS
from alaya.codecs.guided import GuidedDecoder, GuidedDecoderConfig
from alaya.train.guided_decoder import (GuidedDecoderTrainConfig, detail_energy, detail_energy_l1,
                                        detail_power_l1, gradient_l1, train_guided_decoder)
from alaya.train.loop import TrainConfig


def test_gradient_l1_is_zero_for_a_shifted_brightness_and_sees_lost_detail():
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    assert float(gradient_l1(x + 0.1, x)) < 1e-6
    flat = x.mean((2, 3), keepdim=True).expand_as(x)
    assert float(gradient_l1(flat, x)) > 0.1


def test_detail_energy_does_not_reward_the_mean():
    """Texture placed one pixel off costs pixel L1 more than the smooth mean does, but the
    detail term prefers it: it asks for the reference's amount of detail, not its mean."""
    g = torch.Generator().manual_seed(0)
    ref = torch.rand(2, 3, 32, 32, generator=g)
    shifted = torch.roll(ref, 1, dims=3)
    mean = torch.nn.functional.avg_pool2d(ref, 5, 1, 2, count_include_pad=False)
    assert float((shifted - ref).abs().mean()) > float((mean - ref).abs().mean())
    assert float(detail_energy_l1(shifted, ref)) < 0.2 * float(detail_energy_l1(mean, ref))
    assert float(detail_energy_l1(ref, ref)) == 0.0
    assert detail_energy(ref).shape == (2, 1, 4, 4)
    flat = torch.full((1, 3, 16, 16), 0.5)
    assert float(detail_energy(flat).max()) < 2e-3


def test_detail_power_weighs_a_dim_frame_as_a_bright_one():
    """Half the reference's detail costs the same at a tenth of the contrast (a foggy or night
    frame), where the energy L1 shrinks tenfold; it still prefers texture one pixel off to the
    mean, is zero for the reference itself, and flat frames cost nothing."""
    g = torch.Generator().manual_seed(0)
    ref = 0.5 + 0.4 * (torch.rand(2, 3, 32, 32, generator=g) - 0.5)
    half = 0.5 + 0.5 * (ref - 0.5)
    dim_ref, dim_half = 0.5 + 0.1 * (ref - 0.5), 0.5 + 0.1 * (half - 0.5)
    bright, dim = float(detail_power_l1(half, ref)), float(detail_power_l1(dim_half, dim_ref))
    assert abs(bright - dim) < 0.1 * bright and bright > 0.5
    assert float(detail_energy_l1(dim_half, dim_ref)) < 0.2 * float(detail_energy_l1(half, ref))
    shifted = torch.roll(ref, 1, dims=3)
    mean = torch.nn.functional.avg_pool2d(ref, 5, 1, 2, count_include_pad=False)
    assert float(detail_power_l1(shifted, ref)) < 0.2 * float(detail_power_l1(mean, ref))
    assert float(detail_power_l1(ref, ref)) == 0.0
    flat = torch.full((1, 3, 16, 16), 0.5)
    assert float(detail_power_l1(flat, flat + 0.1)) == 0.0


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


def test_with_a_critic_and_an_init_it_resumes_exactly_and_starts_from_the_init(tiny_dataset, tmp_path):
    """The critic trains inside the loop's module (checkpointed with the decoder, so a resumed run
    equals a straight one), the decoder starts from --init's weights with the albedo gain at zero,
    and what is saved is the decoder alone."""
    init = tmp_path / "init"
    torch.manual_seed(3)
    start = GuidedDecoder(GuidedDecoderConfig(widths=(4, 4, 8, 8), guide_channels=20))     # an older guide
    start.save_pretrained(init)

    def cfg(run, out, steps):
        c = _cfg(tiny_dataset, run, out, steps)
        c.init, c.albedo_gain, c.adversarial_weight, c.adversarial_start = str(init), True, 0.1, 1
        c.detail_weight, c.detail_loss, c.sky_gain, c.full_res_blocks = 0.5, "relative_power", True, 1
        return c

    run, out = tmp_path / "run", tmp_path / "out"
    train_guided_decoder(cfg(run, out, 2))
    resumed = train_guided_decoder(cfg(run, out, 4))
    straight = train_guided_decoder(cfg(tmp_path / "run2", tmp_path / "out2", 4))
    for a, b in zip(resumed.state_dict().values(), straight.state_dict().values()):
        assert torch.equal(a, b)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert all("critic" in r and np.isfinite(r["critic"]) and np.isfinite(r["detail_l1"]) for r in rows)
    assert "val_sharpness" in rows[-1] and "val_gradient_error" in rows[-1]
    loaded = GuidedDecoder.from_pretrained(out)
    assert loaded.config.albedo_gain and loaded.config.sky_gain and loaded.config.full_res_blocks == 1
    assert loaded.config.guide_channels == GUIDE_CHANNELS and not any(k.startswith("critic") for k in loaded.state_dict())
    card = json.loads((out / "config.json").read_text())
    assert card["trained"]["init"] == str(init) and card["trained"]["adversarial_weight"] == 0.1
    fresh = train_guided_decoder(cfg(tmp_path / "run3", tmp_path / "out3", 0))   # no step: the init itself
    z = torch.randn(1, 32, 2, 2)
    g = torch.rand(1, GUIDE_CHANNELS, 16, 16)
    start.eval()
    assert torch.allclose(fresh(z, None, g)[0], start(z, None, g)[0], atol=1e-6)


def test_style_weights_oversample_a_style_and_bad_ones_are_named():
    import pytest

    from alaya.cli_train import parse_style_weights
    from alaya.train.guided_decoder import style_probabilities
    styles = ["clear_noon", "neon_night", "toon"]
    p = style_probabilities(styles, parse_style_weights("neon_night=3"))
    np.testing.assert_allclose(p, [0.2, 0.6, 0.2])
    assert style_probabilities(styles, None) is None and parse_style_weights("") is None
    with pytest.raises(ValueError, match="unknown style.*neon"):
        style_probabilities(styles, {"neon": 2.0})
    with pytest.raises(ValueError, match="style_weights"):
        style_probabilities(styles, {"toon": -1.0})
    with pytest.raises(ValueError, match="--style-weights.*'neon_night'"):
        parse_style_weights("neon_night")


def test_a_styles_detail_weight_scales_its_frames_terms(tiny_dataset, tmp_path):
    import pytest
    g = torch.Generator().manual_seed(1)
    ref, out = torch.rand(4, 3, 16, 16, generator=g), torch.rand(4, 3, 16, 16, generator=g)
    plain = detail_power_l1(out, ref)
    torch.testing.assert_close(detail_power_l1(out, ref, frame_weights=torch.ones(4)), plain)
    assert float(detail_power_l1(out, ref, frame_weights=torch.zeros(4))) == 0.0
    torch.testing.assert_close(detail_power_l1(out, ref, frame_weights=torch.full((4,), 3.0)), 3 * plain)
    cfg = _cfg(tiny_dataset, tmp_path / "run", tmp_path / "out", 2)
    cfg.detail_weight, cfg.detail_loss = 0.5, "relative_power"
    cfg.style_detail = {"not_a_style": 2.0}
    with pytest.raises(ValueError, match="style_detail: unknown style"):
        train_guided_decoder(cfg)
    cfg.detail_loss = "energy"
    with pytest.raises(ValueError, match="relative_power"):
        train_guided_decoder(cfg)

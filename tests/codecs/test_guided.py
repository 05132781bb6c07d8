"""The G-buffer-guided decoder: shapes, streaming state, no block transform, the guide's detail."""

import pytest
import torch

from alaya.codecs.gbuffer import GUIDE_CHANNELS, STAR_CHANNEL
from alaya.codecs.guided import GuidedDecoder, GuidedDecoderConfig, extended, with_albedo_gain


def _inputs(B=2, h=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, 32, h, h, generator=g), torch.rand(B, GUIDE_CHANNELS, 8 * h, 8 * h, generator=g)


def test_shapes_state_and_range():
    dec = GuidedDecoder().eval()
    z, guide = _inputs()
    img, state = dec(z, None, guide)
    assert img.shape == (2, 3, 32, 32) and state.shape == (2, dec.state_channels, 4, 4)
    assert 0 <= float(img.min()) and float(img.max()) <= 1
    img2, _ = dec(z, state, guide)
    assert img2.shape == img.shape


def test_bad_inputs_are_named():
    dec = GuidedDecoder().eval()
    z, guide = _inputs()
    with pytest.raises(ValueError, match="guide"):
        dec(z, None, guide[:, :9])
    with pytest.raises(ValueError, match="guide"):
        dec(z, None, guide[..., :16, :16])
    with pytest.raises(ValueError, match="latent"):
        dec(z[:, :8], None, guide)
    with pytest.raises(ValueError, match="state"):
        dec(z, torch.zeros(2, 48, 2, 2), guide)
    bad = z.clone()
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        dec(bad, None, guide)


def test_one_latent_pixel_reaches_beyond_its_8x8_block():
    """No non-overlapping block transform: a change in one latent pixel moves pixels outside
    the 8x8 block it covers (a block transform would change exactly that block)."""
    torch.manual_seed(0)
    dec = GuidedDecoder(GuidedDecoderConfig(temporal=False)).train()     # train(): no clamp to [0, 1]
    for p in dec.parameters():                       # a trained-like decoder: no zero layers
        torch.nn.init.normal_(p, std=0.05)
    z, guide = _inputs(B=1, h=4)
    a, _ = dec(z, None, guide)
    z2 = z.clone()
    z2[0, :, 1, 1] += 1.0
    b, _ = dec(z2, None, guide)
    changed = (a - b).abs().amax(1)[0] > 1e-4
    inside = torch.zeros_like(changed)
    inside[8:16, 8:16] = True
    assert changed[inside].any() and changed[~inside].any()


def test_guide_detail_reaches_the_output_after_a_little_training():
    """Target: the guide's albedo at pixel resolution; the latents carry only its 8x8 mean. The
    decoder learns the pixel detail a latent-only decoder cannot have."""
    torch.manual_seed(0)
    dec = GuidedDecoder(GuidedDecoderConfig(widths=(8, 8, 16, 16), temporal=False, guide_channels=20))
    opt = torch.optim.Adam(dec.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(1)

    def batch():
        guide = torch.rand(4, 20, 32, 32, generator=g)
        target = guide[:, 8:11]
        z = torch.nn.functional.avg_pool2d(target, 8).repeat(1, 11, 1, 1)[:, :32]
        return z, guide, target

    for _ in range(150):
        z, guide, target = batch()
        img, _ = dec(z, None, guide)
        loss = (img - target).abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    z, guide, target = batch()
    dec.eval()
    with torch.no_grad():
        mse = float(((dec(z, None, guide)[0] - target) ** 2).mean())
        blocks = torch.nn.functional.interpolate(torch.nn.functional.avg_pool2d(target, 8), scale_factor=8)
        mse_blocks = float(((blocks - target) ** 2).mean())
    assert mse < 0.5 * mse_blocks


def test_save_load_round_trip(tmp_path):
    dec = GuidedDecoder(GuidedDecoderConfig(widths=(8, 8, 16, 16))).eval()
    dec.save_pretrained(tmp_path / "g")
    back = GuidedDecoder.from_pretrained(tmp_path / "g").eval()
    z, guide = _inputs()
    assert torch.equal(dec(z, None, guide)[0], back(z, None, guide)[0])


def test_albedo_gain_starts_exact_and_carries_the_albedo_per_pixel(tmp_path):
    """``with_albedo_gain`` decodes bit for bit as the decoder it extends; once its gain is nonzero,
    a change of one pixel's albedo changes that pixel's colour in proportion (texture passes
    through), and the config round-trips."""
    torch.manual_seed(0)
    dec = GuidedDecoder(GuidedDecoderConfig(widths=(8, 8, 16, 16))).eval()
    for p in dec.parameters():
        torch.nn.init.normal_(p, std=0.05)
    z, guide = _inputs(B=1)
    gained = with_albedo_gain(dec).eval()
    assert gained.config.albedo_gain and not dec.config.albedo_gain
    assert torch.allclose(dec(z, None, guide)[0], gained(z, None, guide)[0], atol=1e-6, rtol=0)   # float rounding of a wider conv
    last = gained.head[-1]
    with torch.no_grad():
        last.weight[3:] = 0
        last.bias[3:] = 0.5                      # a flat gain of 0.5 on every channel
        gained.train()                           # no clamp, so the difference is exact
        a = gained(z, None, guide)[0]
        bumped = guide.clone()
        bumped[0, 8:11, 5, 7] += 0.2             # the guide's albedo at one pixel
        b = gained(z, None, bumped)[0]
    diff = b - a
    assert torch.allclose(diff[0, :, 5, 7], torch.full((3,), 0.1), atol=0.02)
    gained.save_pretrained(tmp_path / "g")
    back = GuidedDecoder.from_pretrained(tmp_path / "g").eval()
    gained.eval()
    assert back.config.albedo_gain and torch.equal(back(z, None, guide)[0], gained(z, None, guide)[0])


def test_extended_decodes_exactly_then_reads_the_stars_and_an_old_decoder_reads_the_prefix(tmp_path):
    """A decoder trained on the 20-channel guide, extended to the full guide, one more full-resolution
    block and the sky gain, decodes bit for bit as before; its sky gain puts its colour exactly on
    the star pixels; and the old decoder takes the full guide, reading its first 20 channels."""
    torch.manual_seed(0)
    old = GuidedDecoder(GuidedDecoderConfig(widths=(8, 8, 16, 16), guide_channels=20, albedo_gain=True)).eval()
    for p in old.parameters():
        torch.nn.init.normal_(p, std=0.05)
    z, guide = _inputs(B=1)
    guide[:, STAR_CHANNEL] = 0
    guide[0, STAR_CHANNEL, 3, 9] = 1.0                   # one star
    new = extended(old, sky_gain=True, guide_channels=GUIDE_CHANNELS, full_res_blocks=1).eval()
    assert new.config.sky_gain and new.config.full_res_blocks == 1 and new.config.guide_channels == GUIDE_CHANNELS
    assert torch.allclose(old(z, None, guide)[0], new(z, None, guide)[0], atol=1e-6, rtol=0)
    assert torch.equal(old(z, None, guide)[0], old(z, None, guide[:, :20])[0])
    with pytest.raises(ValueError, match="drops"):
        extended(new, sky_gain=False)
    with pytest.raises(ValueError, match="star"):
        extended(GuidedDecoder(GuidedDecoderConfig(guide_channels=20)), sky_gain=True)
    with torch.no_grad():
        new.head[-1].bias[-3:] = torch.tensor([0.1, 0.2, 0.3])
        new.train()
        diff = new(z, None, guide)[0] - old.train()(z, None, guide)[0]
    assert torch.allclose(diff[0, :, 3, 9], torch.tensor([0.1, 0.2, 0.3]), atol=1e-6)
    diff[0, :, 3, 9] = 0
    assert float(diff.abs().max()) < 1e-6
    new.save_pretrained(tmp_path / "n")
    back = GuidedDecoder.from_pretrained(tmp_path / "n")
    assert back.config == new.config

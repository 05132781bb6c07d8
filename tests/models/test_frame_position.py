"""The frame-position input of the core (``student.frame_position``,
``WorldModelConfig.position_features``)."""

import dataclasses

import pytest
import torch

from alaya.models.memory_conditioning import memory_latent
from alaya.models.student import frame_position
from alaya.models.world import WorldModel, WorldModelConfig
from alaya.train.world import with_position_features
from tiny_memory import TINY


def test_every_pixel_gets_its_own_code_in_range_at_any_size():
    for h, w in ((8, 8), (32, 32), (16, 24)):
        p = frame_position(h, w, 3)
        assert p.shape == (1, 12, h, w) and p.abs().max() <= 1.0
        codes = p[0].reshape(12, -1).T
        assert torch.cdist(codes, codes).add(torch.eye(h * w) * 9).min() > 1e-3   # all distinct
    a, b = frame_position(8, 8, 2), frame_position(32, 32, 2)
    torch.testing.assert_close(a[..., 3:5, 3:5].mean((-1, -2)), b[..., 12:20, 12:20].mean((-1, -2)), atol=0.05,
                               rtol=0)                                    # the centre codes the centre at both sizes
    assert torch.allclose(p[0, 0], -p[0, 0].flip(-1), atol=1e-6)           # sin(x) is odd about the centre


def _inputs(B=2, h=8):
    torch.manual_seed(1)
    z, ctx, valid = torch.randn(B, 80, h, h), torch.randn(B, 3, 80, h, h) * 0.3, torch.ones(B, 3, 1, h, h)
    style, rows, level, pitch = torch.randn(B, 384), torch.zeros(B, 3, 8), torch.zeros(B), torch.zeros(B)
    rows[:, 0, 5] = 1.0                                                    # an attack
    memory = memory_latent(torch.rand(B, 3, 4 * h, 4 * h), torch.ones(B, 1, 4 * h, 4 * h),
                           torch.full((B, 1, 4 * h, 4 * h), 3.0))
    return z, memory, ctx, valid, style, rows, level, pitch


def _trained(model):
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model.eval()


def test_a_model_given_the_input_starts_as_it_was_and_then_uses_it(tmp_path):
    torch.manual_seed(0)
    model = _trained(WorldModel(TINY))
    grown = with_position_features(model, 3).eval()
    assert grown.config == dataclasses.replace(TINY, position_features=3)
    z, memory, ctx, valid, style, rows, level, pitch = x = _inputs()
    before = model.sample(*x[:7], pitch=pitch)
    torch.testing.assert_close(grown.sample(*x[:7], pitch=pitch), before)   # the new layer starts at zero
    with torch.no_grad():
        grown.core.position.weight.normal_(0, 0.5)
    after = grown.sample(*x[:7], pitch=pitch)
    assert (after - before).abs().max() > 1e-3
    grown.save_pretrained(tmp_path / "m")
    loaded = WorldModel.from_pretrained(tmp_path / "m").eval()
    assert loaded.config.position_features == 3
    torch.testing.assert_close(loaded.sample(*x[:7], pitch=pitch), after)


def test_with_the_input_a_flat_frame_gives_a_placed_output():
    """Without it a constant input gives a constant interior (convolutions); with it, not."""
    torch.manual_seed(0)
    for octaves, placed in ((0, False), (2, True)):
        model = _trained(WorldModel(dataclasses.replace(TINY, position_features=octaves)))
        if octaves:
            with torch.no_grad():
                model.core.position.weight.normal_(0, 0.5)
        B, h = 1, 16
        flat = memory_latent(torch.full((B, 3, 4 * h, 4 * h), 0.5), torch.ones(B, 1, 4 * h, 4 * h),
                             torch.full((B, 1, 4 * h, 4 * h), 3.0))
        feats = model.core.condition_gbuffer(flat)[0, :, 4:-4, 4:-4]
        spread = (feats - feats.mean((-1, -2), keepdim=True)).abs().max().item()
        assert (spread > 1e-3) == placed, (octaves, spread)


def test_the_count_is_checked():
    with pytest.raises(ValueError, match="position_features"):
        WorldModelConfig(position_features=-1)
    with pytest.raises(ValueError, match="another shape"):
        with_position_features(WorldModel(dataclasses.replace(TINY, position_features=1)), 3)

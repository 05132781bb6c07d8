"""The student renderer: full-codec stages (with and without guidance) and the tiny-codec
session give causal, deterministic, prompt-dependent frames; bad setups are refused."""

import numpy as np
import pytest
import torch

from alaya.codecs import (Autoencoder, AutoencoderConfig, TinyDecoder, TinyDecoderConfig, TinyGBufferEncoder,
                          TinyGBufferEncoderConfig)
from alaya.data.dataset import ClipDataset
from alaya.models.student import Student, StudentConfig
from alaya.renderers import StudentRenderer


def student():
    torch.manual_seed(0)
    s = Student(StudentConfig(latent_channels=4, gbuffer_channels=20, widths=(16, 16), emb_dim=16, steps=2))
    with torch.no_grad():
        for p in s.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return s


@pytest.fixture(scope="module")
def clip(tiny_dataset):
    ds = ClipDataset(tiny_dataset)
    return ds.load(ds.ids()[0])


def full(**kw):
    torch.manual_seed(1)
    return StudentRenderer(student(), "full", autoencoder=Autoencoder(AutoencoderConfig(latent_channels=4,
                                                                                         channels=(8, 8, 8))), **kw)


def tiny(**kw):
    torch.manual_seed(1)
    return StudentRenderer(student(), "tiny", gbuffer_encoder=TinyGBufferEncoder(TinyGBufferEncoderConfig(
        latent_channels=4, width=4)), decoder=TinyDecoder(TinyDecoderConfig(latent_channels=4, channels=(8, 8, 8))),
        **kw)


@pytest.mark.parametrize("make", [full, lambda: full(guidance=2.0), lambda: tiny(backend="torch")])
def test_frames_are_causal_deterministic_and_follow_the_prompt(make, clip):
    r = make()
    T = clip["depth"].shape[0]
    out = r.render(clip, "a clear sunny noon", seed=3)
    assert out.shape == (T, 32, 32, 3) and out.dtype == np.uint8
    assert np.array_equal(out, r.render(clip, "a clear sunny noon", seed=3))
    assert not np.array_equal(out, r.render(clip, "a neon-lit night", seed=3))
    first_two = {k: v[:2] if k not in ("rgb", "styles", "K") else v for k, v in clip.items()}   # K: one per clip
    short = r.render(first_two, "a clear sunny noon", 3)
    assert np.array_equal(short, out[:2])                  # no frame sees the future


def test_bad_setups_are_refused(clip):
    with pytest.raises(ValueError, match="autoencoder"):
        StudentRenderer(student(), "full")
    with pytest.raises(ValueError, match="guidance"):
        tiny(guidance=2.0)
    with pytest.raises(ValueError, match="codecs"):
        StudentRenderer(student(), "huge")
    with pytest.raises(KeyError, match="motion"):
        full().render({k: v for k, v in clip.items() if k != "motion"}, "x")

"""Codec contracts: shapes, save/load, input errors, streaming decode."""

import json

import numpy as np
import pytest
import torch

from alaya.codecs import (Autoencoder, AutoencoderConfig, StreamingDecoder, TinyDecoder,
                          TinyDecoderConfig, TinyGBufferEncoder, TinyGBufferEncoderConfig)
from alaya.codecs.gbuffer import GBUFFER_INPUT_CHANNELS, gbuffer_input, teacher_gbuffer_latents

SMALL_AE = AutoencoderConfig(latent_channels=4, channels=(8, 8, 8))


@pytest.mark.parametrize("h,w", [(64, 64), (128, 128), (96, 160), (8, 8)])
def test_shapes(h, w):
    torch.manual_seed(0)
    ae = Autoencoder(SMALL_AE).eval()
    x = torch.rand(2, 3, h, w)
    z = ae.encode(x)
    assert z.shape == (2, 4, h // 8, w // 8) and z.abs().max() < 3
    y = ae.decode(z)
    assert y.shape == x.shape and y.min() >= 0 and y.max() <= 1
    if h % 8 == 0 and w % 8 == 0 and h >= 8:
        enc = TinyGBufferEncoder(TinyGBufferEncoderConfig(latent_channels=4, width=2)).eval()
        assert enc(torch.rand(2, GBUFFER_INPUT_CHANNELS, h, w)).shape == (2, 20, h // 8, w // 8)
        dec = TinyDecoder(TinyDecoderConfig(latent_channels=4, channels=(8, 8, 8))).eval()
        img, state = dec(z)
        assert img.shape == x.shape and state.shape == (2, 8, h // 8, w // 8)


def test_save_load_round_trip(tmp_path):
    torch.manual_seed(1)
    models = [Autoencoder(SMALL_AE), TinyGBufferEncoder(TinyGBufferEncoderConfig(latent_channels=4, width=2)),
              TinyDecoder(TinyDecoderConfig(latent_channels=4, channels=(8, 8, 8)))]
    inputs = [torch.rand(1, 3, 32, 32), torch.rand(1, 9, 32, 32), torch.randn(1, 4, 4, 4)]
    for model, x in zip(models, inputs):
        model.eval()
        folder = tmp_path / type(model).__name__
        model.save_pretrained(folder, note="test")
        loaded = type(model).from_pretrained(folder).eval()
        a, b = model(x), loaded(x)
        a, b = (a[0], b[0]) if isinstance(a, tuple) else (a, b)
        assert torch.equal(a, b)
        cfg = json.loads((folder / "config.json").read_text())
        assert cfg["class"] == type(model).__name__ and cfg["note"] == "test"


def test_from_pretrained_errors(tmp_path):
    Autoencoder(SMALL_AE).save_pretrained(tmp_path / "ae")
    with pytest.raises(ValueError, match="not a TinyDecoder"):
        TinyDecoder.from_pretrained(tmp_path / "ae")
    with pytest.raises(FileNotFoundError, match="config.json"):
        Autoencoder.from_pretrained(tmp_path / "nothing")
    (tmp_path / "ae" / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        Autoencoder.from_pretrained(tmp_path / "ae")


def test_bad_inputs_give_clear_errors():
    ae = Autoencoder(SMALL_AE).eval()
    with pytest.raises(ValueError, match=r"expected shape \(B, 3, H, W\)"):
        ae.encode(torch.rand(1, 4, 32, 32))
    with pytest.raises(ValueError, match="multiples of 8"):
        ae.encode(torch.rand(1, 3, 30, 32))
    bad = torch.rand(1, 3, 32, 32)
    bad[0, 0, 3, 3] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        ae.encode(bad)
    with pytest.raises(ValueError, match="latent"):
        ae.decode(torch.rand(1, 3, 4, 4))
    dec = TinyDecoder(TinyDecoderConfig(latent_channels=4, channels=(8, 8, 8))).eval()
    _, state = dec(torch.randn(1, 4, 4, 4))
    with pytest.raises(ValueError, match="reset"):
        dec(torch.randn(1, 4, 8, 8), state)
    with pytest.raises(KeyError, match="missing key .albedo"):
        gbuffer_input({"depth": np.ones((4, 4), np.float32)})


def test_streaming_decode_matches_sequence_and_state_semantics():
    torch.manual_seed(2)
    dec = TinyDecoder(TinyDecoderConfig(latent_channels=4, channels=(8, 8, 8))).eval()
    z = torch.randn(1, 5, 4, 4, 4)
    with torch.no_grad():
        for p in dec.parameters():            # zero-initialised layers would hide the memory
            p.add_(torch.randn_like(p) * 0.1)
        seq = dec.decode_sequence(z)
        stream = StreamingDecoder(dec)
        frames = [stream.decode(z[:, t]) for t in range(5)]
        assert torch.equal(torch.stack(frames, 1), seq)
        stream.reset()
        assert torch.equal(stream.decode(z[:, 0]), dec(z[:, 0])[0])   # reset = no history
        assert not torch.equal(stream.decode(z[:, 0]), seq[:, 0])     # memory is used
        # without temporal memory, streaming equals frame-by-frame decoding
        flat = TinyDecoder(TinyDecoderConfig(latent_channels=4, channels=(8, 8, 8), temporal=False)).eval()
        s2 = StreamingDecoder(flat)
        for t in range(5):
            assert torch.equal(s2.decode(z[:, t]), flat(z[:, t])[0])


def test_gbuffer_latents_stack_every_modality():
    ae = Autoencoder(SMALL_AE).eval()
    frame = {"depth": np.full((2, 16, 16), 3.0, np.float32),
             "normal": np.tile(np.array([0, 0, 1], np.float16), (2, 16, 16, 1)),
             "albedo": np.full((2, 16, 16, 3), 128, np.uint8),
             "roughness": np.zeros((2, 16, 16), np.uint8), "metallic": np.zeros((2, 16, 16), np.uint8)}
    x = gbuffer_input(frame)
    assert x.shape == (2, 9, 16, 16)
    assert torch.allclose(x[:, 6], torch.full((2, 16, 16), 1 / (1 + 0.75)))
    z = teacher_gbuffer_latents(ae, x)
    assert z.shape == (2, 20, 2, 2)
    assert torch.allclose(z[:, :4], ae.encode(x[:, :3]))      # albedo block comes first


def test_tiny_codecs_initialised_from_the_full_codec_match_its_linear_path():
    torch.manual_seed(3)
    ae = Autoencoder(SMALL_AE).eval()            # conv branches start at zero: a pure block codec
    ae.init_linear_path(torch.rand(8, 3, 32, 32))
    enc = TinyGBufferEncoder(TinyGBufferEncoderConfig(latent_channels=4, width=2)).eval()
    dec = TinyDecoder(TinyDecoderConfig(latent_channels=4, channels=(8, 8, 8))).eval()
    enc.init_from_autoencoder(ae)
    dec.init_from_autoencoder(ae)
    raw = torch.rand(2, 9, 32, 32)
    raw[:, 3:6] = raw[:, 3:6] * 2 - 1                 # normals in [-1, 1]
    with torch.no_grad():
        assert torch.allclose(enc(raw), teacher_gbuffer_latents(ae, raw), atol=1e-4)
        z = ae.encode(torch.rand(2, 3, 32, 32))
        assert torch.allclose(dec(z)[0], ae.decode(z), atol=1e-5)

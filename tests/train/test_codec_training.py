"""Codec training: runs end to end on a tiny dataset, resumes exactly after an interruption."""

import torch
from safetensors.torch import load_file

from alaya.codecs import Autoencoder, AutoencoderConfig, TinyDecoder, TinyGBufferEncoder
from alaya.train.codecs import CodecTrainConfig, train_codec
from alaya.train.loop import TrainConfig
from alaya.train.tiny_codecs import TinyCodecTrainConfig, train_tiny_codecs

SMALL = AutoencoderConfig(latent_channels=4, channels=(8, 8, 8))


def codec_cfg(data, tmp_path, steps, run="run"):
    return CodecTrainConfig(data=str(data), out=str(tmp_path / "ae"), crop=16, val_frames=4,
                            autoencoder=SMALL,
                            train=TrainConfig(run_dir=str(tmp_path / run), steps=steps, batch_size=4,
                                              log_every=1, val_every=2, ckpt_every=2, progress=False,
                                              warmup=2))


def test_codec_training_resumes_exactly(tiny_dataset, tmp_path):
    straight = train_codec(codec_cfg(tiny_dataset, tmp_path, 4, "straight"))
    train_codec(codec_cfg(tiny_dataset, tmp_path, 2, "resumed"))          # "killed" at step 2
    resumed = train_codec(codec_cfg(tiny_dataset, tmp_path, 4, "resumed"))
    for (k, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-6), k
    loaded = Autoencoder.from_pretrained(tmp_path / "ae")
    assert "metrics" in (tmp_path / "ae" / "config.json").read_text()
    assert (tmp_path / "resumed" / "metrics.jsonl").read_text().count("\n") == 4   # one row a step
    csv = (tmp_path / "resumed" / "metrics.csv").read_text().splitlines()
    assert csv[0].startswith("step,") and len(csv) == 5
    assert (tmp_path / "resumed" / "metrics.png").stat().st_size > 1000
    assert loaded.config == SMALL


def test_tiny_codecs_distil_and_save(tiny_dataset, tmp_path):
    train_codec(codec_cfg(tiny_dataset, tmp_path, 2))
    cfg = TinyCodecTrainConfig(
        data=str(tiny_dataset), autoencoder=str(tmp_path / "ae"), pairs=8,
        out_encoder=str(tmp_path / "enc"), out_decoder=str(tmp_path / "dec"),
        train=TrainConfig(run_dir=str(tmp_path / "tiny"), steps=3, batch_size=4, log_every=1,
                          val_every=3, ckpt_every=3, progress=False, warmup=1))
    from alaya.codecs.tiny import TinyDecoderConfig, TinyGBufferEncoderConfig
    cfg.encoder = TinyGBufferEncoderConfig(latent_channels=4, width=2)
    cfg.decoder = TinyDecoderConfig(latent_channels=4, channels=(8, 8, 8))
    train_tiny_codecs(cfg)
    enc = TinyGBufferEncoder.from_pretrained(tmp_path / "enc")
    dec = TinyDecoder.from_pretrained(tmp_path / "dec")
    assert enc.config.latent_channels == 4 and dec.config.latent_channels == 4
    assert "gbuffer_latent_rel_mse" in (tmp_path / "enc" / "config.json").read_text()
    ck = load_file(str(next((tmp_path / "tiny").glob("ckpt_*")) / "model.safetensors"))
    assert any(k.startswith("encoder.") for k in ck) and any(k.startswith("decoder.") for k in ck)

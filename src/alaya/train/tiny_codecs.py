"""Distilling the tiny codecs from the full autoencoder (``alaya train tiny-codecs``).

Targets are computed once for a cached set of training frames: for ``pairs`` consecutive frame
pairs (same clip and style) the full encoder's latents and the full decoder's reconstructions,
and for the G-buffer of each pair's second frame the teacher's G-buffer latents. The tiny
G-buffer encoder regresses those latents (MSE); the tiny decoder decodes the pair as a stream
(reset, then with memory) and regresses the full decoder's output with L1, plus
``pixel_weight`` x L1 to the ground-truth frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from alaya.codecs.autoencoder import Autoencoder, to_images
from alaya.codecs.gbuffer import gbuffer_input, teacher_gbuffer_latents
from alaya.codecs.tiny import TinyDecoder, TinyDecoderConfig, TinyGBufferEncoder, TinyGBufferEncoderConfig
from alaya.data.frames import FrameBank
from alaya.train.codecs import psnr
from alaya.train.loop import TrainConfig, Trainer


@dataclass
class TinyCodecTrainConfig:
    data: str
    autoencoder: str = "weights/autoencoder"
    out_encoder: str = "weights/tiny_gbuffer_encoder"
    out_decoder: str = "weights/tiny_decoder"
    pairs: int = 1536
    pixel_weight: float = 0.5
    encoder_weight: float = 1.0
    encoder: TinyGBufferEncoderConfig | None = None
    decoder: TinyDecoderConfig | None = None
    train: TrainConfig = field(default_factory=lambda: TrainConfig(run_dir="runs/tiny", batch_size=16))


@torch.no_grad()
def build_targets(ae: Autoencoder, bank: FrameBank, pairs: int, seed: int, batch: int = 32,
                  progress: bool = True) -> dict[str, torch.Tensor]:
    """Cached distillation targets for ``pairs`` (t-1, t) frame pairs of the bank."""
    n, s, t, _, _ = bank.shape
    rng = np.random.default_rng([seed, 99])
    c, st, f = rng.integers(n, size=pairs), rng.integers(s, size=pairs), rng.integers(1, t, size=pairs)
    out: dict[str, list] = {k: [] for k in ("rgb", "latent", "full", "gbuffer", "gb_latent")}
    for i in tqdm(range(0, pairs, batch), desc="distillation targets", disable=not progress):
        sl = slice(i, i + batch)
        x = to_images(bank.rgb[c[sl][:, None], st[sl][:, None], np.stack([f[sl] - 1, f[sl]], 1)])
        z = ae.encode(x)
        out["rgb"].append((x * 255).round().to(torch.uint8).reshape(-1, 2, *x.shape[1:]))
        out["latent"].append(z.reshape(-1, 2, *z.shape[1:]).half())
        out["full"].append((ae.decode(z) * 255).round().to(torch.uint8).reshape(-1, 2, *x.shape[1:]))
        g = gbuffer_input({k: v[c[sl], f[sl]] for k, v in bank.gbuffer.items()})
        out["gbuffer"].append(g.half())
        out["gb_latent"].append(teacher_gbuffer_latents(ae, g).half())
    return {k: torch.cat(v) for k, v in out.items()}


class TinyCodecs(nn.Module):
    def __init__(self, encoder: TinyGBufferEncoder, decoder: TinyDecoder):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(self, gbuffer: torch.Tensor, latents: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(G-buffer latents, decoded frames of the latent sequences (B, T, C, h, w))."""
        return self.encoder(gbuffer), self.decoder.decode_sequence(latents)


@torch.no_grad()
def evaluate_tiny(codecs: TinyCodecs, targets: dict[str, torch.Tensor], batch: int = 32) -> dict[str, float]:
    """Relative MSE of G-buffer latents; PSNR of tiny vs full decoding against ground truth."""
    err, var, p_tiny, p_full = [], [], [], []
    for i in range(0, len(targets["latent"]), batch):
        sl = slice(i, i + batch)
        gl = targets["gb_latent"][sl].float()
        pred = codecs.encoder(targets["gbuffer"][sl].float())
        err.append(float(((pred - gl) ** 2).mean()))
        var.append(float(gl.var()))
        frames = codecs.decoder.decode_sequence(targets["latent"][sl].float()).clamp(0, 1)
        gt = targets["rgb"][sl].float() / 255
        p_tiny.append(psnr(frames[:, 1], gt[:, 1]))
        p_full.append(psnr(targets["full"][sl][:, 1].float() / 255, gt[:, 1]))
    return {"gbuffer_latent_rel_mse": float(np.mean(err) / np.mean(var)),
            "tiny_decoder_psnr": float(np.mean(p_tiny)), "full_decoder_psnr": float(np.mean(p_full))}


def train_tiny_codecs(cfg: TinyCodecTrainConfig) -> TinyCodecs:
    ae = Autoencoder.from_pretrained(cfg.autoencoder).eval()
    C = ae.latent_channels
    tc = cfg.train
    train_t = build_targets(ae, FrameBank.load(cfg.data, "train"), cfg.pairs, tc.seed, progress=tc.progress)
    val_t = build_targets(ae, FrameBank.load(cfg.data, "val"), 128, tc.seed + 1, progress=False)
    torch.manual_seed(tc.seed)
    enc = TinyGBufferEncoder(cfg.encoder or TinyGBufferEncoderConfig(latent_channels=C))
    dec = TinyDecoder(cfg.decoder or TinyDecoderConfig(latent_channels=C))
    enc.init_from_autoencoder(ae)      # both start from the full codec's block transforms
    dec.init_from_autoencoder(ae)
    codecs = TinyCodecs(enc, dec)
    gl_var = float(train_t["gb_latent"].float().var())

    def loss_fn(m: TinyCodecs, step: int):
        idx = torch.from_numpy(np.random.default_rng([tc.seed, step]).integers(cfg.pairs, size=tc.batch_size))
        pred, frames = m(train_t["gbuffer"][idx].float(), train_t["latent"][idx].float())
        enc_loss = ((pred - train_t["gb_latent"][idx].float()) ** 2).mean() / gl_var
        full = train_t["full"][idx].float() / 255
        gt = train_t["rgb"][idx].float() / 255
        distill = (frames - full).abs().mean()
        pixel = (frames - gt).abs().mean()
        loss = cfg.encoder_weight * enc_loss + distill + cfg.pixel_weight * pixel
        return loss, {"enc_rel_mse": float(enc_loss.detach()), "dec_distill_l1": float(distill.detach())}

    trainer = Trainer(codecs, tc, loss_fn, lambda m: evaluate_tiny(m, val_t),
                      describe={"tiny": {k: str(v) for k, v in cfg.__dict__.items() if k != "train"}})
    codecs = trainer.run().eval()
    if not trainer.dist.is_main:           # under torchrun, rank 0 evaluates and saves
        return codecs
    test_t = build_targets(ae, FrameBank.load(cfg.data, "test"), 256, tc.seed + 2, progress=False)
    test = evaluate_tiny(codecs, test_t)
    trained = {"steps": tc.steps, "batch_size": tc.batch_size, "pairs": cfg.pairs, "data": cfg.data,
               "teacher": cfg.autoencoder}
    codecs.encoder.save_pretrained(cfg.out_encoder, metrics={"test": test}, trained=trained)
    codecs.decoder.save_pretrained(cfg.out_decoder, metrics={"test": test}, trained=trained)
    return codecs

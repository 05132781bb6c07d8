"""Training recipe for the full autoencoder (``alaya train codec``); the tiny codecs are
distilled from it (``alaya train tiny-codecs``, ``tiny_codecs.py``).

The full autoencoder trains on random crops of every style's RGB frames plus a share of
G-buffer modality images (so that the teacher's G-buffer latents are faithful), with
L1 + (1 - SSIM). The tiny codecs are distilled from it: the grouped G-buffer encoder regresses
the teacher's G-buffer latents; the streaming decoder regresses the full decoder's output
(plus an L1 pixel term against the ground truth) over pairs of consecutive frames, so its
temporal memory learns to use the previous frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from pytorch_msssim import ssim

from alaya.codecs.autoencoder import Autoencoder, AutoencoderConfig, to_images
from alaya.codecs.gbuffer import MODALITIES, gbuffer_input, modality_images
from alaya.data.frames import FrameBank
from alaya.train.loop import TrainConfig, Trainer


def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    """PSNR in dB of images in [0, 1] (mean over the batch of per-image PSNR)."""
    mse = ((a.float() - b.float()) ** 2).flatten(1).mean(1).clamp(min=1e-10)
    return float((10 * torch.log10(1.0 / mse)).mean())


@dataclass
class CodecTrainConfig:
    data: str
    out: str = "weights/autoencoder"
    crop: int = 64
    ssim_weight: float = 0.2
    gbuffer_fraction: float = 0.25
    val_frames: int = 96
    autoencoder: AutoencoderConfig = field(default_factory=AutoencoderConfig)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(run_dir="runs/codec"))


def _gbuffer_frames(bank: FrameBank, c: np.ndarray, t: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[c, t] for k, v in bank.gbuffer.items()}


def codec_batch(bank: FrameBank, batch: int, crop: int | None, gbuffer_fraction: float, seed: int,
                step: int) -> torch.Tensor:
    """A training batch of RGB crops with a share of G-buffer modality images."""
    c, s, t = bank.sample_indices(batch, seed, step)
    n_gb = int(round(batch * gbuffer_fraction)) if bank.gbuffer else 0
    images = to_images(bank.rgb[c[n_gb:], s[n_gb:], t[n_gb:]])
    if n_gb:
        raw = gbuffer_input(_gbuffer_frames(bank, c[:n_gb], t[:n_gb]))
        mods = modality_images(raw)
        pick = np.random.default_rng([seed, step, 2]).integers(len(MODALITIES), size=n_gb)
        gb = torch.stack([mods[MODALITIES[k]][i] for i, k in enumerate(pick)])
        images = torch.cat([gb, images])
    ys, xs, h, w = bank.crop_offsets(batch, crop, seed, step)
    if h == images.shape[-2] and w == images.shape[-1]:
        return images
    return torch.stack([img[:, y:y + h, x:x + w] for img, y, x in zip(images, ys, xs)])


@torch.no_grad()
def evaluate_autoencoder(model: Autoencoder, bank: FrameBank, frames: int, seed: int = 123,
                         batch: int = 16) -> dict[str, float]:
    """PSNR/SSIM of full-frame RGB reconstructions, and PSNR of G-buffer modality images."""
    rgb_psnr, rgb_ssim, gb_psnr = [], [], []
    for i in range(0, frames, batch):
        x = codec_batch(bank, min(batch, frames - i), None, 0.0, seed, i)
        y = model(x).clamp(0, 1)
        rgb_psnr.append(psnr(y, x))
        rgb_ssim.append(float(ssim(y, x, data_range=1.0)))
        g = codec_batch(bank, min(batch, frames - i), None, 1.0, seed + 1, i)
        gb_psnr.append(psnr(model(g).clamp(0, 1), g))
    return {"psnr": float(np.mean(rgb_psnr)), "ssim": float(np.mean(rgb_ssim)),
            "gbuffer_psnr": float(np.mean(gb_psnr))}


def train_codec(cfg: CodecTrainConfig) -> Autoencoder:
    train_bank = FrameBank.load(cfg.data, "train")
    val_bank = FrameBank.load(cfg.data, "val")
    tc = cfg.train
    torch.manual_seed(tc.seed)
    model = Autoencoder(cfg.autoencoder)
    sample = torch.cat([codec_batch(train_bank, 64, None, cfg.gbuffer_fraction, tc.seed + 9, i)
                        for i in range(4)])
    model.init_linear_path(sample)        # (restored from the checkpoint when resuming)

    def loss_fn(m: Autoencoder, step: int):
        x = codec_batch(train_bank, tc.batch_size, cfg.crop, cfg.gbuffer_fraction, tc.seed, step)
        y = m(x)                            # forward, so DistributedDataParallel syncs
        l1 = (y - x).abs().mean()
        s = ssim(y.float().clamp(0, 1), x, data_range=1.0, win_size=7)
        loss = l1 + cfg.ssim_weight * (1 - s)
        return loss, {"l1": float(l1.detach()), "ssim": float(s.detach())}

    trainer = Trainer(model, tc, loss_fn, lambda m: evaluate_autoencoder(m, val_bank, cfg.val_frames),
                      describe={"codec": {k: v for k, v in cfg.__dict__.items() if k != "train"}})
    model = trainer.run().eval()
    if not trainer.dist.is_main:           # under torchrun, rank 0 evaluates and saves
        return model
    test = evaluate_autoencoder(model, FrameBank.load(cfg.data, "test"), 256)
    model.save_pretrained(cfg.out, metrics={"test": test}, trained={
        "steps": tc.steps, "batch_size": tc.batch_size, "crop": cfg.crop, "data": cfg.data,
        "run_dir": tc.run_dir})
    return model

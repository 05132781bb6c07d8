"""Codec benchmark: parameters and median ms per frame at 128x128 output, plus quality.

Usage: python bench/codecs.py [--weights weights] [--data DATASET] [--frames 64] [--repeats 50]

Times (batch 1, fp32, torch threads = cores; each network in whichever memory format is faster
for it, contiguous or channels_last, reported in ``*_format``) for the full encoder and decoder,
the tiny G-buffer encoder, the tiny decoder (streaming, with its memory), and diffusers'
AutoencoderTiny (the TAESD architecture, random weights, the same latent channels, decoding the
same 16x16 latent to 128x128) measured in the same run. Quality (when --data is given): PSNR of
full and tiny decoding on the test split, and the tiny encoder's relative MSE against the
teacher's G-buffer latents. Prints a table, then one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch


def median_ms(fn, repeats: int) -> float:
    for _ in range(5):
        fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return round(float(np.median(samples)) * 1e3, 3)


def params(m: torch.nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


@torch.no_grad()
def quality(ae, enc, dec, data: str, frames: int) -> dict:
    from alaya.train.tiny_codecs import build_targets, evaluate_tiny, TinyCodecs
    from alaya.data.frames import FrameBank
    targets = build_targets(ae, FrameBank.load(data, "test"), frames, seed=7, progress=False)
    q = evaluate_tiny(TinyCodecs(enc, dec), targets)
    return {"full_psnr": round(q["full_decoder_psnr"], 3), "tiny_decoder_psnr": round(q["tiny_decoder_psnr"], 3),
            "tiny_gbuffer_encoder_rel_mse": round(q["gbuffer_latent_rel_mse"], 5)}


@torch.no_grad()
def write_sheet(ae, dec, data: str, path: str, rows: int = 7) -> None:
    """Rows of test frames (one per style): ground truth | full codec | tiny decoder."""
    from PIL import Image

    from alaya.data.frames import FrameBank
    bank = FrameBank.load(data, "test")
    n, s, t, _, _ = bank.shape
    x = torch.stack([torch.from_numpy(bank.rgb[i % n, i % s, t - 1]) for i in range(rows)])
    x = x.permute(0, 3, 1, 2).float().contiguous() / 255
    prev = torch.stack([torch.from_numpy(bank.rgb[i % n, i % s, t - 2]) for i in range(rows)])
    prev = prev.permute(0, 3, 1, 2).float().contiguous() / 255
    z = ae.encode(torch.cat([prev, x]))
    full = ae.decode(z[rows:])
    tiny = dec.decode_sequence(torch.stack([z[:rows], z[rows:]], 1))[:, 1]
    grid = torch.cat([torch.cat([a, b, c], 2) for a, b, c in zip(x, full, tiny)], 1)
    Image.fromarray((grid.permute(1, 2, 0).clamp(0, 1) * 255).round().byte().numpy()).save(path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weights", default="weights")
    p.add_argument("--data", default=None, help="dataset folder for the quality numbers")
    p.add_argument("--frames", type=int, default=64)
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--sheet", default=None, help="write a PNG: ground truth | full | tiny (needs --data)")
    args = p.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    from diffusers import AutoencoderTiny

    from alaya.codecs import Autoencoder, StreamingDecoder, TinyDecoder, TinyGBufferEncoder
    w = Path(args.weights)
    ae = Autoencoder.from_pretrained(w / "autoencoder").eval()
    enc = TinyGBufferEncoder.from_pretrained(w / "tiny_gbuffer_encoder").eval()
    dec = TinyDecoder.from_pretrained(w / "tiny_decoder").eval()
    C = ae.latent_channels
    taesd = AutoencoderTiny(latent_channels=C).eval()
    x = torch.rand(1, 3, 128, 128)
    z = torch.randn(1, C, 16, 16).clamp(-3, 3)
    g = torch.rand(1, 9, 128, 128)
    stream = StreamingDecoder(dec)

    def fastest(name: str, module: torch.nn.Module, fn, inp: torch.Tensor) -> dict:
        best = None
        for fmt, mf in (("contiguous", torch.contiguous_format), ("channels_last", torch.channels_last)):
            module.to(memory_format=mf)
            data = inp.to(memory_format=mf)
            stream.reset()
            ms = median_ms(lambda: fn(data), args.repeats)
            if best is None or ms < best[0]:
                best = (ms, fmt)
        return {f"{name}_ms": best[0], f"{name}_format": best[1]}

    with torch.no_grad():
        assert taesd.decoder(z).shape[-2:] == (128, 128)
        result = {
            "bench": "codecs", "threads": torch.get_num_threads(), "latent_channels": C,
            "full_encoder_params": params(ae.encoder), "full_decoder_params": params(ae.decoder),
            "tiny_gbuffer_encoder_params": params(enc), "tiny_decoder_params": params(dec),
            "autoencoder_tiny_decoder_params": params(taesd.decoder),
            **fastest("full_encoder", ae, ae.encode, x),
            **fastest("full_decoder", ae, ae.decode, z),
            **fastest("tiny_gbuffer_encoder", enc, enc, g),
            **fastest("tiny_decoder", dec, stream.decode, z),
            **fastest("autoencoder_tiny", taesd, taesd.decoder, z),
        }
    result["tiny_codecs_ms"] = round(result["tiny_gbuffer_encoder_ms"] + result["tiny_decoder_ms"], 3)
    result["tiny_decoder_speedup_vs_autoencoder_tiny"] = round(
        result["autoencoder_tiny_ms"] / result["tiny_decoder_ms"], 2)
    if args.data:
        result.update(quality(ae, enc, dec, args.data, args.frames))
        if args.sheet:
            write_sheet(ae, dec, args.data, args.sheet)
        result["tiny_minus_full_psnr"] = round(result["tiny_decoder_psnr"] - result["full_psnr"], 3)
    for m in (ae, enc, dec):
        m.to(memory_format=torch.contiguous_format)
    for k, v in result.items():
        print(f"{k:45s} {v}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()

"""A latent cache beside a dataset: every clip's RGB styles and G-buffer, encoded once.

``DATASET/latents/<codec-id>/<clip_id>.safetensors`` holds ``rgb`` (S, T, C, h, w) float16 (the
full encoder's latents of every style) and ``gbuffer`` (T, 5C, h, w) float16 (the teacher's
G-buffer latents), with the style names in the metadata. Files are written atomically; a killed
run resumes. The codec id is a hash of the autoencoder's weights, so a retrained codec never
reads stale latents.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch
from safetensors import safe_open
from tqdm import tqdm

from alaya.codecs.autoencoder import Autoencoder, to_images
from alaya.codecs.gbuffer import gbuffer_input, teacher_gbuffer_latents
from alaya.data.dataset import ClipDataset
from alaya.io import atomic_save_tensors


def codec_id(ae: Autoencoder) -> str:
    h = hashlib.blake2b(digest_size=8)
    for k, v in sorted(ae.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


@torch.no_grad()
def encode_clip(ae: Autoencoder, clip: dict, batch: int = 32) -> dict[str, torch.Tensor]:
    """CPU float16 latents of one clip, encoded on the device ``ae`` is on."""
    device = next(ae.parameters()).device
    S, T = clip["rgb"].shape[:2]
    images = to_images(clip["rgb"])                                   # (S*T, 3, H, W)
    z = torch.cat([ae.encode(images[i:i + batch].to(device)).cpu() for i in range(0, len(images), batch)])
    g = gbuffer_input({k: clip[k] for k in ("depth", "normal", "albedo", "roughness", "metallic")})
    gz = torch.cat([teacher_gbuffer_latents(ae, g[i:i + batch].to(device)).cpu() for i in range(0, T, batch)])
    return {"rgb": z.reshape(S, T, *z.shape[1:]).half(), "gbuffer": gz.half()}


def build_latent_cache(root: str | os.PathLike, ae: Autoencoder, progress: bool = True,
                       device: str | torch.device = "cpu") -> Path:
    """Encode every clip of the dataset at ``root`` that is not cached yet (on ``device``; ``ae``
    is left on the CPU); returns the folder."""
    ds = ClipDataset(root)
    folder = Path(root) / "latents" / codec_id(ae)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob(".*.tmp"):
        stale.unlink(missing_ok=True)
    missing = [cid for cid in ds.ids() if not (folder / f"{cid}.safetensors").exists()]
    if not missing:
        return folder
    ae = ae.to(device).eval()
    try:
        for cid in tqdm(missing, desc="latent cache", disable=not progress):
            clip = ds.load(cid)
            tensors = encode_clip(ae, clip)
            atomic_save_tensors(folder / f"{cid}.safetensors", tensors,
                                metadata={"styles": json.dumps([str(s) for s in clip["styles"]])})
    finally:
        ae.to("cpu")
    return folder


def load_latents(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], list[str]]:
    """(tensors, style names) of one cached clip."""
    with safe_open(str(path), "pt") as f:
        styles = json.loads(f.metadata()["styles"])
        return {k: f.get_tensor(k) for k in f.keys()}, styles

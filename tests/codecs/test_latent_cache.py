"""The latent cache encodes every clip once, matches direct encoding, and resumes."""

import torch

from alaya.codecs import Autoencoder, AutoencoderConfig
from alaya.codecs.autoencoder import to_images
from alaya.codecs.gbuffer import gbuffer_input, teacher_gbuffer_latents
from alaya.codecs.latent_cache import build_latent_cache, codec_id, load_latents
from alaya.data.dataset import ClipDataset


def test_latent_cache(tiny_dataset):
    torch.manual_seed(0)
    ae = Autoencoder(AutoencoderConfig(latent_channels=4, channels=(8, 8, 8))).eval()
    folder = build_latent_cache(tiny_dataset, ae, progress=False)
    ds = ClipDataset(tiny_dataset)
    assert sorted(p.stem for p in folder.glob("*.safetensors")) == sorted(ds.ids())
    cid = ds.ids()[0]
    clip = ds.load(cid)
    tensors, styles = load_latents(folder / f"{cid}.safetensors")
    assert styles == [str(s) for s in clip["styles"]]
    S, T = clip["rgb"].shape[:2]
    assert tensors["rgb"].shape == (S, T, 4, 4, 4) and tensors["gbuffer"].shape == (T, 20, 4, 4)
    with torch.no_grad():
        direct = ae.encode(to_images(clip["rgb"][1]))
        g = teacher_gbuffer_latents(ae, gbuffer_input({k: clip[k] for k in
                                                       ("depth", "normal", "albedo", "roughness", "metallic")}))
    assert torch.allclose(tensors["rgb"][1].float(), direct, atol=1e-2)
    assert torch.allclose(tensors["gbuffer"].float(), g, atol=1e-2)
    before = (folder / f"{cid}.safetensors").stat().st_mtime_ns
    assert build_latent_cache(tiny_dataset, ae, progress=False) == folder
    assert (folder / f"{cid}.safetensors").stat().st_mtime_ns == before      # not re-encoded
    other = Autoencoder(AutoencoderConfig(latent_channels=4, channels=(8, 8, 8)))
    assert codec_id(other) != codec_id(ae)

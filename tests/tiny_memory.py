"""The tiny memory model the memory tests share (imported as ``tiny_memory``)."""

import torch

from alaya.models.world import WorldModel, WorldModelConfig

TINY = WorldModelConfig(memory=True, latent_channels=80, widths=(16, 32), emb_dim=32, steps=2,
                        view_warp=True, ground_warp=True, memory_max_points=5000)


def still_model():
    """A memory model with a zero residual (a tiny sigma_data: its prediction ignores the noise)
    and a saturated gate: what a trained model does standing still, where the memory is right."""
    import dataclasses
    model = WorldModel(dataclasses.replace(TINY, sigma_data=1e-4))
    with torch.no_grad():
        model.core.out.bias[64:] = 1e6
    return model

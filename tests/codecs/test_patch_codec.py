"""PatchCodec: an exact, linear latent space."""

import pytest
import torch

from alaya.codecs.patch import PatchCodec, PatchCodecConfig


def test_round_trip_is_exact_and_linear():
    codec = PatchCodec().eval()
    x = torch.rand(2, 3, 32, 48)
    z = codec.encode(x)
    assert z.shape == (2, 48, 8, 12) and z.abs().max() <= 1
    assert torch.allclose(codec.decode(z), x, atol=1e-6)
    y = torch.rand_like(x)
    # the average of two latents decodes to the average image: no "mush" from averaging
    assert torch.allclose(codec.decode((z + codec.encode(y)) / 2), (x + y) / 2, atol=1e-6)
    rgb, state = codec(z, "memory")
    assert torch.equal(rgb, codec.decode(z)) and state == "memory"


def test_bad_shapes_are_named():
    codec = PatchCodec(PatchCodecConfig(factor=4))
    with pytest.raises(ValueError, match="multiples of 4"):
        codec.encode(torch.rand(1, 3, 30, 32))
    with pytest.raises(ValueError, match="latent"):
        codec.decode(torch.rand(1, 32, 8, 8))

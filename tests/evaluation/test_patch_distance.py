"""The structure distance (``alaya.evaluation.patch_distance``): small for frames of one kind
(patch sampling alone leaves a floor), large for a blur and for streaks of the same frames, checked inputs."""

import pytest
import torch
import torch.nn.functional as F

from alaya.evaluation.patch_distance import laplacian_bands, structure_distance


def scenes(n=24, size=64, seed=0):
    """Frames of flat-shaded boxes at random places: crisp edges in every direction."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 3, 1, 1, generator=g).expand(n, 3, size, size).clone()
    for i in range(n):
        for _ in range(6):
            y0, x0 = (int(v) for v in torch.randint(0, size - 8, (2,), generator=g))
            h, w = (int(v) for v in torch.randint(4, size // 2, (2,), generator=g))
            x[i, :, y0:y0 + h, x0:x0 + w] = torch.rand(3, 1, 1, generator=g)
    return x


def test_frames_of_one_kind_score_low_and_a_blur_or_streaks_high():
    a, b = scenes(seed=0), scenes(seed=1)
    same_kind = structure_distance(a, b)
    assert structure_distance(a, a) < 0.1 and same_kind < 0.1
    assert structure_distance(a, b, seed=3) == pytest.approx(structure_distance(a, b, seed=3))   # deterministic
    blurred = F.avg_pool2d(F.pad(b, (2, 2, 2, 2), mode="replicate"), 5, stride=1)
    streaks = b.mean(3, keepdim=True).expand_as(b) + 0.1 * torch.sin(torch.arange(64.0) * 1.3).view(1, 1, 64, 1)
    assert structure_distance(blurred, a) > 2 * same_kind
    assert structure_distance(streaks.clamp(0, 1), a) > 2 * same_kind


def test_bands_and_checked_inputs():
    x = torch.rand(2, 3, 64, 64)
    bands = laplacian_bands(x)
    assert [tuple(b.shape[-2:]) for b in bands] == [(64, 64), (32, 32), (16, 16)]
    assert len(laplacian_bands(torch.rand(2, 3, 20, 20))) == 1          # fewer levels on small frames
    flat = torch.full((2, 3, 32, 32), 0.4)
    assert all(float(b.abs().max()) < 1e-6 for b in laplacian_bands(flat))
    with pytest.raises(ValueError, match="too small"):
        laplacian_bands(torch.rand(1, 3, 8, 8))
    with pytest.raises(ValueError, match=r"\(T, 3, H, W\)"):
        laplacian_bands(torch.rand(3, 64, 64))
    with pytest.raises(ValueError, match="differ in size"):
        structure_distance(x, torch.rand(2, 3, 32, 32))

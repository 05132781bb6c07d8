"""The patch amplitude-spectrum loss: detail counts, its place does not."""

import pytest
import torch
import torch.nn.functional as F

from alaya.train.spectrum_loss import patch_spectrum_loss


def checkers(period: int = 8, size: int = 64, shift: int = 0) -> torch.Tensor:
    y, x = torch.meshgrid(torch.arange(size), torch.arange(size) + shift, indexing="ij")
    board = (((y // (period // 2)) + (x // (period // 2))) % 2).float()
    return torch.stack([board, 0.5 * board + 0.2, 1 - board])[None]          # (1, 3, size, size)


def blur(x: torch.Tensor, k: int = 5) -> torch.Tensor:
    return F.avg_pool2d(F.pad(x, (k // 2,) * 4, mode="replicate"), k, stride=1)


def test_detail_counts_and_its_place_does_not():
    real = checkers()
    assert patch_spectrum_loss(real, real).item() == pytest.approx(0.0, abs=1e-6)
    shifted = patch_spectrum_loss(checkers(shift=3), real).item()
    blurred = patch_spectrum_loss(blur(real), real).item()
    flat = patch_spectrum_loss(torch.full_like(real, 0.5), real).item()
    noise = patch_spectrum_loss(torch.rand(real.shape, generator=torch.Generator().manual_seed(0)), real).item()
    assert shifted < 0.2 * blurred, (shifted, blurred)      # the same checkers elsewhere: nearly free
    assert blurred < flat, (blurred, flat)                  # the mean of a checker is the worst answer
    assert noise > 2 * shifted, (noise, shifted)            # and confetti is not the right detail either


def test_only_where_counts():
    real, fake = checkers(), checkers()
    fake[..., :, 32:] = 0.5                                  # the right half flat
    left = torch.zeros(1, 1, 64, 64)
    left[..., :, :24] = 1
    assert patch_spectrum_loss(fake, real, left).item() == pytest.approx(0.0, abs=1e-6)
    assert patch_spectrum_loss(fake, real, 1 - left).item() > 0.2
    assert patch_spectrum_loss(fake, real, torch.zeros(1, 1, 64, 64)).item() == 0.0


def test_gradient_reaches_fake_and_bad_shapes_raise():
    real = checkers()
    fake = blur(real).requires_grad_(True)
    patch_spectrum_loss(fake, real).backward()
    assert fake.grad is not None and torch.isfinite(fake.grad).all() and fake.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="fake and real"):
        patch_spectrum_loss(real, real[..., :32])
    with pytest.raises(ValueError, match="where"):
        patch_spectrum_loss(real, real, torch.ones(1, 1, 32, 32))
    with pytest.raises(ValueError, match="patch"):
        patch_spectrum_loss(real, real, patch=128)


def test_luminance_weights_sum_to_one_and_shapes_are_checked():
    from alaya.train.spectrum_loss import luminance
    grey = torch.full((2, 3, 8, 8), 0.4)
    assert torch.allclose(luminance(grey), torch.full((2, 1, 8, 8), 0.4))
    with pytest.raises(ValueError, match="rgb"):
        luminance(grey[:, :1])

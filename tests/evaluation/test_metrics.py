"""Each renderer metric on cases with a known answer, so that each can fail."""

import numpy as np
import pytest
import torch

from alaya.evaluation import metrics as M


def texture(h=32, w=48, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(1, 3, h // 4, w // 4, generator=g)
    return torch.nn.functional.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)


def flat_gbuffer(T, h, w, motion=(0.0, 0.0)):
    return {"motion": np.broadcast_to(np.array(motion, np.float16), (T, h, w, 2)).copy(),
            "depth": np.full((T, h, w), 5.0, np.float32), "mask": np.ones((T, h, w), np.uint8),
            "instance": np.ones((T, h, w), np.uint16), "material": np.ones((T, h, w), np.uint16),
            "normal": np.broadcast_to(np.array([0, 0, 1], np.float16), (T, h, w, 3)).copy()}


def moving_sequence(T=5, step=1):
    """A texture sliding right by ``step`` px per frame: frame_t(x) = frame_{t-1}(x - step)."""
    base = texture(32, 64)
    return torch.cat([torch.roll(base, shifts=t * step, dims=-1) for t in range(T)])


def test_identical_frames():
    x = texture().repeat(3, 1, 1, 1)
    assert torch.all(M.psnr(x, x) == M.PSNR_CAP)
    assert torch.allclose(M.ssim(x, x), torch.ones(3), atol=1e-5)
    assert M.flicker(x, x) == 0.0


def test_shifted_frames_score_lower():
    x = texture().repeat(2, 1, 1, 1)
    shifted = torch.roll(x, 3, dims=-1)
    assert M.psnr(shifted, x).max() < 30
    assert M.ssim(shifted, x).max() < 0.95
    noisy = (x + 0.01 * torch.randn_like(x)).clamp(0, 1)
    assert M.psnr(noisy, x).min() > M.psnr(shifted, x).max()   # a small error beats a misalignment


def test_psnr_value():
    a = torch.zeros(1, 3, 8, 8)
    assert float(M.psnr(a + 0.1, a)[0]) == pytest.approx(20.0, abs=1e-4)   # mse 0.01


def test_sharpness_ratio_sees_blur_that_psnr_rewards():
    """A blurred copy of a grainy reference scores a higher PSNR than an equally grainy
    independent sample, and a sharpness ratio below that sample's (~1)."""
    g = torch.Generator().manual_seed(1)
    base = texture(32, 48)
    ref = (base + 0.1 * torch.randn(1, 3, 32, 48, generator=g)).clamp(0, 1)
    sample = (base + 0.1 * torch.randn(1, 3, 32, 48, generator=g)).clamp(0, 1)
    blurred = torch.nn.functional.avg_pool2d(ref, 3, 1, 1, count_include_pad=False)
    assert M.psnr(blurred, ref)[0] > M.psnr(sample, ref)[0]
    assert M.sharpness_ratio(ref, ref) == 1.0
    assert M.sharpness_ratio(blurred, ref) < 0.3
    assert 0.8 < M.sharpness_ratio(sample, ref) < 1.25
    flat = torch.full((1, 3, 8, 8), 0.5)
    assert M.sharpness_ratio(flat, flat) == 1.0
    speck = flat.clone()
    speck[..., 4, 4] += 1 / 255                       # one grey level on one pixel: still about flat
    assert M.sharpness_ratio(speck, flat) < 1.2 and M.sharpness_ratio(flat, speck) > 0.8
    assert 10 < M.sharpness_ratio(texture(8, 8), flat) < float("inf")
    with pytest.raises(ValueError, match="expected"):
        M.sharpness_ratio(ref, ref[:, :2])


def test_warp_error_is_zero_for_frames_that_follow_the_motion():
    seq = moving_sequence()
    T, _, h, w = seq.shape
    right = flat_gbuffer(T, h, w, motion=(-1.0, 0.0))    # the surface at x was at x - 1
    assert M.warp_error(seq, right) < 1e-5
    wrong = flat_gbuffer(T, h, w, motion=(1.0, 0.0))
    assert M.warp_error(seq, wrong) > 0.02
    shuffled = seq[torch.tensor([0, 3, 1, 4, 2])]
    assert M.warp_error(shuffled, right) > 0.02


def test_occlusion_mask_drops_pixels_from_outside_and_other_objects():
    T, h, w = 2, 8, 8
    g = flat_gbuffer(T, h, w, motion=(-1.0, 0.0))
    assert not M.occlusion_mask(g)[0, 0, :, 0].any()       # came from outside the image
    assert M.occlusion_mask(g)[0, 0, :, 1:].all()
    g["instance"][0, :, 3] = 2                              # another object was there at t-1
    assert not M.occlusion_mask(g)[0, 0, :, 4].any()


def test_flicker_measures_brightness_pumping():
    x = torch.full((4, 3, 16, 16), 0.5)
    pumped = x + torch.tensor([0.0, 0.1, 0.0, 0.1]).view(4, 1, 1, 1)
    assert M.flicker(pumped, x) == pytest.approx(0.1, abs=1e-5)
    assert M.flicker(pumped, pumped) == 0.0


def test_structure_f1_prefers_edges_where_the_gbuffer_has_them():
    T, h, w = 1, 32, 32
    g = flat_gbuffer(T, h, w)
    g["material"][:, :, 16:] = 2                            # one vertical border at x = 16
    aligned = torch.zeros(T, 3, h, w)
    aligned[..., 16:] = 1.0
    elsewhere = torch.zeros(T, 3, h, w)
    elsewhere[..., 5:] = 1.0
    assert M.structure_f1(aligned, g) > 0.9
    assert M.structure_f1(elsewhere, g) < 0.1
    assert M.structure_f1(torch.zeros(T, 3, h, w), g) == 0.0


def test_engine_motion_explains_reference_frames(tiny_dataset):
    from alaya.data.dataset import ClipDataset
    ds = ClipDataset(tiny_dataset)
    clip = ds.load(ds.ids()[0])
    ref = M.frames_to_tensor(clip["rgb"][0])
    reversed_ = ref.flip(0)
    assert M.warp_error(ref, clip) < M.warp_error(reversed_, clip)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="uint8"):
        M.frames_to_tensor(np.zeros((2, 8, 8, 3), np.float32))
    with pytest.raises(ValueError, match="one shape"):
        M.psnr(torch.zeros(1, 3, 8, 8), torch.zeros(1, 3, 8, 9))
    with pytest.raises(ValueError, match="motion"):
        M.warp_backward(torch.zeros(1, 3, 8, 8), np.zeros((1, 8, 9, 2), np.float32))


def _textured(seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(2, 3, 64, 64, generator=g)
    return torch.nn.functional.avg_pool2d(torch.nn.functional.pad(x, (1, 1, 1, 1), mode="replicate"), 3, 1)


def test_block_grid_ratio_sees_an_8x8_grid_and_not_blur():
    ref = _textured()
    blocky = torch.nn.functional.interpolate(torch.nn.functional.avg_pool2d(ref, 8), scale_factor=8)
    blur = torch.nn.functional.avg_pool2d(torch.nn.functional.pad(ref, (2, 2, 2, 2), mode="replicate"), 5, 1)
    tint = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    tinted = (blur + 0.05 * tint.repeat_interleave(8, 2).repeat_interleave(8, 3)).clamp(0, 1)
    assert M.block_grid_ratio(ref, ref) == pytest.approx(1.0)
    assert M.block_grid_ratio(blocky, ref) > 5
    assert M.block_grid_ratio(tinted, blur) > 1.2         # faintly tinted squares on a smooth picture
    assert 0.9 < M.block_grid_ratio(blur, ref) < 1.1      # blur is not a grid
    assert np.isfinite(M.block_grid_ratio(torch.zeros_like(ref), ref))


def test_gradient_error_tells_detail_toward_the_reference_from_added_edges():
    ref = _textured()
    blur = torch.nn.functional.avg_pool2d(torch.nn.functional.pad(ref, (2, 2, 2, 2), mode="replicate"), 5, 1)
    noisy = (blur + 0.1 * torch.randn(blur.shape, generator=torch.Generator().manual_seed(1))).clamp(0, 1)
    assert M.gradient_error(ref, ref) == 0
    assert 0.7 < M.gradient_error(blur, ref) <= 1.0       # the detail is missing
    assert M.sharpness_ratio(noisy, ref) > 1              # as sharp as it gets, by the ratio...
    assert M.gradient_error(noisy, ref) > 1.2             # ...but not toward the reference
    halfway = 0.5 * (ref + blur)
    assert M.gradient_error(halfway, ref) < M.gradient_error(blur, ref)


def test_psnr_masked_counts_only_geometry():
    ref = _textured()
    out = ref.clone()
    out[:, :, :, 32:] = 1 - out[:, :, :, 32:]                   # wrong where the mask is 0 only
    mask = np.zeros((2, 64, 64), np.uint8)
    mask[:, :, :32] = 1
    assert M.psnr_masked(out, ref, mask) == M.PSNR_CAP
    assert M.psnr_masked(out, ref, 1 - mask) < 20
    assert np.isnan(M.psnr_masked(out, ref, np.zeros_like(mask)))
    with pytest.raises(ValueError, match="mask"):
        M.psnr_masked(out, ref, mask[:, :32])

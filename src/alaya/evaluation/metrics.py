"""Frame metrics for renderers, as pure functions of frames and G-buffers.

Frames are float tensors (T, 3, H, W) in [0, 1] (``frames_to_tensor`` converts uint8 clips).
G-buffer arrays follow the clip contract (``docs/dataset.md``): ``motion`` is backward flow in
pixels, the surface at (x, y) in frame t was at (x + dx, y + dy) in frame t − 1.

- ``psnr``: per frame, capped at ``PSNR_CAP`` for identical frames.
- ``ssim``: per frame (11-px Gaussian window, pytorch-msssim).
- ``warp_error``: mean L1 between frame t and frame t − 1 warped to t by the engine's motion,
  over pixels visible in both frames (``occlusion_mask``). A renderer that is stable in time
  has the reference's warp error (lighting itself changes a little between frames); flicker and
  swimming textures raise it.
- ``flicker``: mean absolute difference between the output's and the reference's
  frame-to-frame change of 8×8 block luminance: brightness that pumps where the reference's
  does not. Zero for the reference itself.
- ``structure_f1``: F1 between the output's luminance edges and the G-buffer's
  discontinuities (depth jumps, creases, material and object borders), with a 1-px tolerance.
- ``laplacian_variance`` and ``sharpness_ratio``: high-frequency energy, the variance of luma's
  4-neighbour Laplacian, per frame and as the output's mean over the reference's. PSNR against
  one reference rewards blur (a sample near the conditional mean scores higher than a sharper,
  equally plausible one); this ratio shows it: below 1 is blurrier than the reference, above 1
  has more high-frequency energy (detail, grain, noise or artefacts such as block seams: it
  counts edges, not whether they are right).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from pytorch_msssim import ssim as _ssim

PSNR_CAP = 100.0
LUMA = (0.2126, 0.7152, 0.0722)


def frames_to_tensor(frames: np.ndarray) -> torch.Tensor:
    """uint8 (..., H, W, 3) -> float (N, 3, H, W) in [0, 1], leading dims flattened."""
    if frames.dtype != np.uint8 or frames.ndim < 4 or frames.shape[-1] != 3:
        raise ValueError(f"frames: expected uint8 (T, H, W, 3), got {frames.dtype} {frames.shape}")
    t = torch.from_numpy(np.ascontiguousarray(frames)).reshape(-1, *frames.shape[-3:])
    return t.permute(0, 3, 1, 2).float() / 255.0


def _check_pair(a: torch.Tensor, b: torch.Tensor) -> None:
    if a.shape != b.shape or a.ndim != 4 or a.shape[1] != 3:
        raise ValueError(f"expected two (T, 3, H, W) tensors of one shape, got {tuple(a.shape)} "
                         f"and {tuple(b.shape)}")


def psnr(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(T,) PSNR in dB of frames in [0, 1]; identical frames give ``PSNR_CAP``."""
    _check_pair(a, b)
    mse = ((a.float() - b.float()) ** 2).flatten(1).mean(1)
    return torch.where(mse > 0, 10 * torch.log10(1.0 / mse.clamp(min=1e-20)),
                       torch.full_like(mse, PSNR_CAP)).clamp(max=PSNR_CAP)


def ssim(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(T,) SSIM of frames in [0, 1]."""
    _check_pair(a, b)
    return _ssim(a.float(), b.float(), data_range=1.0, size_average=False)


def luminance(x: torch.Tensor) -> torch.Tensor:
    return (x * torch.tensor(LUMA, dtype=x.dtype).view(1, 3, 1, 1)).sum(1, keepdim=True)


def laplacian_variance(x: torch.Tensor) -> torch.Tensor:
    """(T,) variance of the 4-neighbour Laplacian of luma (edges replicated) of frames (T, 3, H, W)."""
    if x.ndim != 4 or x.shape[1] != 3:
        raise ValueError(f"expected (T, 3, H, W) frames, got {tuple(x.shape)}")
    k = torch.tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]]).view(1, 1, 3, 3)
    lap = F.conv2d(F.pad(luminance(x.float()), (1, 1, 1, 1), mode="replicate"), k)
    return lap.flatten(1).var(1)


SHARPNESS_FLOOR = (1 / 255) ** 2   # one grey level's Laplacian energy: below it a frame counts as flat


def sharpness_ratio(frames: torch.Tensor, reference: torch.Tensor) -> float:
    """Mean ``laplacian_variance`` of ``frames`` over that of ``reference`` (same shape), each
    floored at ``SHARPNESS_FLOOR``: 1 for the reference itself and where both are flat, below 1
    for blurrier frames, finite for a detailed output of a flat reference."""
    _check_pair(frames, reference)
    out, ref = float(laplacian_variance(frames).mean()), float(laplacian_variance(reference).mean())
    return max(out, SHARPNESS_FLOOR) / max(ref, SHARPNESS_FLOOR)


def psnr_masked(a: torch.Tensor, b: torch.Tensor, mask: np.ndarray | torch.Tensor) -> float:
    """PSNR in dB over the pixels where ``mask`` (T, H, W) is nonzero, pooled over all frames
    (geometry only: a noisy sky does not hide errors on surfaces); NaN when no pixel is set."""
    _check_pair(a, b)
    m = torch.as_tensor(np.asarray(mask)).bool()
    if m.shape != (a.shape[0], *a.shape[2:]):
        raise ValueError(f"mask: expected {(a.shape[0], *a.shape[2:])}, got {tuple(m.shape)}")
    if not m.any():
        return float("nan")
    mse = float(((a.float() - b.float()) ** 2).mean(1)[m].mean())
    return PSNR_CAP if mse <= 0 else min(PSNR_CAP, 10 * float(np.log10(1.0 / mse)))


BLOCK_STEP_FLOOR = 0.5 / 255     # half a grey level: a flat inside does not divide by zero


def block_step_ratio(frames: torch.Tensor, block: int = 8) -> float:
    """Mean absolute luma step between neighbouring pixels across ``block``-pixel block
    boundaries over the mean step inside blocks (both directions); about 1 for a picture without
    a block grid."""
    if frames.ndim != 4 or frames.shape[1] != 3:
        raise ValueError(f"expected (T, 3, H, W) frames, got {tuple(frames.shape)}")
    y = luminance(frames.float())[:, 0]
    across, inside = [], []
    for d, axis in ((y[:, :, 1:] - y[:, :, :-1], 2), (y[:, 1:, :] - y[:, :-1, :], 1)):
        boundary = (torch.arange(d.shape[axis]) + 1) % block == 0
        across.append(d.abs().index_select(axis, boundary.nonzero()[:, 0]).mean())
        inside.append(d.abs().index_select(axis, (~boundary).nonzero()[:, 0]).mean())
    return float(sum(across)) / max(float(sum(inside)), BLOCK_STEP_FLOOR)


def block_grid_ratio(frames: torch.Tensor, reference: torch.Tensor, block: int = 8) -> float:
    """``block_step_ratio`` of ``frames`` over the reference's: 1 when the output has no more of
    an 8x8 grid than the reference itself, above 1 for a visible grid."""
    _check_pair(frames, reference)
    return block_step_ratio(frames, block) / block_step_ratio(reference, block)


def gradient_error(frames: torch.Tensor, reference: torch.Tensor) -> float:
    """Mean |∇ frames − ∇ reference| of luma over mean |∇ reference| (finite differences, both
    directions): 0 when the detail matches, about 1 for a blurred copy (the detail is missing),
    above 1 for edges the reference does not have. Sharpness alone cannot tell detail toward the
    reference from added edges; this can."""
    _check_pair(frames, reference)
    a, b = luminance(frames.float()), luminance(reference.float())
    err, ref = 0.0, 0.0
    for dims in ((..., slice(1, None)), (..., slice(1, None), slice(None))):
        prev = tuple(slice(None, -1) if isinstance(x, slice) and x.start == 1 else x for x in dims)
        da, db = a[dims] - a[prev], b[dims] - b[prev]
        err += float((da - db).abs().mean())
        ref += float(db.abs().mean())
    return err / max(ref, 1e-12)


def warp_backward(prev: torch.Tensor, motion: np.ndarray | torch.Tensor, mode: str = "bilinear") -> torch.Tensor:
    """Frame t − 1 (N, C, H, W) resampled at frame t's pixels, by backward motion (N, H, W, 2)."""
    motion = torch.as_tensor(np.asarray(motion, dtype=np.float32) if isinstance(motion, np.ndarray) else motion).float()
    n, _, h, w = prev.shape
    if motion.shape != (n, h, w, 2):
        raise ValueError(f"motion: expected {(n, h, w, 2)}, got {tuple(motion.shape)}")
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32) + 0.5,
                            torch.arange(w, dtype=torch.float32) + 0.5, indexing="ij")
    u = (xs + motion[..., 0]) / w * 2 - 1
    v = (ys + motion[..., 1]) / h * 2 - 1
    return F.grid_sample(prev.float(), torch.stack([u, v], -1), mode=mode, padding_mode="border",
                         align_corners=False)


def occlusion_mask(gbuffer: dict[str, np.ndarray], rel_depth: float = 0.1) -> torch.Tensor:
    """(T − 1, 1, H, W) bool: pixels of frames 1..T−1 whose surface was visible at t − 1 — the
    source lies inside the image, on the same object (instance id), with a depth that agrees
    within ``rel_depth``; background pixels must come from background."""
    motion = gbuffer["motion"][1:].astype(np.float32)
    n, h, w, _ = motion.shape
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32) + 0.5
    sx, sy = xs + motion[..., 0], ys + motion[..., 1]
    inside = (sx >= 0) & (sx < w) & (sy >= 0) & (sy < h)
    as_t = lambda a: torch.from_numpy(np.ascontiguousarray(a[:-1], dtype=np.float32))[:, None]  # noqa: E731
    inst = warp_backward(as_t(gbuffer["instance"]), motion, "nearest")[:, 0].numpy()
    mask = warp_backward(as_t(gbuffer["mask"]), motion, "nearest")[:, 0].numpy()
    depth = warp_backward(as_t(gbuffer["depth"]), motion, "nearest")[:, 0].numpy()
    d_t = gbuffer["depth"][1:].astype(np.float32)
    fg = gbuffer["mask"][1:] > 0
    same = (mask > 0) == fg
    same &= np.where(fg, inst == gbuffer["instance"][1:], True)
    same &= np.where(fg, np.abs(depth - d_t) <= rel_depth * np.maximum(d_t, 1e-6), True)
    return torch.from_numpy(inside & same)[:, None]


def warp_error(frames: torch.Tensor, gbuffer: dict[str, np.ndarray], mask: torch.Tensor | None = None) -> float:
    """Mean L1 (over RGB, in [0, 1] units) between frames 1..T−1 and their warped predecessors,
    over the pixels ``occlusion_mask`` keeps."""
    if len(frames) < 2:
        raise ValueError("warp error needs at least 2 frames")
    mask = occlusion_mask(gbuffer) if mask is None else mask
    warped = warp_backward(frames[:-1], gbuffer["motion"][1:])
    err = (frames[1:].float() - warped).abs().mean(1, keepdim=True)
    keep = mask.float()
    return float((err * keep).sum() / keep.sum().clamp(min=1))


def flicker(frames: torch.Tensor, reference: torch.Tensor, block: int = 8) -> float:
    """Mean |Δ block luminance of the output − Δ block luminance of the reference| between
    consecutive frames, in [0, 1] units."""
    _check_pair(frames, reference)
    if len(frames) < 2:
        raise ValueError("flicker needs at least 2 frames")
    lo, lr = (F.avg_pool2d(luminance(x.float()), block) for x in (frames, reference))
    return float(((lo[1:] - lo[:-1]) - (lr[1:] - lr[:-1])).abs().mean())


def gbuffer_edges(gbuffer: dict[str, np.ndarray], depth_jump: float = 0.05, crease_deg: float = 30.0) -> np.ndarray:
    """(T, H, W) bool: depth jumps, normal creases, and material/object/background borders."""
    depth = gbuffer["depth"].astype(np.float32)
    normal = gbuffer["normal"].astype(np.float32)
    cos_max = np.cos(np.deg2rad(crease_deg))
    edges = np.zeros(depth.shape, bool)
    for axis in (1, 2):
        sl0 = [slice(None)] * 3
        sl1 = [slice(None)] * 3
        sl0[axis], sl1[axis] = slice(None, -1), slice(1, None)
        a, b = tuple(sl0), tuple(sl1)
        e = np.abs(depth[a] - depth[b]) > depth_jump * np.maximum(np.minimum(depth[a], depth[b]), 1e-6)
        e |= (normal[a] * normal[b]).sum(-1) < cos_max
        for key in ("material", "instance", "mask"):
            e |= gbuffer[key][a] != gbuffer[key][b]
        edges[a] |= e
        edges[b] |= e
    return edges


def image_edges(frames: torch.Tensor, threshold: float = 0.08) -> np.ndarray:
    """(T, H, W) bool: Sobel gradient magnitude of the luminance above ``threshold``."""
    y = luminance(frames.float())
    kx = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]]) / 4
    gx = F.conv2d(F.pad(y, (1, 1, 1, 1), mode="replicate"), kx.view(1, 1, 3, 3))
    gy = F.conv2d(F.pad(y, (1, 1, 1, 1), mode="replicate"), kx.t().reshape(1, 1, 3, 3))
    return (torch.sqrt(gx ** 2 + gy ** 2) > threshold)[:, 0].numpy()


def _dilate(x: np.ndarray) -> np.ndarray:
    t = torch.from_numpy(x.astype(np.float32))[:, None]
    return (F.max_pool2d(t, 3, 1, 1)[:, 0] > 0).numpy()


def structure_f1(frames: torch.Tensor, gbuffer: dict[str, np.ndarray], edges: np.ndarray | None = None) -> float:
    """F1 of the output's edges against the G-buffer's discontinuities (1-px tolerance);
    ``edges`` = ``gbuffer_edges(gbuffer)`` when already computed for the clip."""
    out, ref = image_edges(frames), gbuffer_edges(gbuffer) if edges is None else edges
    if out.shape != ref.shape:
        raise ValueError(f"frames give edges {out.shape} but the G-buffer {ref.shape}")
    precision = (out & _dilate(ref)).sum() / max(out.sum(), 1)
    recall = (ref & _dilate(out)).sum() / max(ref.sum(), 1)
    return float(2 * precision * recall / max(precision + recall, 1e-12))

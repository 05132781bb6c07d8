"""Statistics of uint8 video frames (N, H, W, 3), shared by the world-model evaluation and the
game's own reference numbers: per-frame brightness, sharpness and mean colour; late-versus-early
ratios and colour drift over a long rollout; per-frame PSNR and SSIM of two videos; and of float
frames (T, 3, H, W) in [0, 1]: high-frequency energy and where the edges run (the live
evaluation's grain and streak lines)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from alaya.evaluation import metrics as M


def frame_stats(frames: np.ndarray) -> dict[str, np.ndarray]:
    """Per frame of uint8 (N, H, W, 3): ``brightness`` (N,) mean luma in [0, 1], ``sharpness``
    (N,) variance of the 4-neighbour Laplacian of luma, ``colour`` (N, 3) mean RGB in [0, 1]."""
    x = M.frames_to_tensor(frames)
    return {"brightness": M.luminance(x).mean((1, 2, 3)).numpy(), "sharpness": M.laplacian_variance(x).numpy(),
            "colour": x.mean((2, 3)).numpy()}


def late_early_ratio(series: np.ndarray, window: int) -> float:
    """Mean of the last ``window`` values over the mean of the first ``window``."""
    early, late = float(np.mean(series[:window])), float(np.mean(series[-window:]))
    return late / early if early > 0 else (1.0 if late == 0 else float("inf"))


def colour_drift(colour: np.ndarray, window: int) -> float:
    """Euclidean distance (RGB, [0, 1] units) between the mean colours of the last and the first
    ``window`` frames of (N, 3) per-frame mean colours."""
    return float(np.linalg.norm(colour[-window:].mean(0) - colour[:window].mean(0)))


def psnr_frames(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N,) PSNR of uint8 (N, H, W, 3) frames (``metrics.psnr``: identical frames give 100)."""
    return M.psnr(M.frames_to_tensor(a), M.frames_to_tensor(b)).numpy()


def ssim_frames(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N,) SSIM of uint8 (N, H, W, 3) frames."""
    return M.ssim(M.frames_to_tensor(a), M.frames_to_tensor(b)).numpy()


def hf_energy(x: torch.Tensor) -> torch.Tensor:
    """(T,) high-frequency energy of frames (T, 3, H, W) in [0, 1]: the mean square of the frame
    minus its 3x3 box blur (edges replicated), over pixels and RGB. Grain and checkerboards raise
    it; blur lowers it."""
    if x.ndim != 4 or x.shape[1] != 3:
        raise ValueError(f"expected (T, 3, H, W) frames, got {tuple(x.shape)}")
    x = x.float()
    blur = F.avg_pool2d(F.pad(x, (1, 1, 1, 1), mode="replicate"), 3, stride=1)
    return ((x - blur) ** 2).flatten(1).mean(1)


ORIENTATION_BINS = 8        # edge orientations over 180 degrees (``orientation_histogram``)


def orientation_histogram(x: torch.Tensor) -> torch.Tensor:
    """(T, ORIENTATION_BINS): where frames (T, 3, H, W) in [0, 1] have their edges, by direction:
    the luma gradient's orientation (modulo 180 degrees) in equal bins, each pixel weighing its
    squared gradient magnitude, normalised to sum to 1 (uniform for a flat frame). A rendered
    scene has edges at every angle (perspective, round bodies); horizontal streaks put nearly
    all of it in one bin, a patchwork of squares in two (0 and 90 degrees)."""
    if x.ndim != 4 or x.shape[1] != 3:
        raise ValueError(f"expected (T, 3, H, W) frames, got {tuple(x.shape)}")
    y = M.luminance(x.float())[:, 0]
    gx = (y[:, 1:-1, 2:] - y[:, 1:-1, :-2]) / 2
    gy = (y[:, 2:, 1:-1] - y[:, :-2, 1:-1]) / 2
    half = torch.pi / ORIENTATION_BINS / 2                    # bins centred on 0, 22.5, 45 ... degrees
    angle = (torch.atan2(gy, gx) + half).remainder(torch.pi)
    b = (angle / torch.pi * ORIENTATION_BINS).long().clamp(max=ORIENTATION_BINS - 1).flatten(1)
    hist = torch.zeros(len(x), ORIENTATION_BINS).scatter_add_(1, b, (gx * gx + gy * gy).flatten(1))
    total = hist.sum(1, keepdim=True)
    return torch.where(total > 0, hist / total.clamp(min=1e-20), torch.full_like(hist, 1 / ORIENTATION_BINS))


def orientation_distance(gen: np.ndarray, real: np.ndarray) -> float:
    """Total variation distance (0 the same, 1 disjoint) of two frame sets' mean
    ``orientation_histogram`` rows (T, ORIENTATION_BINS): how differently their edges run."""
    return float(0.5 * np.abs(np.mean(gen, 0) - np.mean(real, 0)).sum())

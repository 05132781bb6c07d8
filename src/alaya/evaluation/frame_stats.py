"""Statistics of uint8 video frames (N, H, W, 3), shared by the world-model evaluation and the
game's own reference numbers: per-frame brightness, sharpness and mean colour; late-versus-early
ratios and colour drift over a long rollout; per-frame PSNR and SSIM of two videos."""

from __future__ import annotations

import numpy as np

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

"""Turn every clip channel into uint8 RGB images for contact sheets and GIFs.

All functions take whole-clip arrays (leading T axis) so that normalisations (depth range,
flow magnitude) are shared by every frame of the clip and frames stay comparable.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

# A perceptually ordered colormap (viridis anchors), interpolated linearly.
_VIRIDIS = np.array([
    [68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142],
    [31, 158, 137], [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37],
], dtype=np.float64)


def colormap(x: np.ndarray) -> np.ndarray:
    """(...,) values in 0..1 -> (..., 3) uint8 viridis colours."""
    x = np.clip(np.nan_to_num(x), 0.0, 1.0) * (len(_VIRIDIS) - 1)
    lo = np.floor(x).astype(int).clip(0, len(_VIRIDIS) - 2)
    frac = (x - lo)[..., None]
    return np.round(_VIRIDIS[lo] * (1 - frac) + _VIRIDIS[lo + 1] * frac).astype(np.uint8)


def depth_image(depth: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(T, H, W) depth -> (T, H, W, 3), near bright, range from the clip's geometry pixels,
    background black."""
    fg = mask == 1
    if not fg.any():
        return np.zeros(depth.shape + (3,), np.uint8)
    lo, hi = float(depth[fg].min()), float(depth[fg].max())
    x = 1.0 - (depth - lo) / max(hi - lo, 1e-6)
    return np.where(fg[..., None], colormap(x), 0).astype(np.uint8)


def grey_image(x: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """(T, H, W) -> (T, H, W, 3) grey, values multiplied by ``scale``."""
    g = np.clip(np.round(x.astype(np.float64) * scale), 0, 255).astype(np.uint8)
    return np.repeat(g[..., None], 3, axis=-1)


def normal_image(normal: np.ndarray) -> np.ndarray:
    """(T, H, W, 3) unit normals -> n * 0.5 + 0.5 colours (background, n = 0, black)."""
    n = normal.astype(np.float64)
    rgb = np.round((n * 0.5 + 0.5) * 255).clip(0, 255).astype(np.uint8)
    return np.where(np.any(n != 0, axis=-1, keepdims=True), rgb, 0).astype(np.uint8)


def id_image(ids: np.ndarray) -> np.ndarray:
    """(T, H, W) integer ids -> hashed palette colours, id 0 black."""
    h = ids.astype(np.uint32) * np.uint32(2654435761)
    h ^= h >> np.uint32(15)
    h *= np.uint32(2246822519)
    h ^= h >> np.uint32(13)
    rgb = np.stack([(h >> np.uint32(s)) & np.uint32(255) for s in (0, 8, 16)], axis=-1)
    rgb = (64 + rgb.astype(np.uint16) * 3 // 4).astype(np.uint8)  # avoid near-black ids
    return np.where((ids != 0)[..., None], rgb, 0).astype(np.uint8)


def flow_image(motion: np.ndarray) -> np.ndarray:
    """(T, H, W, 2) flow -> HSV flow colours: hue = direction, value = magnitude relative to
    the clip's largest finite magnitude (zero flow is black)."""
    m = np.nan_to_num(motion.astype(np.float64))
    mag = np.hypot(m[..., 0], m[..., 1])
    top = max(float(mag.max()), 1e-6)
    hue = (np.arctan2(-m[..., 1], m[..., 0]) / (2 * np.pi)) % 1.0  # y up for the colour wheel
    val = np.clip(mag / top, 0.0, 1.0)
    # HSV -> RGB with full saturation: each channel is a clipped triangle wave of the hue.
    k = (np.array([5.0, 3.0, 1.0]) + hue[..., None] * 6) % 6
    rgb = val[..., None] * (1 - np.clip(np.minimum(k, 4 - k), 0, 1))
    return np.round(rgb * 255).astype(np.uint8)


def channel_images(clip: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every G-buffer channel and every style of a clip as (T, H, W, 3) uint8, in display
    order; labels are the keys ("rgb:<style>" for the styles)."""
    mask = clip["mask"]
    out = {
        "depth": depth_image(clip["depth"], mask),
        "mask": grey_image(mask, 255.0),
        "normal": normal_image(clip["normal"]),
        "albedo": clip["albedo"],
        "roughness": grey_image(clip["roughness"]),
        "metallic": grey_image(clip["metallic"]),
        "material": id_image(clip["material"]),
        "instance": id_image(clip["instance"]),
        "motion": flow_image(clip["motion"]),
    }
    for style, rgb in zip(clip["styles"], clip["rgb"]):
        out[f"rgb:{style}"] = rgb
    return out

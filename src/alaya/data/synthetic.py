"""A tiny analytic clip and dataset, for tests and smoke runs (no engine needed).

The scene is one checkered rectangle on a tilted plane, seen by a camera that translates and
yaws a little each frame, so depth, normals, motion and poses are exactly consistent: depth by
ray-plane intersection, the plane's normal rotated into camera space, motion from
``reproject_flow`` (background: points at infinity), as the contract requires.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from alaya.data.clipio import write_clip
from alaya.data.contract import SCHEMA_VERSION
from alaya.data.dataset import CLIPS_DIR, DatasetMeta, split_for_seed, write_meta
from alaya.data.geometry import pixel_centres, reproject_flow

STYLE_NAMES = ("plain", "night", "sketch", "toon", "sepia", "neon")
MATERIAL_COLOURS = np.array([[0.85, 0.80, 0.70], [0.20, 0.35, 0.75]])  # sRGB 0..1, ids 1, 2


def _rot_y(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def synthetic_intrinsics(height: int, width: int, fov_y_degrees: float = 60.0) -> np.ndarray:
    """K (3, 3) float32 with square pixels and the principal point at the image centre."""
    fy = height / 2 / np.tan(np.radians(fov_y_degrees) / 2)
    return np.array([[fy, 0, width / 2], [0, fy, height / 2], [0, 0, 1]], dtype=np.float32)


def synthetic_style_names(count: int) -> list[str]:
    """``count`` distinct style names."""
    return [STYLE_NAMES[i] if i < len(STYLE_NAMES) else f"style{i}" for i in range(count)]


def make_synthetic_clip(
    T: int = 3, H: int = 16, W: int = 16, S: int = 2, A: int = 0, seed: int = 0
) -> dict[str, np.ndarray]:
    """A contract-valid clip of T frames at H x W in S styles (with A action columns if A > 0).

    ``seed`` jitters the plane's tilt, the camera path and the style tints.
    """
    rng = np.random.default_rng(seed)
    K = synthetic_intrinsics(H, W)
    n_w = np.array([0.25, 0.35, 1.0]) + rng.uniform(-0.1, 0.1, 3)
    n_w /= np.linalg.norm(n_w)  # world plane normal, facing the camera (+z)
    p0 = np.array([0.0, 0.0, -3.0])
    e1 = np.cross([0.0, 1.0, 0.0], n_w)
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(n_w, e1)
    step = np.array([0.08, 0.04, 0.05]) + rng.uniform(-0.02, 0.02, 3)
    yaw = np.radians(1.5 + rng.uniform(-0.5, 0.5))

    u, v = pixel_centres(H, W)
    rays = np.stack([(u - K[0, 2]) / K[0, 0], -(v - K[1, 2]) / K[1, 1], -np.ones_like(u)], -1)
    depth = np.zeros((T, H, W), np.float32)
    normal = np.zeros((T, H, W, 3), np.float16)
    material = np.zeros((T, H, W), np.uint16)
    w2c = np.zeros((T, 4, 4), np.float32)
    for t in range(T):
        R = _rot_y(yaw * t).T  # world -> camera rotation (camera yaws left by yaw * t)
        c = step * t
        w2c[t] = np.block([[R, (-R @ c)[:, None]], [np.zeros((1, 3)), np.ones((1, 1))]])
        d_w = rays @ R  # (H, W, 3) world directions = R^T d_cam
        s = (n_w @ (p0 - c)) / (d_w @ n_w)  # depth along the view axis (rays have z = -1)
        x = c + s[..., None] * d_w - p0
        a, b = x @ e1, x @ e2
        fg = (s > 0) & (np.abs(a) < 1.3) & (np.abs(b) < 1.1)
        depth[t] = np.where(fg, s, 0.0)
        normal[t][fg] = R @ n_w
        checker = (np.floor(a / 0.5) + np.floor(b / 0.5)).astype(int) % 2
        material[t] = np.where(fg, 1 + checker, 0)
    mask = (material > 0).astype(np.uint8)
    motion = np.zeros((T, H, W, 2), np.float16)
    for t in range(1, T):
        motion[t] = reproject_flow(depth[t], K, w2c[t], w2c[t - 1])
    idx = material.astype(int)
    albedo = np.concatenate([np.zeros((1, 3)), MATERIAL_COLOURS])[idx]  # (T, H, W, 3)
    albedo_u8 = np.round(albedo * 255).astype(np.uint8)
    roughness = np.array([0, 200, 60], np.uint8)[idx]
    metallic = np.array([0, 0, 255], np.uint8)[idx]

    light = np.array([0.3, 0.6, 0.75])
    shade = 0.3 + 0.7 * np.clip(normal.astype(np.float64) @ light, 0, 1)
    styles = synthetic_style_names(S)
    rgb = np.zeros((S, T, H, W, 3), np.uint8)
    for i in range(S):
        tint = rng.uniform(0.3, 1.0, 3)
        sky = rng.uniform(0.0, 1.0, 3)
        img = albedo * shade[..., None] * tint
        img = np.where(mask[..., None] == 1, img, sky)
        rgb[i] = np.round(np.clip(img, 0, 1) * 255).astype(np.uint8)
    clip = {
        "rgb": rgb, "styles": np.array(styles, dtype=np.str_), "depth": depth, "mask": mask,
        "normal": normal, "albedo": albedo_u8, "roughness": roughness, "metallic": metallic,
        "material": material, "instance": mask.astype(np.uint16), "motion": motion, "K": K,
        "world_to_camera": w2c,
    }
    if A > 0:
        clip["actions"] = rng.uniform(-1, 1, (T, A)).astype(np.float32)
    return clip


def synthetic_meta(
    clip_seeds: dict[str, int], *, T: int, H: int, W: int, S: int, A: int = 0,
    name: str = "synthetic",
) -> DatasetMeta:
    """dataset.json content matching clips made by ``make_synthetic_clip``."""
    splits: dict[str, list[str]] = {"train": [], "val": [], "test": []}
    clips: dict[str, dict] = {}
    for cid, seed in sorted(clip_seeds.items()):
        split = split_for_seed(seed)
        splits[split].append(cid)
        clips[cid] = {"seed": seed, "split": split, "rig": "synthetic_plane"}
    styles = {
        s: {"description": f"synthetic {s} tint",
            "phrasings": [f"{s} style", f"rendered in {s} style", f"a scene in the {s} look"]}
        for s in synthetic_style_names(S)
    }
    materials = [
        {"id": i + 1, "name": f"synthetic_{i + 1}", "albedo": [float(c) for c in col],
         "roughness": [200 / 255, 60 / 255][i], "metallic": [0.0, 1.0][i],
         "emission": [0.0, 0.0, 0.0]}
        for i, col in enumerate(MATERIAL_COLOURS)
    ]
    return DatasetMeta(
        schema_version=SCHEMA_VERSION, name=name, height=H, width=W, fps=30.0, frames=T,
        styles=styles, materials=materials, splits=splits, clips=clips,
        actions=[f"a{i}" for i in range(A)] if A > 0 else None,
        generator={"tool": "alaya.data.synthetic", "seeds": sorted(clip_seeds.values())},
    )


def write_synthetic_dataset(
    root: str | os.PathLike[str], n_clips: int = 3, *, T: int = 3, H: int = 16, W: int = 16,
    S: int = 2, A: int = 0,
) -> DatasetMeta:
    """Write a valid dataset of ``n_clips`` synthetic clips (seeds 0..n-1) to ``root``."""
    root = Path(root)
    (root / CLIPS_DIR).mkdir(parents=True, exist_ok=True)
    seeds = {f"synth_{i:04d}": i for i in range(n_clips)}
    for cid, seed in seeds.items():
        write_clip(root / CLIPS_DIR / f"{cid}.npz", make_synthetic_clip(T, H, W, S, A, seed))
    meta = synthetic_meta(seeds, T=T, H=H, W=W, S=S, A=A)
    write_meta(root, meta)
    return meta

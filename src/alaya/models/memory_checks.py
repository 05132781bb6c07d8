"""The scene memory's argument checks (``alaya.models.scene_memory``): each argument as the
tensor the memory computes with, or a ValueError naming the bad one.
"""

from __future__ import annotations

import torch


def _tensor(value, name: str, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    try:
        t = torch.as_tensor(value.copy() if hasattr(value, "flags") and not value.flags.writeable else value)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"{name}: not an array ({err})") from None
    if shape is not None and tuple(t.shape) != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {tuple(t.shape)}")
    if t.dtype == torch.bool or t.is_complex():
        raise ValueError(f"{name}: expected real numbers, got {t.dtype}")
    if t.is_floating_point() and not torch.isfinite(t).all():
        raise ValueError(f"{name}: NaN or inf")
    return t


def check_camera(K, world_to_camera) -> tuple[torch.Tensor, torch.Tensor]:
    """(K, world_to_camera) as float64 tensors, or ValueError naming the bad one."""
    K = _tensor(K, "K", (3, 3)).double()
    if not (K[0, 0] > 0 and K[1, 1] > 0):
        raise ValueError(f"K: focal lengths fx, fy must be > 0, got {K[0, 0].item():g}, {K[1, 1].item():g}")
    if not torch.equal(K[2], K.new_tensor([0.0, 0.0, 1.0])):
        raise ValueError(f"K: last row must be (0, 0, 1), got {K[2].tolist()}")
    return K, check_view(world_to_camera)


def check_view(world_to_camera) -> torch.Tensor:
    """world_to_camera as a float64 tensor, or ValueError naming it."""
    m = _tensor(world_to_camera, "world_to_camera", (4, 4)).double()
    R = m[:3, :3]
    if ((m[3] - m.new_tensor([0.0, 0.0, 0.0, 1.0])).abs().max() > 1e-6
            or (R @ R.T - torch.eye(3, dtype=m.dtype)).abs().max() > 1e-3 or torch.det(R) <= 0):
        raise ValueError("world_to_camera: not a rigid view matrix (rotation orthonormal with "
                         "det > 0, last row 0 0 0 1)")
    return m


def check_frame(rgb, depth) -> tuple[torch.Tensor, torch.Tensor]:
    """rgb -> (H, W, 3) uint8, depth -> (H, W) float32; ValueError naming the bad argument."""
    depth = _tensor(depth, "depth")
    if depth.ndim != 2 or depth.shape[0] < 1 or depth.shape[1] < 1:
        raise ValueError(f"depth: expected shape (H, W), got {tuple(depth.shape)}")
    if not depth.is_floating_point():
        depth = depth.float()
    if (depth < 0).any():
        raise ValueError("depth: negative values (0 marks background)")
    H, W = depth.shape
    rgb = _tensor(rgb, "rgb")
    if tuple(rgb.shape) == (H, W, 3):
        pass
    elif tuple(rgb.shape) == (3, H, W):
        rgb = rgb.permute(1, 2, 0)
    else:
        raise ValueError(f"rgb: expected (H, W, 3) or (3, H, W) with depth's (H, W) = ({H}, {W}), "
                         f"got {tuple(rgb.shape)}")
    if rgb.dtype != torch.uint8:
        if not rgb.is_floating_point():
            raise ValueError(f"rgb: expected uint8 or floats in [0, 1], got {rgb.dtype}")
        rgb = (rgb.float().clamp(0, 1) * 255).round().to(torch.uint8)
    return rgb.contiguous(), depth.float().contiguous()


def check_size(H: int, W: int) -> tuple[int, int]:
    """(H, W) as ints, or ValueError naming the one that is not a positive integer."""
    for name, v in (("H", H), ("W", W)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ValueError(f"{name}: expected a positive integer, got {v!r}")
    return int(H), int(W)

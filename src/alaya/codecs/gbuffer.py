"""G-buffer modalities as images and as latents.

The teacher's conditioning follows AlayaRenderer: each modality is drawn as a 3-channel image
and encoded with the full RGB codec; the latents are concatenated along channels
(``teacher_gbuffer_latents``). The tiny encoder instead reads the raw arrays
(``gbuffer_input``: 9 channels) and predicts the same latents directly.
Material and instance ids are not encoded: albedo, roughness and metallic already carry what a
material looks like, and ids are arbitrary labels.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np
import torch

MODALITIES = ("albedo", "normal", "depth", "roughness", "metallic")
RAW_CHANNELS = {"albedo": 3, "normal": 3, "depth": 1, "roughness": 1, "metallic": 1}
GBUFFER_INPUT_CHANNELS = sum(RAW_CHANNELS.values())   # 9


def as_tensor(v: np.ndarray | torch.Tensor) -> torch.Tensor:
    """A tensor sharing ``v``'s memory where it can (a copy of read-only engine buffers, which
    torch cannot wrap); converting it with torch is faster than numpy for float16."""
    if isinstance(v, torch.Tensor):
        return v
    a = np.asarray(v)
    return torch.from_numpy(a if a.flags.writeable else a.copy())


def all_finite(a: np.ndarray | torch.Tensor) -> bool:
    """True when no element is NaN or infinite. Fast path: one sum, finite only if every element
    is; a sum that is not finite (a NaN, an infinity, or an overflow of large finite values)
    falls back to the element-wise test."""
    if isinstance(a, torch.Tensor):
        if not a.is_floating_point() or bool(torch.isfinite(a.sum())):
            return True
        return bool(torch.isfinite(a).all())
    a = np.asarray(a)
    if a.dtype.kind not in "fc":
        return True
    with np.errstate(over="ignore", invalid="ignore"):
        if bool(np.isfinite(a.sum(dtype=np.float32))):
            return True
    return bool(np.isfinite(a).all())


def check_gbuffer(gbuffer: dict[str, np.ndarray], finite: bool = True) -> tuple[int, int, int]:
    """(T, H, W) of a G-buffer clip; a clear error for missing keys, unusable sizes and (with
    ``finite``) a NaN or an infinity in depth or normal."""
    for key in ("depth", "normal", "albedo", "roughness", "metallic"):
        if key not in gbuffer:
            raise KeyError(f"G-buffer is missing '{key}'")
    depth = np.asarray(gbuffer["depth"])
    if depth.ndim != 3:
        raise ValueError(f"G-buffer 'depth': expected (T, H, W), got shape {depth.shape}")
    T, H, W = depth.shape
    for key in ("depth", "normal") if finite else ():
        if not all_finite(gbuffer[key]):
            raise ValueError(f"G-buffer '{key}' contains NaN or infinite values")
    if H % 16 or W % 16:
        raise ValueError(f"G-buffer size {H}x{W}: height and width must be multiples of 16")
    return T, H, W


def depth_to_unit(depth: torch.Tensor) -> torch.Tensor:
    """Linear depth in metres -> (0, 1], 1 at the camera, 0 for background (depth 0)."""
    return torch.where(depth > 0, 1.0 / (1.0 + 0.25 * depth.clamp(min=0)), torch.zeros_like(depth))


def gbuffer_input(frame: Mapping[str, np.ndarray | torch.Tensor]) -> torch.Tensor:
    """Clip-contract G-buffer arrays (leading dims ..., H, W) -> float (N, 9, H, W).

    Channels: albedo (3, 0..1), normal (3, -1..1), depth (1, ``depth_to_unit``),
    roughness (1, 0..1), metallic (1, 0..1). Leading dims are flattened into N.
    """
    def t(key: str) -> torch.Tensor:
        if key not in frame:
            raise KeyError(f"G-buffer frame is missing key '{key}'")
        return as_tensor(frame[key])

    depth = t("depth")
    H, W = depth.shape[-2:]
    N = depth.reshape(-1, H, W).shape[0]
    x = gbuffer_channels(t("albedo").reshape(N, H, W, 3), t("normal").reshape(N, H, W, 3), depth.reshape(N, H, W),
                         t("roughness").reshape(N, H, W), t("metallic").reshape(N, H, W))
    if not all_finite(x):
        raise ValueError("G-buffer frame contains NaN or infinite values")
    return x


def gbuffer_channels(albedo: torch.Tensor, normal: torch.Tensor, depth: torch.Tensor, roughness: torch.Tensor,
                     metallic: torch.Tensor) -> torch.Tensor:
    """``gbuffer_input``'s arithmetic, as one pure tensor function (also traced into the Flash
    renderer's ONNX stream graph): albedo (N, H, W, 3) and roughness, metallic (N, H, W) in
    0..255, normal (N, H, W, 3), depth (N, H, W) in metres, of any real dtype -> (N, 9, H, W) float."""
    return torch.cat([albedo.float().permute(0, 3, 1, 2) * (1 / 255.0), normal.float().permute(0, 3, 1, 2),
                      depth_to_unit(depth.float())[:, None],
                      torch.stack([roughness.float(), metallic.float()], 1) * (1 / 255.0)], 1)


def modality_images(x: torch.Tensor) -> dict[str, torch.Tensor]:
    """(N, 9, H, W) raw G-buffer -> modality -> (N, 3, H, W) images in [0, 1]."""
    return {
        "albedo": x[:, 0:3],
        "normal": x[:, 3:6] * 0.5 + 0.5,
        "depth": x[:, 6:7].expand(-1, 3, -1, -1),
        "roughness": x[:, 7:8].expand(-1, 3, -1, -1),
        "metallic": x[:, 8:9].expand(-1, 3, -1, -1),
    }


@torch.no_grad()
def teacher_gbuffer_latents(autoencoder, x: torch.Tensor) -> torch.Tensor:
    """(N, 9, H, W) raw G-buffer -> (N, 5 * C, H/8, W/8): every modality through the full encoder."""
    images = modality_images(x)
    batch = torch.cat([images[m] for m in MODALITIES], 0)
    z = autoencoder.encode(batch)
    return torch.cat(z.chunk(len(MODALITIES), 0), 1)


VIEW_INPUT_CHANNELS = 8


def view_input(normal: np.ndarray | torch.Tensor, K: np.ndarray | torch.Tensor,
               world_to_camera: np.ndarray | torch.Tensor) -> torch.Tensor:
    """What the G-buffer leaves out about the view, per pixel: (N, 8, H, W) float.

    Channels: the world-space normal (3; zero where the normal is, i.e. background), the
    world-space view ray from the eye (3, unit) and the camera-space ray's x, y at unit depth (2,
    the pixel's place in the image). The contract stores normals in camera space, but the
    reference lights the scene from a fixed world direction per style: which walls face the sun,
    where the sky is bright and where the sun disk sits depend on the camera's heading, which no
    camera-space channel shows. ``normal`` (..., H, W, 3), ``K`` (3, 3) and ``world_to_camera``
    (..., 4, 4) follow the clip contract; leading dims are flattened into N.
    """
    n = as_tensor(normal).float()
    H, W = n.shape[-3:-1]
    n = n.reshape(-1, H, W, 3)
    rotation, rays, xy = camera_inputs(K, world_to_camera, H, W)
    if len(rotation) != len(n):
        raise ValueError(f"world_to_camera: {len(rotation)} matrices for {len(n)} normal frames")
    x = camera_view(n, rotation, rays, xy)
    if not all_finite(x):
        raise ValueError("G-buffer 'normal' contains NaN or infinite values")
    return x


def camera_inputs(K, world_to_camera, H: int, W: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What ``camera_view`` reads of a camera: the world -> camera rotation (N, 3, 3) of
    ``world_to_camera`` (..., 4, 4), and the per-pixel ray (H*W, 3) and image position (2, H, W)
    of intrinsics ``K`` (3, 3). Both None: the camera unknown, all zeros (which
    ``camera_view`` turns into zero channels). A clear error for a wrong shape, a value that is
    not finite or a focal length that is not positive."""
    if K is None or world_to_camera is None:
        return (torch.zeros(1, 3, 3), *_no_camera(H, W))
    w2c, k = as_tensor(world_to_camera).float(), as_tensor(K).float()
    if k.shape != (3, 3):
        raise ValueError(f"K: expected (3, 3), got {tuple(k.shape)}")
    if w2c.shape[-2:] != (4, 4):
        raise ValueError(f"world_to_camera: expected (..., 4, 4), got {tuple(w2c.shape)}")
    if not (torch.isfinite(w2c).all() and torch.isfinite(k).all() and k[0, 0] > 0 and k[1, 1] > 0):
        raise ValueError("K and world_to_camera must be finite, with positive focal lengths")
    xy, rays = _camera_rays(tuple(k.flatten().tolist()), H, W)
    return w2c.reshape(-1, 4, 4)[:, :3, :3], rays, xy


@functools.lru_cache(maxsize=16)
def _no_camera(H: int, W: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.zeros(H * W, 3), torch.zeros(2, H, W)


def camera_view(normal: torch.Tensor, rotation: torch.Tensor, rays: torch.Tensor, xy: torch.Tensor) -> torch.Tensor:
    """``view_input``'s arithmetic, as one pure tensor function (also traced into the Flash
    renderer's ONNX stream graph): camera-space ``normal`` (N, H, W, 3), the world -> camera
    ``rotation`` (N, 3, 3) and the camera's ``rays`` (H*W, 3) and ``xy`` (2, H, W)
    (``camera_inputs``) -> (N, 8, H, W). Zero ``rotation`` and ``xy`` give zero channels: the
    camera unknown."""
    N, H, W = normal.shape[:3]
    n = normal.float().permute(0, 3, 1, 2)                      # (N, 3, H, W)
    r = rays.T.reshape(1, 3, H, W)
    # world = R^T camera for column vectors: row i of R weighs camera component i. Three
    # broadcast multiply-adds: a (HW, 3) x (3, 3) matmul costs several times more on a CPU.
    R = rotation[:, :, :, None, None]                           # (N, 3, 3, 1, 1)
    world_normal = n[:, 0:1] * R[:, 0] + n[:, 1:2] * R[:, 1] + n[:, 2:3] * R[:, 2]
    world_ray = r[:, 0:1] * R[:, 0] + r[:, 1:2] * R[:, 1] + r[:, 2:3] * R[:, 2]
    return torch.cat([world_normal, world_ray, xy.expand(N, 2, H, W)], 1)


@functools.lru_cache(maxsize=16)
def _camera_rays(K: tuple[float, ...], H: int, W: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-pixel image position at unit depth (2, H, W) (y up, as the normals) and the unit
    camera-space view ray (H*W, 3) of intrinsics ``K`` (row-major, 9 values); cached, since a
    stream's camera intrinsics rarely change."""
    k = torch.tensor(K, dtype=torch.float32).reshape(3, 3)
    v, u = torch.meshgrid(torch.arange(H) + 0.5, torch.arange(W) + 0.5, indexing="ij")
    xy = torch.stack([(u - k[0, 2]) / k[0, 0], -(v - k[1, 2]) / k[1, 1]], 0)
    ray = torch.cat([xy, -torch.ones(1, H, W)], 0)
    ray = ray / ray.norm(dim=0, keepdim=True)
    return xy, ray.reshape(3, H * W).T.contiguous()


# A view input of this many channels is ``view_input`` followed by the raw G-buffer
# (``gbuffer_input``): the camera and the G-buffer at pixel resolution, for a network whose
# G-buffer otherwise arrives only as 8x8-pixel latents.
PIXEL_VIEW_CHANNELS = VIEW_INPUT_CHANNELS + GBUFFER_INPUT_CHANNELS   # 17


def model_view_input(gbuffer: Mapping, channels: int, K=None, world_to_camera=None,
                     raw: torch.Tensor | None = None) -> torch.Tensor | None:
    """The view input (N, channels, H, W) a model with ``channels`` view channels reads, or None
    for a model without a view branch.

    The camera comes from ``K`` and ``world_to_camera`` or, where those are None, from the keys of
    the same names in ``gbuffer``; without a camera the ``view_input`` channels are zero (the camera
    unknown, as training's view dropout shows it). ``channels`` is ``VIEW_INPUT_CHANNELS`` (the
    camera only) or ``PIXEL_VIEW_CHANNELS`` (the camera, then the raw G-buffer, always present;
    ``raw``: its ``gbuffer_input`` where the caller already has it).
    """
    if not channels:
        return None
    if channels not in (VIEW_INPUT_CHANNELS, PIXEL_VIEW_CHANNELS):
        raise ValueError(f"view channels: expected {VIEW_INPUT_CHANNELS} or {PIXEL_VIEW_CHANNELS}, got {channels}")
    K = gbuffer.get("K") if K is None else K
    world_to_camera = gbuffer.get("world_to_camera") if world_to_camera is None else world_to_camera
    if "normal" not in gbuffer:
        raise KeyError("G-buffer frame is missing key 'normal'")
    normal = gbuffer["normal"]
    H, W = np.shape(normal)[-3:-1]
    if K is None or world_to_camera is None:
        view = torch.zeros(int(np.prod(np.shape(normal)[:-3], dtype=np.int64)), VIEW_INPUT_CHANNELS, H, W)
    else:
        view = view_input(normal, K, world_to_camera)
    if channels == VIEW_INPUT_CHANNELS:
        return view
    if raw is None:
        raw = gbuffer_input({k: gbuffer[k] for k in MODALITIES if k in gbuffer})
    return torch.cat([view, raw], 1)


# The guided decoder's full-resolution input (``decoder_guide``): ``model_view_input`` with the
# raw G-buffer, then the world-space position of each pixel's surface, the sky's stars and the
# surface breaks. Channels are only ever appended, so a decoder trained on fewer reads a prefix.
POSITION_CHANNELS = slice(PIXEL_VIEW_CHANNELS, PIXEL_VIEW_CHANNELS + 3)    # 17..19, camera needed
STAR_CHANNEL = PIXEL_VIEW_CHANNELS + 3                                    # 20, camera needed
BREAK_CHANNELS = slice(STAR_CHANNEL + 1, STAR_CHANNEL + 3)               # 21..22
GUIDE_CHANNELS = STAR_CHANNEL + 3            # 23
CAMERA_GUIDE_CHANNELS = slice(PIXEL_VIEW_CHANNELS, STAR_CHANNEL + 1)     # after the view: zero without a camera
POSITION_SCALE = 0.1                         # world positions in units of 10 m
WORLD_RAY = slice(3, 6)                      # the world-space view ray in ``view_input``
RAW_NORMAL = slice(VIEW_INPUT_CHANNELS + 3, VIEW_INPUT_CHANNELS + 6)   # the camera-space normal in ``gbuffer_input``


def world_position(depth: torch.Tensor, xy: torch.Tensor, world_to_camera: torch.Tensor) -> torch.Tensor:
    """World-space position (N, 3, H, W) of each pixel's surface, times ``POSITION_SCALE``, zero
    for background (depth 0): linear ``depth`` (N, H, W) in metres, the image position at unit
    depth ``xy`` (2, H, W) (``camera_inputs``; y up) and ``world_to_camera`` (N, 4, 4)."""
    d = depth.float()[:, None]
    p = torch.cat([xy[None] * d, -d], 1)                                   # camera space (N, 3, H, W)
    R, t = world_to_camera[:, :3, :3].float(), world_to_camera[:, :3, 3].float()
    q = p - t[:, :, None, None]
    world = q[:, 0:1] * R[:, 0, :, None, None] + q[:, 1:2] * R[:, 1, :, None, None] + q[:, 2:3] * R[:, 2, :, None, None]
    return torch.where(d > 0, world * POSITION_SCALE, torch.zeros_like(world))


def decoder_guide(gbuffer: Mapping, K=None, world_to_camera=None) -> torch.Tensor:
    """The guided decoder's input (N, ``GUIDE_CHANNELS``, H, W) for clip-contract G-buffer arrays
    (leading dims flattened): the camera's view channels, the raw G-buffer, the world-space
    position, the sky's stars (``sky_stars``) and the surface breaks (``surface_breaks``). The
    camera comes from ``K`` and ``world_to_camera`` or the keys of those names; without one, its
    channels (view, position and stars) are zero: the camera unknown."""
    K = gbuffer.get("K") if K is None else K
    world_to_camera = gbuffer.get("world_to_camera") if world_to_camera is None else world_to_camera
    view = model_view_input(gbuffer, PIXEL_VIEW_CHANNELS, K, world_to_camera)
    H, W = view.shape[-2:]
    depth = as_tensor(gbuffer["depth"]).float().reshape(-1, H, W)
    breaks = surface_breaks(depth, view[:, RAW_NORMAL])
    if K is None or world_to_camera is None:
        return torch.cat([view, torch.zeros(len(view), 4, H, W), breaks], 1)
    xy = camera_inputs(K, world_to_camera, H, W)[2]
    w2c = as_tensor(world_to_camera).float().reshape(-1, 4, 4)
    if not torch.isfinite(w2c).all():
        raise ValueError("world_to_camera contains NaN or infinite values")
    return torch.cat([view, world_position(depth, xy, w2c), sky_stars(view[:, WORLD_RAY], depth), breaks], 1)


STAR_CELLS = 180.0        # the star field's cells per unit of direction
STAR_SHARE = 0.004        # the share of cells that hold a star


def sky_stars(world_ray: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
    """The world's star field where a pixel sees the sky: (N, 1, H, W) in [0, 1], for the unit
    world-space view ray (N, 3, H, W; z up) and linear ``depth`` (N, H, W; 0 = sky).

    The sky is part of the world the engine owns, as the albedo of its surfaces is: our engine's
    sky holds a star in a fixed 0.4% of the direction cells (``STAR_CELLS`` per unit of the ray),
    faded out towards the horizon. The same hash draws them in the reference renderer
    (``engine/glsl/lighting.frag``, ``sky``), so this is the sky's texture; the style decides how
    much of it shows (all at night, nothing at noon), as the lighting decides how much of an
    albedo shows. Zero on geometry and below the horizon."""
    q = torch.floor(world_ray.float() * STAR_CELLS)
    p = q * 0.1031
    p = p - torch.floor(p)
    p = p + (p * (p.flip(1) + 31.32)).sum(1, keepdim=True)      # dot(p, p.zyx + 31.32)
    h = (p[:, 0:1] + p[:, 1:2]) * p[:, 2:3]
    h = h - torch.floor(h)
    up = world_ray[:, 2:3].float()
    fade = (up / 0.2).clamp(0, 1)
    fade = fade * fade * (3 - 2 * fade)                          # smoothstep(0, 0.2, up)
    sky = (depth[:, None] <= 0) & (up > 0)
    return torch.where(sky & (h >= 1 - STAR_SHARE), fade, torch.zeros_like(fade))


def surface_breaks(depth: torch.Tensor, normal: torch.Tensor) -> torch.Tensor:
    """Where the surface breaks between a pixel and its four neighbours: (N, 2, H, W) in [0, 1],
    for linear ``depth`` (N, H, W; 0 = sky) and camera-space unit ``normal`` (N, 3, H, W).

    Channel 0, silhouettes: the largest relative depth jump, ``tanh(10 |d' - d| / max(d, 0.1))``,
    1 where geometry meets sky. Channel 1, creases: the largest ``(1 - n . n') / 2`` between
    geometry pixels. One-pixel-wide features that 3x3 convolutions at full resolution read
    directly (outlines, rims, anti-aliased edges) instead of inferring them from the depth and
    normal values; any engine's G-buffer gives them."""
    d = depth.float()[:, None]
    n = normal.float()
    dp = torch.nn.functional.pad(d, (1, 1, 1, 1), mode="replicate")
    npad = torch.nn.functional.pad(n, (1, 1, 1, 1), mode="replicate")
    H, W = d.shape[-2:]
    silhouette = torch.zeros_like(d)
    crease = torch.zeros_like(d)
    hit = d > 0
    for dy, dx in ((1, 2), (1, 0), (2, 1), (0, 1)):
        dq = dp[..., dy:dy + H, dx:dx + W]
        nq = npad[..., dy:dy + H, dx:dx + W]
        hit_q = dq > 0
        jump = torch.tanh(10 * (dq - d).abs() / d.clamp(min=0.1))
        jump = torch.where(hit & hit_q, jump, (hit != hit_q).float())
        silhouette = torch.maximum(silhouette, jump)
        bend = ((1 - (n * nq).sum(1, keepdim=True)) * 0.5).clamp(0, 1)
        crease = torch.maximum(crease, torch.where(hit & hit_q, bend, torch.zeros_like(bend)))
    return torch.cat([silhouette, crease], 1)

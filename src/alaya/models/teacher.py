"""The teacher: a latent rectified-flow model over clips, bidirectional in time.

Input per clip: noisy latents ``z`` (B, T, C, h, w), flow time ``t`` (B,), the G-buffer latents
``gbuffer`` (B, T, G, h, w) concatenated along channels, and a prompt embedding ``text``
(B, 384) that — with the time embedding — drives adaptive group norms. Frames share a 2D U-Net
(latent resolution and half of it) whose blocks mix information across frames with temporal
convolutions that look both ways. Prompt dropout in training (``prompt_dropout``) lets the
sampler use classifier-free guidance: the unconditional call passes a zero ``text``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from alaya.diffusion.flow import edm_coefficients
from alaya.nn.blocks import conv
from alaya.nn.conditioning import AdaGroupNorm, TemporalConv, timestep_embedding
from alaya.nn.pretrained import from_pretrained, save_pretrained


@dataclass
class TeacherConfig:
    latent_channels: int = 32
    gbuffer_channels: int = 160
    text_dim: int = 384
    widths: tuple[int, ...] = (128, 192)    # at the latent resolution and at half of it
    blocks: int = 2                         # residual blocks per level and direction
    emb_dim: int = 256
    temporal_kernel: int = 3
    prompt_dropout: float = 0.1
    sigma_data: float = 0.0       # > 0: EDM preconditioning, the network predicts data (see forward)
    view_channels: int = 0        # > 0: also read ``gbuffer.view_input`` (world-space normal and
                                  # view ray) at pixel resolution, 8x8 pixels per latent cell;
                                  # ``PIXEL_VIEW_CHANNELS``: the raw G-buffer follows it
    view_pixel: int = 0           # > 0: a per-pixel MLP adds this many features to the view input
                                  # before its 8x8 blocks are read (shading is per pixel)


# Named sizes. "small" is what we train and ship on a 2-core CPU; "base" is the same design at
# GPU scale; "tiny" is for tests.
TEACHER_PRESETS: dict[str, dict] = {
    "tiny": dict(widths=(8, 8), blocks=1, emb_dim=8),
    "small": dict(widths=(96, 128), blocks=2, emb_dim=192, sigma_data=0.75),
    "base": dict(widths=(128, 192), blocks=2, emb_dim=256, sigma_data=0.75),
}


def teacher_config(preset: str = "small", **overrides) -> TeacherConfig:
    if preset not in TEACHER_PRESETS:
        raise ValueError(f"unknown teacher preset '{preset}'; choose from {sorted(TEACHER_PRESETS)}")
    return TeacherConfig(**{**TEACHER_PRESETS[preset], **overrides})


class FlowBlock(nn.Module):
    def __init__(self, cin: int, cout: int, emb_dim: int, kernel: int, causal: bool = False):
        super().__init__()
        self.norm1 = AdaGroupNorm(cin, emb_dim)
        self.conv1 = conv(cin, cout)
        self.norm2 = AdaGroupNorm(cout, emb_dim)
        self.conv2 = conv(cout, cout)
        nn.init.zeros_(self.conv2.weight)
        self.skip = nn.Identity() if cin == cout else nn.Conv2d(cin, cout, 1)
        self.temporal = TemporalConv(cout, kernel, causal)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor, emb: torch.Tensor, frames: int) -> torch.Tensor:
        h = self.conv1(self.act(self.norm1(x, emb)))
        h = self.conv2(self.act(self.norm2(h, emb)))
        return self.temporal(self.skip(x) + h, frames)


def view_branch(channels: int, width: int) -> nn.Sequential:
    """Pixel-resolution view input (N, V, 8h, 8w) -> stem features (N, width, h, w): each 8x8
    block to channels, then two convolutions. The last starts at zero, so a network that gains
    the branch starts out computing what it computed without it; no biases, so a zero input (an
    unknown camera) adds exactly nothing, as None does."""
    branch = nn.Sequential(nn.PixelUnshuffle(8), nn.Conv2d(64 * channels, width, 1, bias=False), nn.SiLU(),
                           nn.Conv2d(width, width, 3, padding=1, bias=False))
    nn.init.zeros_(branch[-1].weight)
    return branch


def strided_view_branch(branch: nn.Sequential) -> nn.Sequential:
    """The same function as ``view_branch``'s ``branch`` with its 8x8 blocks read by one 8x8
    convolution of stride 8 (weights reshaped) instead of ``PixelUnshuffle`` + a 1x1
    convolution: onnxruntime runs PixelUnshuffle as a 6-D transpose, which cost 1.2 ms of the
    Flash student's 3.9 ms frame graph (measured). For export; trained weights keep their layout."""
    unshuffle, blocks, act, conv = branch
    r = unshuffle.downscale_factor
    width, inputs = blocks.weight.shape[:2]
    strided = nn.Conv2d(inputs // (r * r), width, r, stride=r, bias=False)
    with torch.no_grad():       # PixelUnshuffle's channel c * r * r + i * r + j holds pixel (i, j) of channel c
        strided.weight.copy_(blocks.weight.reshape(width, inputs // (r * r), r, r))
    return nn.Sequential(strided, act, conv)


def pixel_features(channels: int, features: int) -> nn.Sequential:
    """Per-pixel MLP (two 1x1 convolutions, no biases: zero in, zero out) whose ``features``
    outputs ``apply_view`` appends to the view input, so that the blocked branch can read
    per-pixel products (albedo times a light term) that a linear map of a block cannot form."""
    return nn.Sequential(nn.Conv2d(channels, features, 1, bias=False), nn.SiLU(),
                         nn.Conv2d(features, features, 1, bias=False), nn.SiLU())


def apply_view(branch: nn.Module, pixel: nn.Module | None, view: torch.Tensor) -> torch.Tensor:
    """Stem features of a view input (N, V, 8h, 8w) through ``view_branch`` (and ``pixel_features``)."""
    if pixel is not None:
        view = torch.cat([view, pixel(view)], 1)
    return branch(view)


def check_view(view: torch.Tensor | None, channels: int, shape: tuple[int, ...]) -> None:
    """``view`` must be None or (B, T, channels, 8h, 8w) for latents of ``shape`` (B, T, C, h, w)."""
    if view is None:
        return
    B, T, _, h, w = shape
    if channels == 0:
        raise ValueError("this model has no view branch (config.view_channels = 0) but got a view input")
    if view.shape != (B, T, channels, 8 * h, 8 * w):
        raise ValueError(f"view: expected {(B, T, channels, 8 * h, 8 * w)}, got {tuple(view.shape)}")


class Teacher(nn.Module):
    causal = False

    def __init__(self, config: TeacherConfig | None = None):
        super().__init__()
        self.config = c = config or TeacherConfig()
        w0, w1 = c.widths
        k = c.temporal_kernel
        self.time_mlp = nn.Sequential(nn.Linear(c.emb_dim, c.emb_dim), nn.SiLU(), nn.Linear(c.emb_dim, c.emb_dim))
        self.text_mlp = nn.Sequential(nn.Linear(c.text_dim, c.emb_dim), nn.SiLU(), nn.Linear(c.emb_dim, c.emb_dim))
        self.stem = conv(c.latent_channels + c.gbuffer_channels, w0)
        self.view = view_branch(c.view_channels + c.view_pixel, w0) if c.view_channels else None
        self.view_pixel = pixel_features(c.view_channels, c.view_pixel) if c.view_channels and c.view_pixel else None
        self.down0 = nn.ModuleList(FlowBlock(w0, w0, c.emb_dim, k, self.causal) for _ in range(c.blocks))
        self.down = nn.Conv2d(w0, w1, 3, 2, 1)
        self.mid = nn.ModuleList(FlowBlock(w1, w1, c.emb_dim, k, self.causal) for _ in range(2 * c.blocks))
        self.up = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), conv(w1, w0))
        self.up0 = nn.ModuleList(FlowBlock(2 * w0 if i == 0 else w0, w0, c.emb_dim, k, self.causal)
                                 for i in range(c.blocks))
        self.out_norm = nn.GroupNorm(8, w0)
        self.out = conv(w0, c.latent_channels)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def embed(self, t: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        return self.time_mlp(timestep_embedding(t, self.config.emb_dim)) + self.text_mlp(text)

    def view_features(self, view: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
        """The view branch's stem features (B*T, widths[0], h, w) of a view input (B, T, V, 8h, 8w)
        for latents of ``shape`` (B, T, C, h, w): the same at every sampling step, so a sampler
        computes them once (``forward(..., view_features=...)``)."""
        check_view(view, self.config.view_channels, shape)
        B, T, _, h, w = shape
        return apply_view(self.view, self.view_pixel, view.reshape(B * T, -1, 8 * h, 8 * w))

    def forward(self, z: torch.Tensor, t: torch.Tensor, gbuffer: torch.Tensor,
                text: torch.Tensor, output: str = "v", view: torch.Tensor | None = None,
                view_features: torch.Tensor | None = None) -> torch.Tensor:
        """Velocity ``eps - x`` (``output="v"``) or the data estimate (``output="x"``) for noisy
        latents ``z`` (B, T, C, h, w) at times ``t`` (B,).

        With ``sigma_data > 0`` the network is EDM-preconditioned: it sees ``c_in z`` and predicts
        ``x_hat = c_skip z + c_out F``, and the velocity is ``(z - x_hat) / t``. A conditional
        renderer's target is nearly a function of the G-buffer; predicting it directly is far
        easier than predicting ``eps - x``, which makes the network carry the input noise through
        every layer. Without preconditioning F is the velocity itself.

        ``view`` (B, T, view_channels, 8h, 8w), ``gbuffer.view_input`` per frame, is optional for
        a model with a view branch: None (or zeros, which training's view dropout shows it) means
        the camera is unknown and the branch adds nothing. ``view_features``, instead of ``view``:
        ``view_features(view, z.shape)``, computed once for every step of a sample."""
        if output not in ("v", "x"):
            raise ValueError(f"output must be 'v' or 'x', got {output!r}")
        c = self.config
        if z.ndim != 5 or z.shape[2] != c.latent_channels:
            raise ValueError(f"z: expected (B, T, {c.latent_channels}, h, w), got {tuple(z.shape)}")
        B, T, C, h, w = z.shape
        if gbuffer.shape != (B, T, c.gbuffer_channels, h, w):
            raise ValueError(f"gbuffer: expected {(B, T, c.gbuffer_channels, h, w)}, got {tuple(gbuffer.shape)}")
        if text.shape != (B, c.text_dim) or t.shape != (B,):
            raise ValueError(f"text must be (B, {c.text_dim}) and t (B,), got {tuple(text.shape)}, {tuple(t.shape)}")
        if h % 2 or w % 2:
            raise ValueError(f"latent size must be even, got {h}x{w}")
        if view is not None and view_features is not None:
            raise ValueError("pass view or view_features, not both")
        check_view(view, c.view_channels, z.shape)
        if view_features is not None and view_features.shape != (B * T, c.widths[0], h, w):
            raise ValueError(f"view_features: expected {(B * T, c.widths[0], h, w)}, got {tuple(view_features.shape)}")
        emb = self.embed(t, text).repeat_interleave(T, 0)                    # (B*T, E)
        pre = c.sigma_data > 0
        if pre:
            c_in, c_skip, c_out = (k.reshape(B, 1, 1, 1, 1) for k in edm_coefficients(t.float(), c.sigma_data))
        x = self.stem(torch.cat([z * c_in if pre else z, gbuffer], 2).reshape(B * T, -1, h, w))
        if view is not None:
            view_features = self.view_features(view.to(x.dtype), z.shape)
        if view_features is not None:
            x = x + view_features.to(x.dtype)
        for blk in self.down0:
            x = blk(x, emb, T)
        skip = x
        x = self.down(x)
        for blk in self.mid:
            x = blk(x, emb, T)
        x = torch.cat([self.up(x), skip], 1)
        for blk in self.up0:
            x = blk(x, emb, T)
        f = self.out(nn.functional.silu(self.out_norm(x))).reshape(B, T, C, h, w)
        tb = t.reshape(B, 1, 1, 1, 1)
        if pre:
            x_hat = c_skip * z + c_out * f
            return x_hat if output == "x" else (z - x_hat) / tb.clamp(min=1e-4)
        return z - tb * f if output == "x" else f

    def save_pretrained(self, folder, **metadata) -> None:
        save_pretrained(self, folder, **metadata)

    @classmethod
    def from_pretrained(cls, folder) -> "Teacher":
        return from_pretrained(cls, TeacherConfig, folder)

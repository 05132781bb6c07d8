"""The teacher: a latent rectified-flow model over clips, bidirectional in time.

Input per clip: noisy latents ``z`` (B, T, C, h, w), flow time ``t`` (B,), the G-buffer latents
``gbuffer`` (B, T, G, h, w) concatenated along channels, and a prompt embedding ``text``
(B, 384) that — with the time embedding — drives adaptive group norms. Frames share a 2D U-Net
(``alaya.nn.unet``: latent resolution and half of it, the student's core too) whose blocks mix
information across frames with temporal convolutions that look both ways. Prompt dropout in
training (``prompt_dropout``) lets the sampler use classifier-free guidance: the unconditional
call passes a zero ``text``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from alaya.diffusion.flow import edm_coefficients
from alaya.nn.blocks import conv
from alaya.nn.conditioning import timestep_embedding
from alaya.nn.pretrained import from_pretrained, save_pretrained
from alaya.nn.unet import UNetCore, apply_view, check_view, embedding_mlp


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


class Teacher(UNetCore):
    causal = False

    def __init__(self, config: TeacherConfig | None = None):
        super().__init__()
        self.config = c = config or TeacherConfig()
        self.time_mlp = embedding_mlp(c.emb_dim, c.emb_dim)
        self.text_mlp = embedding_mlp(c.text_dim, c.emb_dim)
        self.stem = conv(c.latent_channels + c.gbuffer_channels, c.widths[0])   # z and the G-buffer together
        self.build_view(c.view_channels, c.view_pixel, c.widths[0])
        self.build_core(c.widths, c.emb_dim, c.blocks, c.latent_channels, c.temporal_kernel, self.causal)

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
        f = self.run_core(x, emb, T).reshape(B, T, C, h, w)
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

"""The Flash student: a causal, one-frame-at-a-time average-velocity model for streaming.

For frame n it predicts the MeanFlow average velocity ``u(z, r, t)`` of that frame's RGB
latents, given the frame's G-buffer latents, the prompt embedding and a bounded context: its
own ``context`` most recent output latents, each warped to the current frame by the engine's
motion vectors (``warp_latents``) and paired with a validity mask (pixels that came from
outside the previous view are marked invalid). Context never looks ahead, and its size is fixed,
so a stream of any length runs in flat memory.

The network is the teacher's U-Net core (``alaya.nn.unet``) run on one frame per call; a temporal
convolution over a single replicated frame is a linear map, so a teacher's weights carry over
(``init_from_teacher`` copies every tensor whose name and shape match, and the teacher's input
weights for the noisy latents and the G-buffer into the wider input layer). Flow time ``t`` and
interval length ``t - r`` are embedded separately; with ``r = t`` the model is an ordinary
velocity model, which is how the early distillation stages use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from alaya.diffusion.flow import edm_coefficients
from alaya.diffusion.meanflow import integrate_steps
from alaya.models.teacher import Teacher
from alaya.nn.blocks import conv
from alaya.nn.conditioning import AdaGroupNorm, timestep_embedding
from alaya.nn.pretrained import copy_matching, from_pretrained, save_pretrained
from alaya.nn.unet import UNetCore, apply_view, check_view, embedding_mlp


@dataclass
class StudentConfig:
    latent_channels: int = 32
    gbuffer_channels: int = 160
    text_dim: int = 384
    widths: tuple[int, ...] = (64, 96)
    blocks: int = 1
    emb_dim: int = 192
    context: int = 2                  # past output latents it sees (newest first)
    average_velocity: bool = False    # True after MeanFlow training: called with r < t
    steps: int = 4                    # sampling steps it was distilled for
    noise: str = "frame"              # sampling noise per stream: "frame" (fresh for every frame) or
                                      # "fixed" (the same for every frame: less flicker)
    sigma_data: float = 0.75          # > 0: EDM-preconditioned data prediction, as the teacher
    view_channels: int = 0            # > 0: a view branch as the teacher's (``gbuffer.model_view_input``)
    view_pixel: int = 0               # the teacher's per-pixel view features
    position_features: int = 0        # > 0: octaves of sinusoidal features of each latent pixel's place
                                      # in the frame, added at the input layer (``frame_position``), so
                                      # a prompt can put content at a place in the view; 0: none


def frame_position(h: int, w: int, octaves: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """(1, 4 * octaves, h, w): sin and cos of x and y (pixel centres in [-1, 1] across the frame)
    at frequencies pi/2, pi, 2 pi, ...: where a pixel lies in the view, at any frame size. A
    translation-equivariant network cannot tell the centre from anywhere else on its own."""
    ys, xs = torch.meshgrid((torch.arange(h, dtype=dtype, device=device) + 0.5) / h * 2 - 1,
                            (torch.arange(w, dtype=dtype, device=device) + 0.5) / w * 2 - 1, indexing="ij")
    freqs = math.pi / 2 * 2.0 ** torch.arange(octaves, dtype=dtype, device=device)
    angles = (torch.stack([xs, ys])[:, None] * freqs[None, :, None, None]).reshape(2 * octaves, h, w)
    return torch.cat([torch.sin(angles), torch.cos(angles)], 0)[None]


def latent_flow(motion: torch.Tensor, factor: int = 8) -> torch.Tensor:
    """Engine backward motion (..., H, W, 2) in pixels -> flow in latent pixels (..., 2, H/f, W/f),
    the mean over each f x f block."""
    lead = motion.shape[:-3]
    H, W = motion.shape[-3:-1]
    if H % factor or W % factor:
        raise ValueError(f"motion {H}x{W} is not a multiple of the latent factor {factor}")
    m = motion.float().reshape(-1, H, W, 2).permute(0, 3, 1, 2)
    return (F.avg_pool2d(m, factor) / factor).reshape(*lead, 2, H // factor, W // factor)


def warp_latents(latents: torch.Tensor, flow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Latents of frame n−1 (B, C, h, w) resampled at frame n's latent pixels by frame n's
    backward flow in latent pixels (B, 2, h, w) (``latent_flow``); returns (warped, valid
    (B, 1, h, w)) where valid marks sources inside the previous view."""
    B, C, h, w = latents.shape
    if flow.shape != (B, 2, h, w):
        raise ValueError(f"flow: expected {(B, 2, h, w)}, got {tuple(flow.shape)}")
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32) + 0.5,
                            torch.arange(w, dtype=torch.float32) + 0.5, indexing="ij")
    sx, sy = xs + flow[:, 0], ys + flow[:, 1]
    grid = torch.stack([sx / w * 2 - 1, sy / h * 2 - 1], -1)
    warped = F.grid_sample(latents.float(), grid, mode="bilinear", padding_mode="border", align_corners=False)
    valid = ((sx >= 0) & (sx <= w) & (sy >= 0) & (sy <= h)).float()[:, None]
    return warped, valid


def warp_context(context: torch.Tensor, valid: torch.Tensor, flow: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Warp a context stack (B, K, C, h, w) and its validity (B, K, 1, h, w) into the next
    frame by that frame's latent flow (B, 2, h, w)."""
    B, K, C, h, w = context.shape
    warped, inside = warp_latents(context.reshape(B, K * C, h, w), flow)
    return warped.reshape(B, K, C, h, w), valid * inside[:, None]


def push_context(context: torch.Tensor, valid: torch.Tensor, latent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Put a new output latent (B, C, h, w) at the front of the context, dropping the oldest."""
    ones = torch.ones_like(valid[:, :1])
    return torch.cat([latent[:, None], context[:, :-1]], 1), torch.cat([ones, valid[:, :-1]], 1)


@torch.no_grad()
def sample_student(student: "Student", z: torch.Tensor, ts: torch.Tensor, gbuffer: torch.Tensor,
                   text: torch.Tensor, context: torch.Tensor, valid: torch.Tensor,
                   view: torch.Tensor | None = None) -> torch.Tensor:
    """``integrate_student`` without gradient."""
    return integrate_student(student, z, ts, gbuffer, text, context, valid, view)


def integrate_student(student: "Student", z: torch.Tensor, ts: torch.Tensor, gbuffer: torch.Tensor,
                      text: torch.Tensor, context: torch.Tensor, valid: torch.Tensor,
                      view: torch.Tensor | None = None) -> torch.Tensor:
    """Integrate one frame's latents from ``ts[0]`` to ``ts[-1]`` (``flow.time_grid``) by
    ``meanflow.integrate_steps``: MeanFlow steps for an average-velocity student, Euler otherwise.
    Differentiable (training through a rollout); ``sample_student`` is the same without gradient."""
    B = z.shape[0]
    features = student.condition(gbuffer, context, valid, view)  # once per frame, not per step

    def velocity(z_, r, t):
        return student(z_, r.expand(B), t.expand(B), gbuffer, text, context, valid, features)
    return integrate_steps(velocity, z, ts, student.config.average_velocity)


class Student(UNetCore):
    def __init__(self, config: StudentConfig | None = None):
        super().__init__()
        self.config = c = config or StudentConfig()
        w0 = c.widths[0]
        self.time_mlp = embedding_mlp(c.emb_dim, c.emb_dim)
        self.interval_mlp = embedding_mlp(c.emb_dim, c.emb_dim)
        nn.init.zeros_(self.interval_mlp[-1].weight)       # r = t at init: a plain velocity model
        nn.init.zeros_(self.interval_mlp[-1].bias)
        self.text_mlp = embedding_mlp(c.text_dim, c.emb_dim)
        # The input layer is linear, so it splits exactly into a per-step part for the noisy
        # latents and a per-frame part for the G-buffer and context (``condition``), which a
        # sampler computes once per frame instead of once per step.
        self.stem = conv(c.latent_channels, w0)
        self.cond_stem = conv(c.gbuffer_channels + c.context * (c.latent_channels + 1), w0)
        nn.init.zeros_(self.cond_stem.bias)
        if c.position_features > 0:            # zero at init: a model given it later starts as it was
            self.position = nn.Conv2d(4 * c.position_features, w0, 1)
            nn.init.zeros_(self.position.weight)
            nn.init.zeros_(self.position.bias)
        self.build_view(c.view_channels, c.view_pixel, w0)
        self.build_core(c.widths, c.emb_dim, c.blocks, c.latent_channels, kernel=3, causal=True)

    def embed(self, r: torch.Tensor, t: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        d = self.config.emb_dim
        return (self.time_mlp(timestep_embedding(t, d)) + self.interval_mlp(timestep_embedding(t - r, d))
                + self.text_mlp(text))

    def condition(self, gbuffer: torch.Tensor, context: torch.Tensor, context_valid: torch.Tensor,
                  view: torch.Tensor | None = None) -> torch.Tensor:
        """The input layer's per-frame part: features (B, widths[0], h, w) of the G-buffer
        latents, the masked context and (with a view branch) the view input (B, V, 8h, 8w),
        the same for every sampling step of a frame. ``view`` None or zero: camera unknown.
        The sum of ``condition_gbuffer`` (what needs no past) and ``condition_context``."""
        return self.condition_gbuffer(gbuffer, view) + self.condition_context(context, context_valid)

    def condition_gbuffer(self, gbuffer: torch.Tensor, view: torch.Tensor | None = None) -> torch.Tensor:
        """The part of ``condition`` that reads only the frame itself: the input layer's G-buffer
        columns (and its bias) and the view branch. A streaming pipeline computes it for frame
        n + 1 while frame n is still being sampled."""
        G = self.config.gbuffer_channels
        stem = self.cond_stem
        features = F.conv2d(gbuffer, stem.weight[:, :G], stem.bias, stem.stride, stem.padding)
        if self.config.position_features > 0:
            h, w = gbuffer.shape[-2:]
            features = features + self.position(frame_position(h, w, self.config.position_features,
                                                                features.dtype, features.device))
        if view is None:
            return features
        B, _, h, w = gbuffer.shape
        check_view(view[:, None], self.config.view_channels, (B, 1, 0, h, w))
        return features + apply_view(self.view, self.view_pixel, view.to(features.dtype))

    def condition_context(self, context: torch.Tensor, context_valid: torch.Tensor) -> torch.Tensor:
        """The part of ``condition`` that reads the past: the input layer's context columns on
        the masked context (B, K, C, h, w) and its validity (B, K, 1, h, w); no bias."""
        B, K, _, h, w = context.shape
        ctx = torch.cat([context * context_valid, context_valid], 2).reshape(B, -1, h, w)
        stem = self.cond_stem
        return F.conv2d(ctx, stem.weight[:, self.config.gbuffer_channels:], None, stem.stride, stem.padding)

    def forward(self, z: torch.Tensor, r: torch.Tensor, t: torch.Tensor, gbuffer: torch.Tensor,
                text: torch.Tensor, context: torch.Tensor, context_valid: torch.Tensor,
                features: torch.Tensor | None = None, view: torch.Tensor | None = None) -> torch.Tensor:
        """Average velocity over [r, t] for one frame's noisy latents ``z`` (B, C, h, w), with
        G-buffer latents (B, G, h, w), prompt (B, D), context (B, K, C, h, w) and its validity
        (B, K, 1, h, w) — zeros where there is no past yet, and the view input (B, V, 8h, 8w) for
        a student with a view branch (None: camera unknown). ``features``: ``condition(gbuffer,
        context, context_valid, view)`` when the caller already has it (a sampler, per frame).

        With ``sigma_data > 0`` the network predicts the frame's data ``x_hat = c_skip z + c_out F``
        (EDM preconditioning at time t) and the velocity is ``(z - x_hat) / t``."""
        c = self.config
        B, C, h, w = z.shape
        K = c.context
        expect = {"gbuffer": (B, c.gbuffer_channels, h, w), "text": (B, c.text_dim),
                  "context": (B, K, C, h, w), "context_valid": (B, K, 1, h, w), "r": (B,), "t": (B,)}
        for name, value in (("gbuffer", gbuffer), ("text", text), ("context", context),
                            ("context_valid", context_valid), ("r", r), ("t", t)):
            if tuple(value.shape) != expect[name]:
                raise ValueError(f"{name}: expected {expect[name]}, got {tuple(value.shape)}")
        if C != c.latent_channels or h % 2 or w % 2:
            raise ValueError(f"z: expected (B, {c.latent_channels}, h, w) with even h, w, got {tuple(z.shape)}")
        if features is None:
            features = self.condition(gbuffer, context, context_valid, view)
        return self.velocity(z, r, t, text, features)

    def adaptive_norms(self) -> list[AdaGroupNorm]:
        """Every norm that reads the time and prompt embedding, in a fixed order."""
        return [m for m in self.modules() if isinstance(m, AdaGroupNorm)]

    def modulations(self, r: torch.Tensor, t: torch.Tensor, text: torch.Tensor) -> dict:
        """Each adaptive norm's gain and shift at times (r, t) for prompt ``text``: all that a
        step takes from them, the same for every frame of a prompt (``velocity(..., mods=)``)."""
        emb = self.embed(r, t, text)
        return {n: n.modulation(emb) for n in self.adaptive_norms()}

    def velocity(self, z: torch.Tensor, r: torch.Tensor, t: torch.Tensor, text: torch.Tensor | None,
                 features: torch.Tensor, mods: dict | None = None) -> torch.Tensor:
        """``forward`` without input checks, from ``condition``'s features: the per-step network
        (what the ONNX export runs). ``mods``: ``modulations(r, t, text)`` when the caller has
        them (``text`` is then unused)."""
        c = self.config
        B = z.shape[0]
        emb = self.embed(r, t, text) if mods is None else mods
        pre = c.sigma_data > 0
        if pre:
            c_in, c_skip, c_out = (k.reshape(B, 1, 1, 1) for k in edm_coefficients(t.float(), c.sigma_data))
        x = self.stem(z * c_in if pre else z) + features
        f = self.run_core(x, emb, 1)                                    # one frame a call
        if not pre:
            return f
        return (z - (c_skip * z + c_out * f)) / t.reshape(B, 1, 1, 1).clamp(min=1e-4)

    @torch.no_grad()
    def init_from_teacher(self, teacher: Teacher) -> list[str]:
        """Copy every teacher tensor whose name and shape match, and the teacher's input weights
        for (z, G-buffer) into the matching slice of the wider stem; returns what was copied."""
        own = self.state_dict()
        copied = copy_matching(self, teacher.state_dict())
        tw = teacher.stem.weight                            # (w0, C + G, 3, 3)
        C = self.config.latent_channels
        sw, cw = own["stem.weight"], own["cond_stem.weight"]
        if sw.shape[0] == tw.shape[0] and sw.shape[2:] == tw.shape[2:] and tw.shape[1] == C + self.config.gbuffer_channels:
            sw.copy_(tw[:, :C])
            cw[:, :tw.shape[1] - C] = tw[:, C:]
            cw[:, tw.shape[1] - C:] = 0
            own["stem.bias"].copy_(teacher.stem.bias)
            own["cond_stem.bias"].zero_()
            copied += ["stem.weight", "cond_stem.weight[:, :gbuffer]", "stem.bias"]
        return copied

    def save_pretrained(self, folder, **metadata) -> None:
        save_pretrained(self, folder, **metadata)

    @classmethod
    def from_pretrained(cls, folder) -> "Student":
        return from_pretrained(cls, StudentConfig, folder)

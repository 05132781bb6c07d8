"""``RenderSession``: the Flash student as an endless stream, one G-buffer frame in, one RGB
frame out.

Per frame: the tiny G-buffer encoder turns the raw G-buffer into latents; the context (the
student's last ``context`` output latents) is warped into the new frame by its motion vectors;
the student integrates the frame's latents from noise in ``steps`` steps (``sample_student``:
MeanFlow steps ``z_r = z_t - (t - r) u`` once it predicts average velocities, Euler steps before); the tiny streaming decoder (with its own one-frame memory) turns
them into RGB. Everything held across frames has a fixed size, so memory stays flat over an
unbounded stream.

Noise for frame n is drawn from a generator seeded by (seed, n), so the output does not depend
on how a caller chunks the stream. ``set_prompt`` swaps the prompt embedding between two
frames: the next frame is generated with it, nothing is restarted or dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import torch

from alaya.codecs.gbuffer import gbuffer_input
from alaya.codecs.tiny import StreamingDecoder, TinyDecoder, TinyGBufferEncoder
from alaya.models.student import Student, latent_flow, push_context, sample_student, warp_context
from alaya.renderers.teacher import check_gbuffer
from alaya.text import PromptEncoder

FRAME_KEYS = ("depth", "normal", "albedo", "roughness", "metallic", "motion")


class RenderSession:
    def __init__(self, student: Student, gbuffer_encoder: TinyGBufferEncoder, decoder: TinyDecoder,
                 prompt: str = "", encoder: PromptEncoder | None = None, steps: int | None = None, seed: int = 0,
                 channels_last: bool = False):
        steps = student.config.steps if steps is None else steps
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        self.student = student.eval()
        self.gbuffer_encoder = gbuffer_encoder.eval()
        self.decoder = StreamingDecoder(decoder)
        self.encoder = encoder or PromptEncoder()
        self.steps, self.seed = steps, seed
        self.times = torch.linspace(1.0, 0.0, steps + 1)
        if channels_last:
            for m in (self.student, self.gbuffer_encoder, self.decoder.decoder):
                m.to(memory_format=torch.channels_last)
        self.prompt = ""
        self.text = torch.zeros(1, student.config.text_dim)
        self.set_prompt(prompt)
        self.reset()

    def set_prompt(self, prompt: str) -> None:
        """Use ``prompt`` from the next frame on (the empty prompt means unconditional)."""
        self.text = self.encoder.encode(prompt).reshape(1, -1)
        self.prompt = prompt

    def reset(self) -> None:
        """Forget the past: the next frame starts a new stream (frame index 0)."""
        self.frame_index = 0
        self.context: torch.Tensor | None = None        # (1, K, C, h, w), newest first
        self.valid: torch.Tensor | None = None          # (1, K, 1, h, w)
        self.decoder.reset()

    @staticmethod
    def _check(frame: Mapping[str, np.ndarray]) -> tuple[int, int]:
        if "motion" not in frame:
            raise KeyError("G-buffer frame is missing 'motion'")
        _, H, W = check_gbuffer({k: np.asarray(frame[k])[None] for k in FRAME_KEYS if k in frame})
        motion = np.asarray(frame["motion"])
        if motion.shape != (H, W, 2):
            raise ValueError(f"G-buffer 'motion': expected {(H, W, 2)}, got {motion.shape}")
        if not np.isfinite(motion.astype(np.float32)).all():
            raise ValueError("G-buffer 'motion' contains NaN or infinite values")
        return H, W

    @torch.no_grad()
    def step_latent(self, frame: Mapping[str, np.ndarray]) -> torch.Tensor:
        """The student's output latents (1, C, h, w) for one G-buffer frame; advances the stream."""
        H, W = self._check(frame)
        g = self.gbuffer_encoder(gbuffer_input({k: frame[k] for k in FRAME_KEYS if k != "motion"}))
        K, C = self.student.config.context, self.student.config.latent_channels
        h, w = g.shape[-2:]
        if self.context is None or self.context.shape[-2:] != (h, w):
            self.context = torch.zeros(1, K, C, h, w)
            self.valid = torch.zeros(1, K, 1, h, w)
        elif self.frame_index > 0:
            motion = torch.from_numpy(np.asarray(frame["motion"], dtype=np.float32))[None]
            self.context, self.valid = warp_context(self.context, self.valid, latent_flow(motion, H // h))
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + self.frame_index)
        z = torch.randn(1, C, h, w, generator=gen)
        z = sample_student(self.student, z, self.times, g, self.text, self.context, self.valid)
        self.context, self.valid = push_context(self.context, self.valid, z)
        self.frame_index += 1
        return z

    @torch.no_grad()
    def step(self, frame: Mapping[str, np.ndarray]) -> np.ndarray:
        """uint8 (H, W, 3) RGB for one G-buffer frame (clip-contract arrays without the T axis)."""
        img = self.decoder.decode(self.step_latent(frame))
        return (img[0].permute(1, 2, 0) * 255).round().to(torch.uint8).numpy()

    def run(self, frames: Iterable[Mapping[str, np.ndarray]]) -> np.ndarray:
        """(N, H, W, 3) for a sequence of frames, continuing the current stream."""
        return np.stack([self.step(f) for f in frames])

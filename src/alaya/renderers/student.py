"""The Flash student as a renderer of whole clips, streaming one frame at a time.

Two codec setups, matching the distillation stages:

- ``codecs="full"`` (stages ar … meanflow): G-buffer latents from the full codec
  (``teacher_gbuffer_latents``), the full decoder, torch; optional classifier-free guidance
  (``guidance != 1``: two student calls per step, the AR stage before guidance distillation);
- ``codecs="tiny"`` (the final student): a :class:`~alaya.runtime.RenderSession` with the tiny
  G-buffer encoder and the tiny streaming decoder, in torch or onnxruntime.

Frames are generated causally: frame n sees only its own G-buffer, the prompt and the student's
warped outputs of earlier frames; noise for frame n is seeded by (seed, n) as in the session.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from alaya.codecs.autoencoder import Autoencoder
from alaya.codecs.gbuffer import check_gbuffer, gbuffer_input, teacher_gbuffer_latents
from alaya.codecs.tiny import TinyDecoder, TinyGBufferEncoder
from alaya.models.student import Student, latent_flow, push_context, warp_context
from alaya.runtime.session import FRAME_KEYS, RenderSession
from alaya.text import PromptEncoder

CODECS = ("full", "tiny")


class StudentRenderer:
    def __init__(self, student: Student, codecs: str = "tiny", autoencoder: Autoencoder | None = None,
                 gbuffer_encoder: TinyGBufferEncoder | None = None, decoder: TinyDecoder | None = None,
                 encoder: PromptEncoder | None = None, steps: int | None = None, guidance: float = 1.0,
                 backend: str = "onnx"):
        if codecs not in CODECS:
            raise ValueError(f"codecs must be one of {CODECS}, got {codecs!r}")
        if codecs == "full" and autoencoder is None:
            raise ValueError("codecs='full' needs the autoencoder")
        if codecs == "tiny" and (gbuffer_encoder is None or decoder is None):
            raise ValueError("codecs='tiny' needs the tiny G-buffer encoder and the tiny decoder")
        if codecs == "tiny" and guidance != 1.0:
            raise ValueError("the tiny-codec student has guidance distilled in: use guidance=1")
        self.student = student.eval()
        self.codecs, self.guidance = codecs, guidance
        self.steps = student.config.steps if steps is None else steps
        self.autoencoder = autoencoder.eval() if autoencoder is not None else None
        self.encoder = encoder or PromptEncoder()
        self.session = (RenderSession(student, gbuffer_encoder, decoder, encoder=self.encoder, steps=self.steps,
                                      backend=backend) if codecs == "tiny" else None)

    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike = "weights/student", codecs: str = "tiny",
                        autoencoder: str | os.PathLike = "weights/autoencoder",
                        gbuffer_encoder: str | os.PathLike = "weights/tiny_gbuffer_encoder",
                        decoder: str | os.PathLike = "weights/tiny_decoder", **kwargs) -> "StudentRenderer":
        student = Student.from_pretrained(folder)
        if codecs == "full":
            return cls(student, "full", autoencoder=Autoencoder.from_pretrained(autoencoder), **kwargs)
        return cls(student, codecs, gbuffer_encoder=TinyGBufferEncoder.from_pretrained(gbuffer_encoder),
                   decoder=TinyDecoder.from_pretrained(decoder), **kwargs)

    def render(self, gbuffer: dict[str, np.ndarray], prompt: str, seed: int = 0) -> np.ndarray:
        """uint8 (T, H, W, 3) frames for a G-buffer clip (with ``motion``) and a prompt."""
        check_gbuffer(gbuffer)
        if "motion" not in gbuffer:
            raise KeyError("G-buffer is missing 'motion' (the student warps its past by it)")
        T = np.asarray(gbuffer["depth"]).shape[0]
        keys = [k for k in FRAME_KEYS if k in gbuffer]
        frames = [{k: np.asarray(gbuffer[k])[i] for k in keys} for i in range(T)]
        if self.session is not None:
            self.session.seed = seed
            self.session.set_prompt(prompt)
            self.session.reset()
            return self.session.run(frames)
        return self._render_full(frames, prompt, seed)

    @torch.no_grad()
    def _render_full(self, frames: list[dict], prompt: str, seed: int) -> np.ndarray:
        s, c = self.student, self.student.config
        text = self.encoder.encode(prompt).reshape(1, -1)
        null = torch.zeros_like(text)
        times = torch.linspace(1.0, 0.0, self.steps + 1)
        H = frames[0]["depth"].shape[0]
        h, w = H // 8, frames[0]["depth"].shape[1] // 8
        ctx, valid = torch.zeros(1, c.context, c.latent_channels, h, w), torch.zeros(1, c.context, 1, h, w)
        out = []
        for n, frame in enumerate(frames):
            x = gbuffer_input({k: v for k, v in frame.items() if k != "motion"})
            g = teacher_gbuffer_latents(self.autoencoder, x)
            if n > 0:
                motion = torch.from_numpy(np.asarray(frame["motion"], dtype=np.float32))[None]
                ctx, valid = warp_context(ctx, valid, latent_flow(motion, 8))
            features = s.condition(g, ctx, valid)
            z = torch.randn(1, c.latent_channels, h, w, generator=torch.Generator().manual_seed(seed * 1_000_003 + n))
            for t, r in zip(times[:-1], times[1:]):
                rr = (r if c.average_velocity else t).reshape(1)
                u = s.velocity(z, rr, t.reshape(1), text, features)
                if self.guidance != 1.0:
                    u_null = s.velocity(z, rr, t.reshape(1), null, features)
                    u = u_null + self.guidance * (u - u_null)
                z = z - (t - r) * u
            ctx, valid = push_context(ctx, valid, z)
            out.append(self.autoencoder.decode(z))
        rgb = torch.cat(out).clamp(0, 1)
        return (rgb.permute(0, 2, 3, 1) * 255).round().to(torch.uint8).numpy()

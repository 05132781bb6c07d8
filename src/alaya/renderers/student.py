"""The Flash student as a renderer of whole clips, streaming one frame at a time.

Two codec setups, matching the distillation stages:

- ``codecs="full"`` (stages ar … meanflow): G-buffer latents from the full codec, the full
  decoder, torch; optional classifier-free guidance (``guidance != 1``: two student calls per
  step, the AR stage before guidance distillation) — ``FullCodecBackend``;
- ``codecs="tiny"`` (the final student): the tiny G-buffer encoder and the tiny streaming
  decoder, in torch or onnxruntime (``backend="onnx-int8"``: its steps quantized, from the
  activation ranges saved beside the weights).

Both run in a :class:`~alaya.runtime.RenderSession`, so every stage streams exactly as the
shipped student does.

Frames are generated causally: frame n sees only its own G-buffer, the prompt and the student's
warped outputs of earlier frames; noise for frame n is seeded by (seed, n) as in the session.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from alaya.codecs.autoencoder import Autoencoder
from alaya.codecs.gbuffer import check_gbuffer
from alaya.codecs.guided import GuidedDecoder, load_decoder
from alaya.codecs.tiny import TinyDecoder, TinyGBufferEncoder
from alaya.models.student import Student
from alaya.paths import default_weights
from alaya.runtime.backend_base import Backend
from alaya.runtime.backends import FullCodecBackend, make_backend
from alaya.runtime.int8 import with_ranges
from alaya.runtime.session import FRAME_KEYS, RenderSession
from alaya.text import PromptEncoder

CODECS = ("full", "tiny")


class StudentRenderer:
    def __init__(self, student: Student, codecs: str = "tiny", autoencoder: Autoencoder | None = None,
                 gbuffer_encoder: TinyGBufferEncoder | None = None, decoder: TinyDecoder | GuidedDecoder | None = None,
                 prompt_encoder: PromptEncoder | None = None, steps: int | None = None, guidance: float = 1.0,
                 backend: str | Backend = "onnx", noise: str | None = None, int8_ranges=None,
                 threads: int | None = None):
        """``backend``: a name of ``make_backend`` (the tiny codecs; the graphs of an onnxruntime
        backend are exported for each frame size met), or a backend object."""
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
        self.prompt_encoder = prompt_encoder or PromptEncoder()
        if codecs == "full":                   # the same streaming loop, with the full codecs
            backend = FullCodecBackend(student, autoencoder, guidance)
        elif isinstance(backend, str):
            backend = make_backend(backend, student, gbuffer_encoder, decoder, int8_ranges=int8_ranges,
                                   threads=threads)
        self.session = RenderSession(backend, prompt_encoder=self.prompt_encoder, steps=self.steps, noise=noise)

    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike = default_weights("student"), codecs: str = "tiny",
                        autoencoder: str | os.PathLike = default_weights("autoencoder"),
                        gbuffer_encoder: str | os.PathLike = default_weights("tiny_gbuffer_encoder"),
                        decoder: str | os.PathLike = default_weights("guided_decoder"), **kwargs) -> "StudentRenderer":
        student = Student.from_pretrained(folder)
        kwargs = with_ranges(kwargs, folder)                 # onnx-int8: the ranges beside the weights
        if codecs == "full":
            return cls(student, "full", autoencoder=Autoencoder.from_pretrained(autoencoder), **kwargs)
        return cls(student, codecs, gbuffer_encoder=TinyGBufferEncoder.from_pretrained(gbuffer_encoder),
                   decoder=load_decoder(decoder), **kwargs)

    def render(self, gbuffer: dict[str, np.ndarray], prompt: str, seed: int = 0) -> np.ndarray:
        """uint8 (T, H, W, 3) frames for a G-buffer clip (with ``motion``; with ``K`` and
        ``world_to_camera`` for a view student) and a prompt."""
        return self.session.run(self._start(gbuffer, prompt, seed))

    def latents(self, gbuffer: dict[str, np.ndarray], prompt: str, seed: int = 0) -> torch.Tensor:
        """The student's output latents (T, C, h, w) for a clip, streamed as ``render`` streams it."""
        return torch.cat([self.session.step_latent(f) for f in self._start(gbuffer, prompt, seed)])

    def _start(self, gbuffer: dict[str, np.ndarray], prompt: str, seed: int) -> list[dict[str, np.ndarray]]:
        """Check a clip, start a new stream with ``prompt`` and ``seed``; the clip's frames."""
        check_gbuffer(gbuffer)
        if "motion" not in gbuffer:
            raise KeyError("G-buffer is missing 'motion' (the student warps its past by it)")
        T = np.asarray(gbuffer["depth"]).shape[0]
        keys = [k for k in (*FRAME_KEYS, "world_to_camera") if k in gbuffer]
        camera = {"K": np.asarray(gbuffer["K"])} if "K" in gbuffer else {}    # a view student reads it
        self.session.seed = seed
        self.session.set_prompt(prompt)
        self.session.reset()
        return [{**{k: np.asarray(gbuffer[k])[i] for k in keys}, **camera} for i in range(T)]

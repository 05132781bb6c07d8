"""``SessionFactory``: many render sessions over one set of loaded weights.

Servers open a session per client; loading the student, the tiny codecs and the prompt encoder,
and exporting the ONNX graphs, happens once here. Sessions share the (stateless) backend and
the prompt encoder; each keeps its own stream state (context, decoder memory, prompt).
"""

from __future__ import annotations

import os

from alaya.codecs.tiny import TinyDecoder, TinyGBufferEncoder
from alaya.models.student import Student
from alaya.paths import default_weights
from alaya.runtime.backends import RENDER_BACKENDS, OnnxBackend, TorchBackend
from alaya.runtime.int8 import with_ranges
from alaya.runtime.session import RenderSession
from alaya.text import PromptEncoder


class SessionFactory:
    def __init__(self, student: Student, gbuffer_encoder: TinyGBufferEncoder, decoder: TinyDecoder,
                 size: int = 128, backend: str = "onnx", encoder: PromptEncoder | None = None,
                 threads: int | None = None, int8_ranges=None, solo_threads: int | None = None):
        """``threads``: each onnxruntime graph's threads (default torch's). ``solo_threads``: a
        second set of the same graphs with that many threads, for a frame that runs alone (a
        ``StreamPipeline`` with nothing else in flight: a client that waits for each frame), where
        a graph's second thread pays (one thread per graph is best when frames run side by side)."""
        if backend not in RENDER_BACKENDS:
            raise ValueError(f"backend must be one of {RENDER_BACKENDS}, got {backend!r}")
        if backend == "onnx-int8" and int8_ranges is None:
            raise ValueError("backend 'onnx-int8' needs int8_ranges (alaya.runtime.int8.load_ranges of the weights folder)")
        if size <= 0 or size % 16:
            raise ValueError(f"size must be a positive multiple of 16, got {size}")
        self.student, self.gbuffer_encoder, self.decoder = student.eval(), gbuffer_encoder.eval(), decoder.eval()
        self.size = size
        self.encoder = encoder or PromptEncoder()
        if backend in ("onnx", "onnx-int8"):
            ranges = int8_ranges if backend == "onnx-int8" else None
            self.backend = OnnxBackend.from_modules(self.student, self.gbuffer_encoder, self.decoder, size,
                                                    threads=threads, int8_ranges=ranges)
            self.solo_backend = (OnnxBackend.from_modules(self.student, self.gbuffer_encoder, self.decoder, size,
                                                          threads=solo_threads, int8_ranges=ranges)
                                 if solo_threads and solo_threads != threads else None)
        else:
            self.backend = TorchBackend(self.student, self.gbuffer_encoder, self.decoder, size=size)
            self.solo_backend = None

    @classmethod
    def from_pretrained(cls, weights: str | os.PathLike = default_weights("student"),
                        gbuffer_encoder: str | os.PathLike = default_weights("tiny_gbuffer_encoder"),
                        decoder: str | os.PathLike = default_weights("tiny_decoder"), **kwargs) -> "SessionFactory":
        kwargs = with_ranges(kwargs, weights)                # onnx-int8: the ranges beside the weights
        return cls(Student.from_pretrained(weights), TinyGBufferEncoder.from_pretrained(gbuffer_encoder),
                   TinyDecoder.from_pretrained(decoder), **kwargs)

    def new(self, prompt: str = "", seed: int = 0) -> RenderSession:
        """A fresh stream with its own state, sharing this factory's weights and backend."""
        return RenderSession(self.student, self.gbuffer_encoder, self.decoder, prompt=prompt, encoder=self.encoder,
                             seed=seed, backend=self.backend, solo_backend=self.solo_backend)

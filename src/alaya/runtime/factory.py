"""``SessionFactory``: many render sessions over one set of loaded weights.

Servers open a session per client; loading the student, the tiny codecs and the prompt encoder,
and exporting the ONNX graphs, happens once here. Sessions share the (stateless) backend and
the prompt encoder; each keeps its own stream state (context, decoder memory, prompt).
"""

from __future__ import annotations

import os

from alaya.codecs.guided import GuidedDecoder, load_decoder
from alaya.codecs.tiny import TinyDecoder, TinyGBufferEncoder
from alaya.models.student import Student
from alaya.paths import default_weights
from alaya.runtime.backends import make_backend
from alaya.runtime.int8 import with_ranges
from alaya.runtime.session import RenderSession
from alaya.text import PromptEncoder


class SessionFactory:
    def __init__(self, student: Student, gbuffer_encoder: TinyGBufferEncoder, decoder: TinyDecoder | GuidedDecoder,
                 size: int = 128, backend: str = "onnx", prompt_encoder: PromptEncoder | None = None,
                 threads: int | None = None, int8_ranges=None, solo_threads: int | None = None):
        """``backend``: a name of ``make_backend``, built once for ``size`` x ``size`` frames;
        ``threads``: each onnxruntime graph's threads (default torch's). ``solo_threads``: a
        second set of the same graphs with that many threads, for a frame that runs alone (a
        ``StreamPipeline`` with nothing else in flight: a client that waits for each frame), where
        a graph's second thread pays (one thread per graph is best when frames run side by side)."""
        self.student, self.gbuffer_encoder, self.decoder = student.eval(), gbuffer_encoder.eval(), decoder.eval()
        self.size = size
        self.prompt_encoder = prompt_encoder or PromptEncoder()
        modules = (self.student, self.gbuffer_encoder, self.decoder)
        self.backend = make_backend(backend, *modules, size, threads=threads, int8_ranges=int8_ranges)
        self.solo_backend = (make_backend(backend, *modules, size, threads=solo_threads, int8_ranges=int8_ranges)
                             if backend != "torch" and solo_threads and solo_threads != threads else None)

    @classmethod
    def from_pretrained(cls, weights: str | os.PathLike = default_weights("student"),
                        gbuffer_encoder: str | os.PathLike = default_weights("tiny_gbuffer_encoder"),
                        decoder: str | os.PathLike = default_weights("guided_decoder"), **kwargs) -> "SessionFactory":
        kwargs = with_ranges(kwargs, weights)                # onnx-int8: the ranges beside the weights
        return cls(Student.from_pretrained(weights), TinyGBufferEncoder.from_pretrained(gbuffer_encoder),
                   load_decoder(decoder), **kwargs)

    def new(self, prompt: str = "", seed: int = 0) -> RenderSession:
        """A fresh stream with its own state, sharing this factory's weights and backend."""
        return RenderSession(self.backend, prompt=prompt, prompt_encoder=self.prompt_encoder, seed=seed,
                             solo_backend=self.solo_backend)

"""The backends of a render or world session, built by name (``make_backend``): ``TorchBackend``
calls the modules in torch; ``OnnxBackend`` (``alaya.runtime.onnx_backend``) runs the graphs
exported for one frame size in onnxruntime, and ``OnnxBackends`` exports them for each frame
size a session meets; ``FullCodecBackend`` runs the distillation stages' full codecs (and
guidance) through the same session loop. The interface is ``alaya.runtime.backend_base.Backend``.
"""

from __future__ import annotations

import os

import torch

from alaya.codecs.autoencoder import Autoencoder
from alaya.codecs.gbuffer import teacher_gbuffer_latents
from alaya.codecs.guided import needs_guide
from alaya.codecs.tiny import TinyDecoder, TinyGBufferEncoder
from alaya.models.student import Student
from alaya.runtime.backend_base import Backend
from alaya.runtime.graphs import _DecodeNet, _FrameNet, _StepNet
from alaya.runtime.onnx_backend import OnnxBackend

BACKENDS = ("torch", "onnx")
RENDER_BACKENDS = (*BACKENDS, "onnx-int8")   # the student's steps (sample graph) quantized (``alaya.runtime.int8``)


class TorchBackend(Backend):
    """The modules in torch; ``channels_last`` and ``bf16`` (CPU autocast) are the usual CPU
    levers — bf16 pays off only on CPUs with native bf16 (AVX-512 BF16 / AMX); on AVX2 it is
    slower, so both are off by default (``docs/flash.md`` has the measurements). ``size``: the
    only frame size it accepts (None: any)."""
    name = "torch"

    def __init__(self, student: Student, gbuffer_encoder: TinyGBufferEncoder | None, decoder: TinyDecoder,
                 channels_last: bool = False, bf16: bool = False, size: int | None = None):
        super().__init__(student)
        self.nets = {"frame": _FrameNet(student, gbuffer_encoder).eval(), "step": _StepNet(student).eval(),
                     "decode": _DecodeNet(decoder).eval()}
        self.needs_guide = needs_guide(decoder)
        self.bf16, self.size = bf16, size
        if channels_last:
            for m in self.nets.values():
                m.to(memory_format=torch.channels_last)

    @torch.no_grad()
    def _run(self, name: str, *args: torch.Tensor):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            out = self.nets[name](*args)
        return tuple(None if o is None else o.float() for o in out) if isinstance(out, tuple) else out.float()

    def frame(self, x, context, valid, view=None):
        return self._run("frame", x, context, valid, view)

    def step(self, z, r, t, text, features):
        return self._run("step", z, r, t, text, features)

    def decode(self, z, previous, guide=None):
        return self._run("decode", z, previous, guide)


class FullCodecBackend(Backend):
    """The distillation stages' setup: G-buffer latents from the full codec, the full decoder
    (no memory: ``decode`` hands its state back unchanged), and optional classifier-free
    guidance for a student that has not had it distilled in (two calls per step)."""
    name = "full"

    def __init__(self, student: Student, autoencoder: Autoencoder, guidance: float = 1.0):
        super().__init__(student.eval())
        self.autoencoder, self.guidance = autoencoder.eval(), guidance

    @torch.no_grad()
    def frame(self, x, context, valid, view=None):
        g = teacher_gbuffer_latents(self.autoencoder, x)
        return g, self.student.condition(g, context, valid, view)

    @torch.no_grad()
    def step(self, z, r, t, text, features):
        u = self.student.velocity(z, r, t, text, features)
        if self.guidance == 1.0:
            return u
        u_null = self.student.velocity(z, r, t, torch.zeros_like(text), features)
        return u_null + self.guidance * (u - u_null)

    @torch.no_grad()
    def decode(self, z, previous, guide=None):
        return self.autoencoder.decode(z), previous


def make_backend(name: str, student: Student, gbuffer_encoder: TinyGBufferEncoder | None, decoder: TinyDecoder,
                 size: int | None = None, *, channels_last: bool = False, bf16: bool = False,
                 folder: str | os.PathLike | None = None, threads: int | None = None, int8_ranges=None,
                 factor: int = 8, steps: int | None = None) -> Backend:
    """The backend ``name`` (``RENDER_BACKENDS``) of ``student`` with its codecs (no
    ``gbuffer_encoder``: the frame network takes the conditioning latent itself, as the world
    model's anchor). ``"torch"``: ``TorchBackend`` (``channels_last``, ``bf16``); ``"onnx"``:
    onnxruntime (``OnnxBackend``: graphs exported for ``size``, into ``folder``, else the graph
    cache ``alaya.runtime.onnx_cache``; ``threads`` per graph, default torch's; ``steps``: the
    sample graph's, default the student's); ``"onnx-int8"``: the same with the sample graph
    quantized from ``int8_ranges`` (``alaya.runtime.int8.load_ranges``). ``size`` None: a torch
    backend runs any size, an onnxruntime one is ``OnnxBackends`` (exported per size met)."""
    if name not in RENDER_BACKENDS:
        raise ValueError(f"backend must be one of {RENDER_BACKENDS}, got {name!r}")
    if name == "onnx-int8" and int8_ranges is None:
        raise ValueError("backend 'onnx-int8' needs int8_ranges: the step graph's activation ranges "
                         "(alaya.runtime.int8.load_ranges of the weights folder; alaya calibrate-int8 makes them)")
    if size is not None and (size <= 0 or size % 16):
        raise ValueError(f"size must be a positive multiple of 16, got {size}")
    if name == "torch":
        return TorchBackend(student, gbuffer_encoder, decoder, channels_last, bf16, size)
    ranges = int8_ranges if name == "onnx-int8" else None
    if size is None:
        return OnnxBackends(name, student, gbuffer_encoder, decoder, folder=folder, threads=threads,
                            int8_ranges=ranges, channels_last=channels_last, bf16=bf16, factor=factor, steps=steps)
    return OnnxBackend.from_modules(student, gbuffer_encoder, decoder, size, folder, threads, factor, ranges, steps)


class OnnxBackends(Backend):
    """An onnxruntime backend (``"onnx"`` or ``"onnx-int8"``) for frames of any size: the graphs
    are exported at the first frame of each size (into ``folder/<size>`` if given) and those of
    the latest size kept; a frame that is not square runs in torch (the graphs are square)."""

    def __init__(self, name: str, student: Student, gbuffer_encoder: TinyGBufferEncoder | None,
                 decoder: TinyDecoder, folder: str | os.PathLike | None = None, threads: int | None = None,
                 int8_ranges=None, channels_last: bool = False, bf16: bool = False, factor: int = 8,
                 steps: int | None = None):
        super().__init__(student)
        self.name, self.int8_ranges, self.folder = name, int8_ranges, folder
        self.modules, self.options = (student, gbuffer_encoder, decoder), dict(threads=threads, factor=factor,
                                                                               steps=steps)
        self.torch = TorchBackend(student, gbuffer_encoder, decoder, channels_last, bf16)
        self.needs_guide = self.torch.needs_guide
        self.current: OnnxBackend | None = None

    def for_frame(self, H: int, W: int) -> Backend:
        if H != W:
            return self.torch
        if self.current is None or self.current.size != H:
            folder = None if self.folder is None else f"{self.folder}/{H}"
            self.current = make_backend(self.name, *self.modules, H, folder=folder, int8_ranges=self.int8_ranges,
                                        **self.options)
        return self.current

"""The per-frame networks of a render or world session, behind one interface, in torch or
onnxruntime.

A frame of the Flash renderer is three kinds of network call, which every ``Backend`` has:

- ``frame(x, context, valid, view) -> (g, features)``: the tiny G-buffer encoder on the raw
  G-buffer ``x`` (1, 9, H, W) and the student's per-frame input features (``Student.condition``;
  ``view`` (1, V, H, W), ``gbuffer.model_view_input``, only for a student with a view branch, else None);
- ``step(z, r, t, text, features) -> u``: one student step (``Student.velocity``), ``steps``
  times per frame;
- ``decode(z, previous, guide) -> (rgb, state)``: the streaming decoder, ``previous`` being its
  state from the frame before (None at the start of a stream); a guided decoder
  (``codecs.guided``, ``needs_guide``) also reads the frame's full-resolution ``guide``
  (``gbuffer.decoder_guide``), the others get None.

On them a backend builds what a session does with a frame: ``prepare`` (``gbuffer_condition``:
the engine's arrays — G-buffer, motion, camera — to the frame's own features and latent flow),
``attach_context`` (``context_condition``: the past warped into the frame and added), so that a
pipeline can prepare frame n + 1 while frame n is being sampled, and ``integrate`` (the frame's
steps). ``Backend`` runs them in torch around the network calls; an ``OnnxBackend`` of a renderer
runs each as one graph (``stream``, ``context``, ``sample``).

``make_backend`` builds a backend from its name. ``TorchBackend`` calls the modules;
``FullCodecBackend`` runs the distillation stages' full codecs (and guidance) through the same
session loop; ``OnnxBackend`` runs the graphs exported for one frame size
(``alaya.runtime.graphs.export_onnx``) with onnxruntime, whose small-convolution kernels are
several times faster than torch's on a CPU at batch 1 (``bench/flash_ablation.py`` measures
both), and ``OnnxBackends`` exports them for each frame size a session meets. The ONNX graphs
compute the same functions: outputs match torch to ~1e-5 (tested, tolerance 1e-3).
"""

from __future__ import annotations

import collections
import contextlib
import os
import tempfile
import threading
from pathlib import Path

import numpy as np
import torch

from alaya.codecs.autoencoder import Autoencoder
from alaya.codecs.gbuffer import teacher_gbuffer_latents
from alaya.codecs.guided import needs_guide
from alaya.codecs.tiny import TinyDecoder, TinyGBufferEncoder
from alaya.diffusion.meanflow import integrate_steps
from alaya.models.student import Student
from alaya.runtime.graphs import (NAMES, _DecodeNet, _FrameNet, _StepNet, context_condition, export_onnx,
                                  gbuffer_condition)

BACKENDS = ("torch", "onnx")
RENDER_BACKENDS = (*BACKENDS, "onnx-int8")   # the student's steps (sample graph) quantized (``alaya.runtime.int8``)
ONNX_TOLERANCE = 1e-3          # max abs difference to torch on latents and [0, 1] images (tested)


class Backend:
    """A session's networks for ``student`` (its ``frame``, ``step`` and ``decode``, in the
    module docstring) and the per-frame work built on them, here in torch; stateless (a stream's
    state lives in its session), so one backend serves many sessions. ``size``: the only frame
    size it runs (None: any)."""
    name = "base"
    size: int | None = None
    needs_guide = False             # whether ``decode`` reads the frame's guide

    def __init__(self, student: Student | None):
        self.student = student

    def frame(self, x, context, valid, view=None):
        raise NotImplementedError

    def step(self, z, r, t, text, features):
        raise NotImplementedError

    def decode(self, z, previous, guide=None):
        raise NotImplementedError

    def for_frame(self, H: int, W: int) -> "Backend":
        """The backend that runs frames of H x W: this one, if it runs them."""
        if self.size is not None and (H, W) != (self.size, self.size):
            raise ValueError(f"this session's backend was built for {self.size}x{self.size} frames, got {H}x{W}")
        return self

    def glue_threads(self):
        """A context for the torch operations a session runs between this backend's calls."""
        return contextlib.nullcontext()

    def prepare(self, inputs: dict[str, torch.Tensor], factor: int = 8):
        """``gbuffer_condition`` for one frame (``inputs``: its ``STREAM_INPUTS``): (features, flow,
        finite), around ``frame`` given an empty past (whose context part is zero: no bias)."""
        c = self.student.config
        H, W = inputs["depth"].shape[-2:]
        empty = (torch.zeros(1, c.context, c.latent_channels, H // factor, W // factor),
                 torch.zeros(1, c.context, 1, H // factor, W // factor))
        return gbuffer_condition(lambda x, view: self.frame(x, *empty, view)[1], c.view_channels, **inputs,
                                 factor=factor)

    @torch.no_grad()
    def attach_context(self, features: torch.Tensor, flow: torch.Tensor, context: torch.Tensor,
                       valid: torch.Tensor):
        """``context_condition``: (features, context, valid) with the past warped into the frame."""
        return context_condition(self.student.condition_context, features, flow, context, valid)

    def integrate(self, z: torch.Tensor, times: torch.Tensor, text: torch.Tensor, features: torch.Tensor):
        """A frame's latents from its starting noise ``z`` by the steps on ``times`` (1 -> 0), one
        ``step`` call per step (``meanflow.integrate_steps``, the update ``_SampleNet`` unrolls)."""
        return integrate_steps(lambda z_, r, t: self.step(z_, r.reshape(1), t.reshape(1), text, features),
                               z, times, self.student.config.average_velocity)


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


def _as_input(a: torch.Tensor) -> np.ndarray:
    """A tensor as an onnxruntime feed: contiguous float32."""
    return np.ascontiguousarray(a.detach().numpy(), dtype=np.float32)


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block with torch limited to ``n`` threads (restored after): the few small torch
    operations between onnxruntime graphs gain nothing from more, and their spinning OpenMP
    threads would compete with onnxruntime's. The count is the calling thread's (OpenMP's
    setting is per thread), so sessions on other server threads are not affected (tested)."""
    old = torch.get_num_threads()
    if old == n:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _session_options(threads: int, nhwc: bool = True):
    """onnxruntime options of the per-frame graphs: every graph optimisation, ``threads`` pool
    threads that spin within a run and stop at its end. A frame runs its graphs back to back:
    pool threads that kept spinning after a run would steal the cores from the next graph, and
    pool threads that never spin are woken for every operator. ``nhwc`` False turns off
    onnxruntime's NHWC rewrite of quantized convolutions, for the int8 steps: it wraps each in
    layout transposes, which between the group norms cost more than they save. docs/flash.md
    has the measurements of both."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1")
    opts.add_session_config_entry("session.force_spinning_stop", "1")
    if not nhwc:
        opts.add_session_config_entry("optimization.disable_specified_optimizers", "NhwcTransformer")
    return opts


class OnnxBackend(Backend):
    """onnxruntime sessions for the per-frame graphs; stateless (the stream's state lives in the
    ``RenderSession``), so one backend serves many sessions, from many threads. ``sample`` runs a
    frame's ``sample_steps`` steps in one graph (the session uses it when its step count is that)
    from the prompt's modulations, which the modulation graph computes once per prompt (kept for
    the ``MOD_CACHE`` most recent prompts); ``step`` one step. ``int8``: the quantized
    ``sample_int8.onnx`` (``alaya.runtime.int8``) instead of ``sample.onnx``."""
    MOD_CACHE = 32

    def __init__(self, folder: str | os.PathLike, threads: int | None = None, size: int | None = None,
                 int8: bool = False, student: Student | None = None):
        """``student``: the graphs' student, which the torch fallbacks read (the per-frame work
        of a folder without stream and context graphs, the steps of another step count)."""
        import onnxruntime as ort
        super().__init__(student)
        self.size = size
        self.name = "onnx-int8" if int8 else "onnx"
        threads = threads or torch.get_num_threads()
        self.sessions = {}
        for name in NAMES:
            quantized = int8 and name == "sample"
            path = Path(folder) / f"{name}{'_int8' if quantized else ''}.onnx"
            if name in ("stream", "context") and not path.exists():   # a world model's folder has neither
                continue
            if not path.exists():
                raise FileNotFoundError(f"{path} is missing; export it with alaya.runtime.graphs.export_onnx"
                                        + (" and alaya.runtime.int8.quantize_step" if int8 else ""))
            self.sessions[name] = ort.InferenceSession(str(path), _session_options(threads, nhwc=not quantized),
                                                       providers=["CPUExecutionProvider"])
        self.inputs = {n: [i.name for i in s.get_inputs()] for n, s in self.sessions.items()}
        self.has_stream = "stream" in self.sessions and "context" in self.sessions
        steps = self.sessions["sample"].get_modelmeta().custom_metadata_map.get("alaya.steps")
        if steps is None:
            raise ValueError(f"{Path(folder) / 'sample.onnx'}: no 'alaya.steps' in its metadata; re-export it")
        self.sample_steps = int(steps)
        self.state_channels = self.sessions["decode"].get_inputs()[1].shape[1]
        self.needs_guide = "guide" in self.inputs["decode"]
        if self.sessions["modulation"].get_outputs()[0].shape != self.sessions["sample"].get_inputs()[2].shape:
            raise ValueError(f"{folder}: the sample graph's modulation input does not match the modulation graph's "
                             "output; re-export both")
        self._mods: collections.OrderedDict[bytes, np.ndarray] = collections.OrderedDict()
        self._mods_lock = threading.Lock()
        self.solo_lock = threading.Lock()   # held by the one frame that runs alone on these graphs (``solo_threads``)

    @classmethod
    def from_modules(cls, student: Student, gbuffer_encoder: TinyGBufferEncoder | None, decoder: TinyDecoder, size: int,
                     folder: str | os.PathLike | None = None, threads: int | None = None,
                     factor: int = 8, int8_ranges=None, steps: int | None = None) -> "OnnxBackend":
        """Export the graphs for ``size`` and load them; with ``int8_ranges``
        (``alaya.runtime.int8.load_ranges``) the sample graph is quantized. ``steps``: the sample
        graph's step count (default the student's). Without ``folder`` the graphs come from the
        cache of exported graphs (``alaya.runtime.onnx_cache``: exported once per weights, size
        and code), or, with the cache off or not writable, from a temporary folder removed once
        they are loaded (onnxruntime keeps its own copy in memory)."""
        from alaya.runtime import onnx_cache

        def export(into: Path) -> Path:
            into = export_onnx(student, gbuffer_encoder, decoder, into, size, factor, steps)
            if int8_ranges is not None:
                from alaya.runtime.int8 import quantize_step
                quantize_step(into / "sample.onnx", into / "sample_int8.onnx", int8_ranges)
            return into

        int8 = int8_ranges is not None
        if folder is not None:
            return cls(export(Path(folder)), threads, size, int8=int8, student=student)
        root = onnx_cache.cache_root()
        if root is not None:
            key = onnx_cache.graphs_key((student, gbuffer_encoder, decoder), size=size, factor=factor,
                                        steps=steps or student.config.steps,
                                        int8=onnx_cache.ranges_setting(int8_ranges))
            try:
                return cls(onnx_cache.cached_graphs(root, key, export), threads, size, int8=int8, student=student)
            except FileNotFoundError:        # the entry was pruned by another process as it was found
                return cls(onnx_cache.cached_graphs(root, key, export), threads, size, int8=int8, student=student)
        with tempfile.TemporaryDirectory(prefix="alaya-onnx-") as tmp:
            return cls(export(Path(tmp)), threads, size, int8=int8, student=student)

    def _run(self, name: str, *args: torch.Tensor) -> list[torch.Tensor]:
        ins, _ = NAMES[name]
        feed = {k: _as_input(a) for k, a in zip(ins, args) if a is not None and k in self.inputs[name]}
        return [torch.from_numpy(o) for o in self.sessions[name].run(None, feed)]

    def frame(self, x, context, valid, view=None):
        return tuple(self._run("frame", x, context, valid, view))

    def step(self, z, r, t, text, features):
        return self._run("step", z, r, t, text, features)[0]

    def glue_threads(self):
        """With onnxruntime, torch only glues the graphs: one thread (``torch_threads``)."""
        return torch_threads(1)

    def prepare(self, inputs: dict[str, torch.Tensor], factor: int = 8):
        """By the stream graph, if the folder has one (a renderer's); else in torch (``Backend``)."""
        return self.stream(inputs) if self.has_stream else super().prepare(inputs, factor)

    def attach_context(self, features, flow, context, valid):
        """By the context graph, if the folder has one (a renderer's); else in torch (``Backend``)."""
        if self.has_stream:
            return self.context(features, flow, context, valid)
        return super().attach_context(features, flow, context, valid)

    def integrate(self, z, times, text, features):
        """By the unrolled sample graph when it was built for that many steps; else step by step."""
        if self.sample_steps == len(times) - 1:
            return self.sample(z, text, features)
        return super().integrate(z, times, text, features)

    def stream(self, inputs: dict[str, torch.Tensor]):
        """``gbuffer_condition`` in one run of the stream graph: (features, flow, finite)."""
        feed = {k: _as_input(v) for k, v in inputs.items() if k in self.inputs["stream"]}
        features, flow, finite = self.sessions["stream"].run(None, feed)
        return torch.from_numpy(features), torch.from_numpy(flow), bool(finite)

    def context(self, features, flow, context, valid):
        """``context_condition`` in one run of the context graph: (features, context, valid)."""
        return tuple(self._run("context", features, flow, context, valid))

    def modulations(self, text: torch.Tensor) -> np.ndarray:
        """The sample graph's modulation input (1, M, 1, 1) for prompt embedding ``text`` (1, D), cached."""
        text = _as_input(text)
        key = text.tobytes()
        with self._mods_lock:
            if key in self._mods:
                self._mods.move_to_end(key)
                return self._mods[key]
        mods = self.sessions["modulation"].run(None, {"text": text})[0]
        with self._mods_lock:
            self._mods[key] = mods
            while len(self._mods) > self.MOD_CACHE:
                self._mods.popitem(last=False)
        return mods

    def sample_feed(self, z, text, features) -> dict[str, np.ndarray]:
        """The sample graph's inputs for one frame (what int8 calibration records)."""
        return {"z": _as_input(z), "features": _as_input(features), "mods": self.modulations(text)}

    def sample(self, z, text, features):
        """``sample_steps`` steps from the frame's starting noise ``z``: its latents."""
        return torch.from_numpy(self.sessions["sample"].run(None, self.sample_feed(z, text, features))[0])

    def decode(self, z, previous, guide=None):
        if previous is None:                       # the start of a stream: an empty memory
            previous = torch.zeros(1, self.state_channels, *z.shape[-2:])
        if self.needs_guide and guide is None:
            raise ValueError("this backend's decoder reads a guide (gbuffer.decoder_guide); got None")
        return tuple(self._run("decode", z, previous, guide))

"""The per-frame networks of a render session, behind one interface, in torch or onnxruntime.

A frame of the Flash renderer is three kinds of network call:

- ``frame(x, context, valid, view) -> (g, features)``: the tiny G-buffer encoder on the raw
  G-buffer ``x`` (1, 9, H, W) and the student's per-frame input features (``Student.condition``;
  ``view`` (1, V, H, W), ``gbuffer.model_view_input``, only for a student with a view branch, else None);
- ``step(z, r, t, text, features) -> u``: one student step (``Student.velocity``), ``steps``
  times per frame;
- ``decode(z, previous) -> (rgb, state)``: the tiny streaming decoder, ``previous`` being its
  state from the frame before (None at the start of a stream).

A render session reaches ``frame`` in two parts: ``prepare_frame`` (``gbuffer_condition``:
the engine's arrays — G-buffer, motion, camera — to the frame's own features and latent flow)
and ``attach_context`` (``context_condition``: the past warped into the frame and added), so
that a pipeline can prepare frame n + 1 while frame n is being sampled. An ``OnnxBackend`` of a
renderer runs each part as one graph (``stream``, ``context``), the others in torch around
their ``frame``.

``TorchBackend`` calls the modules; ``FullCodecBackend`` runs the distillation stages' full
codecs (and guidance) through the same session loop; ``OnnxBackend`` exports the graphs once per frame size
(``alaya.runtime.graphs.export_onnx``) and runs them with onnxruntime, whose small-convolution kernels are several
times faster than torch's on a CPU at batch 1 (``bench/flash_ablation.py`` measures both). The
ONNX graphs compute the same functions: outputs match torch to ~1e-5 (tested, tolerance 1e-3).
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
from alaya.codecs.tiny import TinyDecoder, TinyGBufferEncoder
from alaya.diffusion.meanflow import integrate_steps
from alaya.models.student import Student
from alaya.runtime.graphs import (NAMES, _DecodeNet, _FrameNet, _StepNet, context_condition, export_onnx,
                                  gbuffer_condition)

BACKENDS = ("torch", "onnx")
RENDER_BACKENDS = (*BACKENDS, "onnx-int8")   # the student's steps (sample graph) quantized (``alaya.runtime.int8``)
ONNX_TOLERANCE = 1e-3          # max abs difference to torch on latents and [0, 1] images (tested)


class TorchBackend:
    """The modules in torch; ``channels_last`` and ``bf16`` (CPU autocast) are the usual CPU
    levers — bf16 pays off only on CPUs with native bf16 (AVX-512 BF16 / AMX); on AVX2 it is
    slower, so both are off by default (``docs/flash.md`` has the measurements). ``size``: the
    only frame size it accepts (None: any)."""
    name = "torch"

    def __init__(self, student: Student, encoder: TinyGBufferEncoder | None, decoder: TinyDecoder,
                 channels_last: bool = False, bf16: bool = False, size: int | None = None):
        self.nets = {"frame": _FrameNet(student, encoder).eval(), "step": _StepNet(student).eval(),
                     "decode": _DecodeNet(decoder).eval()}
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

    def decode(self, z, previous):
        return self._run("decode", z, previous)


class FullCodecBackend:
    """The distillation stages' setup: G-buffer latents from the full codec, the full decoder
    (no memory: ``decode`` hands its state back unchanged), and optional classifier-free
    guidance for a student that has not had it distilled in (two calls per step)."""
    name = "full"
    size = None

    def __init__(self, student: Student, autoencoder: Autoencoder, guidance: float = 1.0):
        self.student, self.autoencoder, self.guidance = student.eval(), autoencoder.eval(), guidance

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
    def decode(self, z, previous):
        return self.autoencoder.decode(z), previous


def prepare_frame(backend, student: Student, inputs: dict[str, torch.Tensor], factor: int = 8):
    """``gbuffer_condition`` for one frame (``inputs``: its ``STREAM_INPUTS``): (features, flow,
    finite), by the backend's stream graph where it has one (``OnnxBackend`` of a renderer), else
    in torch around the backend's ``frame`` given an empty past (whose context part is zero: no bias)."""
    if getattr(backend, "has_stream", False):
        return backend.stream(inputs)
    c = student.config
    H, W = inputs["depth"].shape[-2:]
    empty = (torch.zeros(1, c.context, c.latent_channels, H // factor, W // factor),
             torch.zeros(1, c.context, 1, H // factor, W // factor))
    return gbuffer_condition(lambda x, view: backend.frame(x, *empty, view)[1], c.view_channels, **inputs,
                             factor=factor)


def attach_context(backend, student: Student, features: torch.Tensor, flow: torch.Tensor, context: torch.Tensor,
                   valid: torch.Tensor):
    """``context_condition``: (features, context, valid) with the past warped into the frame, by
    the backend's context graph where it has one, else in torch."""
    if getattr(backend, "has_stream", False):
        return backend.context(features, flow, context, valid)
    with torch.no_grad():
        return context_condition(student.condition_context, features, flow, context, valid)


def integrate(backend, z: torch.Tensor, times: torch.Tensor, text: torch.Tensor, features: torch.Tensor,
              average: bool) -> torch.Tensor:
    """A frame's latents from its starting noise ``z`` by the steps on ``times`` (1 -> 0): the
    backend's unrolled sample graph when it was built for that many steps, else one ``step`` call
    per step (``meanflow.integrate_steps``, the update ``_SampleNet`` unrolls)."""
    if getattr(backend, "sample_steps", None) == len(times) - 1:
        return backend.sample(z, text, features)
    return integrate_steps(lambda z_, r, t: backend.step(z_, r.reshape(1), t.reshape(1), text, features),
                           z, times, average)


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
    pool threads that kept spinning after a run would steal the cores from the next graph
    (measured: 3x slower frames), and pool threads that never spin are woken for every operator.
    Measured on one 2-core machine, frames interleaved (docs/flash.md): 48 ms a frame against 57
    without spinning (int8 steps: 38 against 46). ``nhwc`` False turns off onnxruntime's NHWC
    rewrite of quantized convolutions, for the int8 steps: it wraps each in layout transposes,
    which between the group norms cost more than they save (measured: 14.5 -> 13.6 ms for the
    four steps, alternating in one process)."""
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


class OnnxBackend:
    """onnxruntime sessions for the per-frame graphs; stateless (the stream's state lives in the
    ``RenderSession``), so one backend serves many sessions, from many threads. ``sample`` runs a
    frame's ``sample_steps`` steps in one graph (the session uses it when its step count is that)
    from the prompt's modulations, which the modulation graph computes once per prompt (kept for
    the ``MOD_CACHE`` most recent prompts); ``step`` one step. ``int8``: the quantized
    ``sample_int8.onnx`` (``alaya.runtime.int8``) instead of ``sample.onnx``."""
    MOD_CACHE = 32

    def __init__(self, folder: str | os.PathLike, threads: int | None = None, size: int | None = None,
                 int8: bool = False):
        import onnxruntime as ort
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
        if self.sessions["modulation"].get_outputs()[0].shape != self.sessions["sample"].get_inputs()[2].shape:
            raise ValueError(f"{folder}: the sample graph's modulation input does not match the modulation graph's "
                             "output; re-export both")
        self._mods: collections.OrderedDict[bytes, np.ndarray] = collections.OrderedDict()
        self._mods_lock = threading.Lock()
        self.solo_lock = threading.Lock()   # held by the one frame that runs alone on these graphs (``solo_threads``)

    @classmethod
    def from_modules(cls, student: Student, encoder: TinyGBufferEncoder | None, decoder: TinyDecoder, size: int,
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
            into = export_onnx(student, encoder, decoder, into, size, factor, steps)
            if int8_ranges is not None:
                from alaya.runtime.int8 import quantize_step
                quantize_step(into / "sample.onnx", into / "sample_int8.onnx", int8_ranges)
            return into

        int8 = int8_ranges is not None
        if folder is not None:
            return cls(export(Path(folder)), threads, size, int8=int8)
        root = onnx_cache.cache_root()
        if root is not None:
            key = onnx_cache.graphs_key((student, encoder, decoder), size=size, factor=factor,
                                        steps=steps or student.config.steps,
                                        int8=onnx_cache.ranges_setting(int8_ranges))
            try:
                return cls(onnx_cache.cached_graphs(root, key, export), threads, size, int8=int8)
            except FileNotFoundError:        # the entry was pruned by another process as it was found
                return cls(onnx_cache.cached_graphs(root, key, export), threads, size, int8=int8)
        with tempfile.TemporaryDirectory(prefix="alaya-onnx-") as tmp:
            return cls(export(Path(tmp)), threads, size, int8=int8)

    def _run(self, name: str, *args: torch.Tensor) -> list[torch.Tensor]:
        ins, _ = NAMES[name]
        feed = {k: _as_input(a) for k, a in zip(ins, args) if a is not None and k in self.inputs[name]}
        return [torch.from_numpy(o) for o in self.sessions[name].run(None, feed)]

    def frame(self, x, context, valid, view=None):
        return tuple(self._run("frame", x, context, valid, view))

    def step(self, z, r, t, text, features):
        return self._run("step", z, r, t, text, features)[0]

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

    def decode(self, z, previous):
        if previous is None:                       # the start of a stream: an empty memory
            previous = torch.zeros(1, self.state_channels, *z.shape[-2:])
        return tuple(self._run("decode", z, previous))

"""``OnnxBackend``: the per-frame graphs exported for one frame size
(``alaya.runtime.graphs.export_onnx``), run in onnxruntime, whose small-convolution kernels are
several times faster than torch's on a CPU at batch 1. The graphs compute the same functions as
the torch modules, to within ``ONNX_TOLERANCE`` (tested).
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

from alaya.codecs.tiny import TinyDecoder, TinyGBufferEncoder
from alaya.models.student import Student
from alaya.runtime.backend_base import Backend
from alaya.runtime.graphs import NAMES, export_onnx

ONNX_TOLERANCE = 1e-3          # max abs difference to torch on latents and [0, 1] images (tested)


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

"""The per-frame networks of a render or world session as exportable graphs, and their ONNX export.

``stream`` (a renderer: the engine's arrays to the frame's own features, ``gbuffer_condition``),
``context`` (the past warped into the frame and added to them, ``context_condition``), ``frame`` (the features from the G-buffer input), ``step`` (one student step), ``modulation``
(a prompt's adaptive-norm gains and shifts for the unrolled steps), ``sample`` (a frame's steps
unrolled) and ``decode`` (the tiny streaming decoder): ``export_onnx`` writes them for one frame
size; ``OnnxBackend`` (``alaya.runtime.onnx_backend``) runs them, ``TorchBackend``
(``alaya.runtime.backends``) calls the same modules in torch.
"""

from __future__ import annotations

import copy
import os
import warnings
from pathlib import Path

import torch
from torch import nn

from alaya.codecs.gbuffer import GBUFFER_INPUT_CHANNELS, GUIDE_CHANNELS, PIXEL_VIEW_CHANNELS, camera_view, gbuffer_channels
from alaya.codecs.guided import GuidedDecoder, needs_guide
from alaya.codecs.tiny import TinyDecoder, TinyGBufferEncoder
from alaya.diffusion.flow import time_grid
from alaya.diffusion.meanflow import meanflow_step, step_times
from alaya.models.student import Student, latent_flow, warp_context
from alaya.nn.unet import strided_view_branch


class _FrameNet(nn.Module):
    """``gbuffer_encoder`` None: ``x`` already is the conditioning latent (the world model's anchor)."""

    def __init__(self, student: Student, gbuffer_encoder: TinyGBufferEncoder | None):
        super().__init__()
        self.student = student
        self.gbuffer_encoder = gbuffer_encoder if gbuffer_encoder is not None else nn.Identity()

    def forward(self, x, context, valid, view=None):
        g = self.gbuffer_encoder(x)
        return g, self.student.condition(g, context, valid, view)


STREAM_INPUTS = ("albedo", "normal", "depth", "roughness", "metallic", "motion", "rotation", "rays", "xy")


class _GBufferNet(nn.Module):
    """The frame's own features (``Student.condition_gbuffer``) from the raw G-buffer ``x``
    through the tiny G-buffer encoder."""

    def __init__(self, student: Student, gbuffer_encoder: TinyGBufferEncoder):
        super().__init__()
        self.student, self.gbuffer_encoder = student, gbuffer_encoder

    def forward(self, x, view=None):
        return self.student.condition_gbuffer(self.gbuffer_encoder(x), view)


def gbuffer_condition(gbuffer_features, view_channels: int, albedo, normal, depth, roughness, metallic, motion,
                      rotation, rays, xy, factor: int = 8):
    """The part of a render session's per-frame work that needs no past (batch 1, from the
    engine's arrays; ``gbuffer_channels``, and ``camera_view``'s camera inputs from
    ``gbuffer.camera_inputs``): the raw G-buffer, the view input (a student with
    ``view_channels``) and ``gbuffer_features(x, view)`` (``Student.condition_gbuffer`` after the
    G-buffer encoder), plus the frame's latent flow (``latent_flow``, ``factor`` pixels a latent).
    Returns (features, flow, finite): ``finite`` (a bool tensor) is False when the G-buffer, the
    motion or the view input holds a NaN or an infinity (or they sum past float32's range), for
    the caller to name before it keeps anything. The ONNX stream graph traces exactly this function."""
    x = gbuffer_channels(albedo, normal, depth, roughness, metallic)
    view = None
    if view_channels:
        view = camera_view(normal, rotation, rays, xy)
        if view_channels == PIXEL_VIEW_CHANNELS:
            view = torch.cat([view, x], 1)
    flow = latent_flow(motion, factor)
    # one scalar: a NaN or an infinity anywhere makes the sum non-finite (so can an overflow of
    # huge finite values, which the caller tells apart); cheaper than element-wise tests.
    checked = (x, depth, motion) if view is None else (x, depth, motion, view)
    finite = torch.isfinite(sum(a.sum() for a in checked))
    if not torch.jit.is_tracing() and not finite and not all(torch.isfinite(a).all() for a in checked):
        return None, flow, finite   # in torch, stop before the networks' own (vaguer) checks
    return gbuffer_features(x, view), flow, finite


def context_condition(condition_context, features, flow, context, valid):
    """The rest of the frame's per-frame work, which reads the past: the context (B, K, C, h, w)
    and its validity warped into this frame by its latent ``flow``, and the frame's features
    (``gbuffer_condition``'s) plus ``condition_context`` of the warped context
    (``Student.condition_context``). Returns (features, context, valid). The ONNX context graph
    traces exactly this function."""
    context, valid = warp_context(context, valid, flow)
    return features + condition_context(context, valid), context, valid


class _StreamNet(nn.Module):
    """``gbuffer_condition`` as one graph: the G-buffer conversion, the camera, the latent flow,
    the checks and the G-buffer encoder and input layer in one onnxruntime run instead of torch
    operations between graphs (docs/flash.md, "One stream graph per frame")."""

    def __init__(self, student: Student, gbuffer_encoder: TinyGBufferEncoder, factor: int = 8):
        super().__init__()
        self.net = _GBufferNet(student, gbuffer_encoder)
        self.view_channels, self.factor = student.config.view_channels, factor

    def forward(self, albedo, normal, depth, roughness, metallic, motion, rotation, rays, xy):
        return gbuffer_condition(self.net, self.view_channels, albedo, normal, depth, roughness, metallic, motion,
                                 rotation, rays, xy, self.factor)


class _ContextNet(nn.Module):
    """``context_condition`` as one graph: the context warp and the input layer's context columns."""

    def __init__(self, student: Student):
        super().__init__()
        self.student = student

    def forward(self, features, flow, context, valid):
        return context_condition(self.student.condition_context, features, flow, context, valid)


class _StepNet(nn.Module):
    def __init__(self, student: Student):
        super().__init__()
        self.student = student

    def forward(self, z, r, t, text, features):
        return self.student.velocity(z, r, t, text, features)


def _sample_times(student: Student, steps: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(r', t, r) of each step on the session's grid (``flow.time_grid``, ``meanflow.step_times``),
    the model's times r', t shaped (1,)."""
    return [(r_model.reshape(1), t.reshape(1), r)
            for r_model, t, r in step_times(time_grid(steps), student.config.average_velocity)]


class _ModulationNet(nn.Module):
    """A prompt's modulations for every step of ``_SampleNet``: for each step, each adaptive
    norm's gain and shift (``Student.modulations``), concatenated in that order along channels
    into one (1, M, 1, 1) tensor. They depend on the prompt alone, so the backend runs this graph
    once per prompt, not once per frame."""

    def __init__(self, student: Student, steps: int):
        super().__init__()
        self.student, self.steps = student, steps

    def forward(self, text):
        return torch.cat([x for r, t, _ in _sample_times(self.student, self.steps)
                          for pair in self.student.modulations(r, t, text).values() for x in pair], 1)


class _SampleNet(nn.Module):
    """A frame's ``steps`` student steps as one graph, unrolled on the session's time grid
    (``_sample_times``), reading the prompt's modulations (``_ModulationNet``'s output, split by
    one operator) instead of the prompt: one onnxruntime run a frame instead of ``steps``, with
    no per-step projections of the time and prompt (docs/flash.md has what it saves)."""

    def __init__(self, student: Student, steps: int):
        super().__init__()
        self.student, self.steps = student, steps

    def forward(self, z, features, mods):
        norms = self.student.adaptive_norms()
        sizes = [n.norm.num_channels for n in norms for _ in range(2)] * self.steps
        if mods.shape[1] != sum(sizes):
            raise ValueError(f"mods: expected {sum(sizes)} channels, got {mods.shape[1]}")
        parts = torch.split(mods, sizes, dim=1)
        for k, (r, t, r_next) in enumerate(_sample_times(self.student, self.steps)):
            own = parts[2 * len(norms) * k:2 * len(norms) * (k + 1)]
            step_mods = {n: (own[2 * i], own[2 * i + 1]) for i, n in enumerate(norms)}
            z = meanflow_step(z, self.student.velocity(z, r, t, None, features, mods=step_mods), t, r_next)
        return z


class _DecodeNet(nn.Module):
    """The streaming decoder; a guided one also reads the frame's full-resolution ``guide``."""
    def __init__(self, decoder: TinyDecoder | GuidedDecoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, z, previous, guide=None):
        return self.decoder(z, previous) if guide is None else self.decoder(z, previous, guide)


def example_inputs(student: Student, gbuffer_encoder: TinyGBufferEncoder | None, decoder: TinyDecoder, size: int,
                   factor: int = 8):
    """Zero tensors with the shapes of one frame at ``size`` x ``size`` (batch 1), with latents
    ``factor`` times smaller. Without a G-buffer encoder the frame graph takes the conditioning
    latent (1, G, size/factor, size/factor)."""
    c = student.config
    h = size // factor
    x = (torch.zeros(1, GBUFFER_INPUT_CHANNELS, size, size) if gbuffer_encoder is not None
         else torch.zeros(1, c.gbuffer_channels, h, h))
    view = (torch.zeros(1, c.view_channels, size, size),) if c.view_channels else ()
    context = (torch.zeros(1, c.context, c.latent_channels, h, h), torch.zeros(1, c.context, 1, h, h))
    stream = (torch.zeros(1, size, size, 3), torch.zeros(1, size, size, 3), torch.zeros(1, size, size),
              torch.zeros(1, size, size), torch.zeros(1, size, size), torch.zeros(1, size, size, 2),
              torch.zeros(1, 3, 3), torch.zeros(size * size, 3), torch.zeros(2, size, size))
    return {"frame": (x, *context, *view),
            "stream": stream,
            "context": (torch.zeros(1, c.widths[0], h, h), torch.zeros(1, 2, h, h), *context),
            "step": (torch.zeros(1, c.latent_channels, h, h), torch.full((1,), 0.5), torch.full((1,), 0.75),
                     torch.zeros(1, c.text_dim), torch.zeros(1, c.widths[0], h, h)),
            "modulation": (torch.zeros(1, c.text_dim),),
            "sample": (torch.zeros(1, c.latent_channels, h, h), torch.zeros(1, c.widths[0], h, h),
                       _ModulationNet(student, c.steps)(torch.zeros(1, c.text_dim))),
            "decode": (torch.zeros(1, c.latent_channels, h, h), torch.zeros(1, state_channels(decoder), h, h),
                       # the whole guide the session builds (``decoder_guide``); a decoder trained on fewer channels
                       # reads its prefix inside the graph
                       *((torch.zeros(1, max(GUIDE_CHANNELS, decoder.config.guide_channels), size, size),)
                         if needs_guide(decoder) else ()))}


def state_channels(decoder) -> int:
    """Channels of a streaming decoder's memory (a memoryless one declares ``state_channels``)."""
    return getattr(decoder, "state_channels", None) or decoder.config.channels[0]


NAMES = {"frame": (["x", "context", "valid", "view"], ["g", "features"]),     # "view": view students only
         # the engine's arrays to the frame's features (renderers: a G-buffer encoder); camera inputs: view students
         "stream": (list(STREAM_INPUTS), ["features", "flow", "finite"]),
         # the past, warped into the frame, added to the stream graph's features (renderers)
         "context": (["features", "flow", "context", "valid"], ["features_out", "context_out", "valid_out"]),
         "step": (["z", "r", "t", "text", "features"], ["u"]),
         "modulation": (["text"], ["mods"]),          # a prompt's modulations, once per prompt
         "sample": (["z", "features", "mods"], ["latents"]),  # the steps of one frame, unrolled
         "decode": (["z", "previous", "guide"], ["rgb", "state"])}   # "guide": guided decoders only


def _for_export(student: Student) -> Student:
    """``student`` itself, or for a view student a copy whose view branch reads its 8x8 blocks
    by a strided convolution (``strided_view_branch``: the same function, no 6-D transpose)."""
    if student.view is None:
        return student
    clone = copy.deepcopy(student)
    clone.view = strided_view_branch(clone.view)
    return clone.eval()


def export_onnx(student: Student, gbuffer_encoder: TinyGBufferEncoder | None, decoder: TinyDecoder,
                folder: str | os.PathLike,
                size: int = 128, factor: int = 8, steps: int | None = None) -> Path:
    """Write ``frame.onnx``, ``step.onnx``, ``sample.onnx`` (``steps`` steps unrolled, default the
    student's ``config.steps``, their count in the model's metadata ``alaya.steps``), the prompt's
    ``modulation.onnx`` for them, ``decode.onnx`` and, with a ``gbuffer_encoder``, ``stream.onnx``
    and ``context.onnx`` (``gbuffer_condition``, ``context_condition``: the engine's arrays to the
    frame's features) for frames of ``size`` x
    ``size`` (latents ``factor`` times smaller) into ``folder`` (each written to a temporary name,
    then renamed)."""
    if size % 16:
        raise ValueError(f"frame size must be a multiple of 16, got {size}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    steps = steps or student.config.steps
    nets = {"frame": _FrameNet(_for_export(student), gbuffer_encoder), "step": _StepNet(student),
            "modulation": _ModulationNet(student, steps), "sample": _SampleNet(student, steps),
            "decode": _DecodeNet(decoder)}
    if gbuffer_encoder is not None:
        nets["stream"] = _StreamNet(_for_export(student), gbuffer_encoder, factor)
        nets["context"] = _ContextNet(student)
    inputs = example_inputs(student, gbuffer_encoder, decoder, size, factor)
    for name, net in nets.items():
        tmp = folder / f".{name}.{os.getpid()}.onnx"
        ins, outs = NAMES[name]
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")   # legacy-exporter and tracer notes on shape checks (fixed sizes here)
            torch.onnx.export(net.eval(), inputs[name], str(tmp), input_names=ins[:len(inputs[name])], output_names=outs,
                              opset_version=17, dynamo=False)
        if name in ("modulation", "sample"):
            import onnx
            graph = onnx.load(str(tmp))
            onnx.helper.set_model_props(graph, {"alaya.steps": str(net.steps)})
            onnx.save(graph, str(tmp))
        os.replace(tmp, folder / f"{name}.onnx")
    return folder

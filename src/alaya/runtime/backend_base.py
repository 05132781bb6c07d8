"""The interface of a session's per-frame networks, and the per-frame work built on it.

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
steps). ``Backend`` runs them in torch around the network calls; ``OnnxBackend``
(``alaya.runtime.onnx_backend``) runs each as one graph where it has it. The backends
themselves are built by ``alaya.runtime.backends.make_backend``.
"""

from __future__ import annotations

import contextlib

import torch

from alaya.diffusion.meanflow import integrate_steps
from alaya.models.student import Student
from alaya.runtime.graphs import context_condition, gbuffer_condition


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

"""``RenderSession``: the Flash student as an endless stream, one G-buffer frame in, one RGB
frame out.

Per frame: the tiny G-buffer encoder turns the raw G-buffer into latents; the context (the
student's last ``context`` output latents) is warped into the new frame by its motion vectors;
the student's per-frame input features are computed once; the student integrates the frame's
latents from noise in ``steps`` steps (MeanFlow steps ``z_r = z_t - (t - r) u`` once it
predicts average velocities, Euler steps before); the tiny streaming decoder (with its own
one-frame memory) turns them into RGB. The networks run on a backend object, in torch or
onnxruntime (``alaya.runtime.backends.make_backend``). Everything held across frames has a fixed
size, so memory stays flat over an unbounded stream.

Noise (``noise``, default the student's ``config.noise``) for frame n is drawn from a generator
seeded by (seed, n) (``"frame"``), or every frame starts from the same noise, seeded by seed alone
(``"fixed"``: still a Gaussian sample for each frame, but successive frames no longer differ by
fresh noise, which is what flickers); either way the output does not depend on how a caller
chunks the stream. ``set_prompt`` swaps the prompt embedding between two frames: the next frame
is generated with it, nothing is restarted or dropped.

A student with a view branch also reads the camera: each frame's ``world_to_camera`` (4, 4) and
the intrinsics ``K`` (3, 3), from the frame or, for K, the session (``intrinsics``); the engine's
frames carry both. A frame without them renders with the camera unknown (zero camera channels
in the view input, as the student saw in training for a share of its samples); a student whose
view input also carries the raw G-buffer (``gbuffer.PIXEL_VIEW_CHANNELS``) still reads that.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import torch

from alaya.codecs.gbuffer import MODALITIES, as_tensor, camera_inputs, camera_view, check_gbuffer, decoder_guide
from alaya.diffusion.flow import time_grid
from alaya.models.student import push_context
from alaya.runtime.backend_base import Backend
from alaya.text import PromptEncoder

FRAME_KEYS = ("depth", "normal", "albedo", "roughness", "metallic", "motion")
NOISE_MODES = ("frame", "fixed")


@dataclass
class PreparedFrame:
    """A frame checked and converted (``RenderSession.prepare``), ready to be sampled: what it
    needs from the past is added only then."""
    backend: Backend                # the one that runs the frame's size (``Backend.for_frame``)
    features: torch.Tensor          # (1, widths[0], h, w): the frame's own features (``condition_gbuffer``)
    flow: torch.Tensor              # (1, 2, h, w): its latent flow, to warp the context by
    text: torch.Tensor              # (1, D): the prompt at the time it was prepared
    guide: torch.Tensor | None = None   # (1, G, H, W): ``gbuffer.decoder_guide``, for a guided decoder


class RenderSession:
    def __init__(self, backend: Backend, prompt: str = "", prompt_encoder: PromptEncoder | None = None,
                 steps: int | None = None, seed: int = 0, noise: str | None = None,
                 intrinsics: np.ndarray | None = None, solo_backend: Backend | None = None):
        """``backend``: the student's networks (``alaya.runtime.backends.make_backend``), this
        session's own or one shared with other sessions (``SessionFactory``). ``solo_backend``:
        with a shared ``backend``, the same graphs with more threads, for frames prepared with
        ``solo`` (``SessionFactory``'s ``solo_threads``)."""
        student = backend.student
        steps = student.config.steps if steps is None else steps
        noise = student.config.noise if noise is None else noise
        if noise not in NOISE_MODES:
            raise ValueError(f"noise must be one of {NOISE_MODES}, got {noise!r}")
        self.noise = noise
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        self.student = student.eval()
        self.backend, self.solo_backend = backend, solo_backend
        self.pipeline = None                            # the StreamPipeline driving this session, if any
        self.prompt_encoder = prompt_encoder or PromptEncoder()
        self.steps, self.seed = steps, seed
        self.intrinsics = None if intrinsics is None else np.asarray(intrinsics, np.float32)
        self.times = time_grid(steps)
        self.prompt = ""
        self.text = torch.zeros(1, student.config.text_dim)
        self.set_prompt(prompt)
        self.reset()

    def set_prompt(self, prompt: str) -> None:
        """Use ``prompt`` from the next frame on (the empty prompt means unconditional)."""
        self.text = self.prompt_encoder.encode(prompt).reshape(1, -1)
        self.prompt = prompt

    def set_pipeline(self, pipeline) -> None:
        """Hand the session to a ``StreamPipeline`` (``None``: back from it). While one drives it,
        ``step`` refuses and ``reset`` goes through the pipeline."""
        if pipeline is not None and self.pipeline is not None:
            raise RuntimeError("this session is already driven by a StreamPipeline")
        self.pipeline = pipeline

    def reset(self) -> None:
        """Forget the past: the next frame starts a new stream (frame index 0). In a session driven
        by a ``StreamPipeline``, the frames submitted before the call still belong to the old one."""
        if self.pipeline is not None:
            self.pipeline.reset()
            return
        self.reset_stream()
        self.decoder_state: torch.Tensor | None = None

    def reset_stream(self) -> None:
        """``reset`` without the decoder's memory, which the next frame's ``decode`` clears
        (it begins a stream): what a pipeline runs between its samples."""
        self.frame_index = 0
        self.context: torch.Tensor | None = None        # (1, K, C, h, w), newest first
        self.valid: torch.Tensor | None = None          # (1, K, 1, h, w)

    @staticmethod
    def _check(frame: Mapping[str, np.ndarray]) -> tuple[int, int]:
        """(H, W) of a frame; a clear error for a missing key, a wrong shape or a value the clip
        validator would refuse (``alaya.data.frame_checks.check_frame``: negative depth, normals
        that are not unit, huge motion, a camera that is not rigid, NaN, ...), naming the key."""
        from alaya.data.frame_checks import check_frame
        if "motion" not in frame:
            raise KeyError("G-buffer frame is missing 'motion'")
        _, H, W = check_gbuffer({k: np.asarray(frame[k])[None] for k in FRAME_KEYS if k in frame}, finite=False)
        for key, channels in (("normal", 3), ("albedo", 3), ("roughness", 0), ("metallic", 0), ("motion", 2)):
            shape = np.shape(frame[key])
            if shape != ((H, W, channels) if channels else (H, W)):
                raise ValueError(f"G-buffer {key!r}: expected {(H, W, channels) if channels else (H, W)}, got {shape}")
        if "world_to_camera" in frame and np.shape(frame["world_to_camera"]) != (4, 4):
            raise ValueError(f"'world_to_camera': expected (4, 4), got {np.shape(frame['world_to_camera'])}")
        check_frame(frame)
        return H, W

    def _name_nonfinite(self, inputs: Mapping[str, torch.Tensor]) -> None:
        """Raise the error naming what holds a NaN or an infinity among a frame's stream inputs
        (as float32: a float64 value past its range counts); when nothing does, only the stream
        graph's one-sum check overflowed on huge finite values, and the frame is fine."""
        for key in FRAME_KEYS:
            if not torch.isfinite(inputs[key]).all():
                raise ValueError(f"G-buffer {key!r} contains NaN or infinite values (as float32)")
        if self.student.config.view_channels and not torch.isfinite(
                camera_view(inputs["normal"], inputs["rotation"], inputs["rays"], inputs["xy"])).all():
            raise ValueError("the camera ('K', 'world_to_camera') gives view channels that are not finite")

    def _stream_inputs(self, frame: Mapping[str, np.ndarray], H: int, W: int) -> dict[str, torch.Tensor]:
        """The frame's ``STREAM_INPUTS`` (batch 1, float32): the arrays, and the camera (zeros
        where the frame and the session lack ``K`` or the frame ``world_to_camera``, and for a
        student without a view branch, which does not read them)."""
        inputs = {k: as_tensor(frame[k]).float()[None] for k in (*MODALITIES, "motion")}
        K = frame.get("K", self.intrinsics)
        w2c = frame.get("world_to_camera")
        unused = not self.student.config.view_channels
        camera = (None, None) if K is None or w2c is None or unused else (K, np.asarray(w2c)[None])
        inputs["rotation"], inputs["rays"], inputs["xy"] = camera_inputs(*camera, H, W)
        return inputs

    def claim_solo(self) -> bool:
        """Take the solo graphs for one frame (``prepare(solo=True)``) if this session has them and
        no other frame holds them: one frame at a time may use every core. ``release_solo`` after
        its decoding."""
        return self.solo_backend is not None and self.solo_backend.solo_lock.acquire(blocking=False)

    def release_solo(self) -> None:
        self.solo_backend.solo_lock.release()

    @torch.no_grad()
    def prepare(self, frame: Mapping[str, np.ndarray], solo: bool = False) -> PreparedFrame:
        """The part of a frame's work that needs no past (``Backend.prepare``): checks,
        conversion, the G-buffer encoder and the frame's own features, with the current prompt.
        A bad frame raises here, naming the key at fault, and the stream is unchanged. Then
        ``sample`` it; ``StreamPipeline`` prepares frame n + 1 while frame n is being sampled.
        ``solo``: the frame runs alone, on the ``solo_backend`` if the session has one (the same
        graphs: the same pixels)."""
        H, W = self._check(frame)
        backend = self.backend.for_frame(H, W)
        if solo and self.solo_backend is not None and backend is self.backend:
            backend = self.solo_backend
        with backend.glue_threads():
            inputs = self._stream_inputs(frame, H, W)
            features, flow, finite = backend.prepare(inputs)
            if not finite:
                self._name_nonfinite(inputs)
            guide = self._guide(frame) if backend.needs_guide else None
        return PreparedFrame(backend, features, flow, self.text, guide)

    def _guide(self, frame: Mapping[str, np.ndarray]) -> torch.Tensor:
        """The guided decoder's input (1, G, H, W) for a checked frame (``gbuffer.decoder_guide``;
        its camera channels zero where the frame and the session lack ``K`` or ``world_to_camera``)."""
        K = frame.get("K", self.intrinsics)
        w2c = frame.get("world_to_camera")
        return decoder_guide({k: np.asarray(frame[k])[None] for k in MODALITIES}, K,
                             None if w2c is None else np.asarray(w2c)[None])

    @torch.no_grad()
    def sample(self, prepared: PreparedFrame) -> tuple[torch.Tensor, bool]:
        """The student's output latents (1, C, h, w) for a prepared frame, and whether it began a
        stream (the first frame, or one of a new size); advances the stream."""
        K, C = self.student.config.context, self.student.config.latent_channels
        h, w = prepared.features.shape[-2:]
        fresh = self.context is None or self.context.shape[-2:] != (h, w)    # a new stream, or a new size
        context = torch.zeros(1, K, C, h, w) if fresh else self.context
        valid = torch.zeros(1, K, 1, h, w) if fresh else self.valid
        backend = prepared.backend
        with backend.glue_threads():
            # the context is warped into this frame (a no-op on the zeros of a stream's first frame)
            features, context, valid = backend.attach_context(prepared.features, prepared.flow, context, valid)
            gen = torch.Generator().manual_seed((self.seed * 1_000_003      # mod 2**64: any uint64 seed
                                                 + (self.frame_index if self.noise == "frame" else 0)) % 2**64)
            z = torch.randn(1, C, h, w, generator=gen)
            z = backend.integrate(z, self.times, prepared.text, features)
        # nothing of the stream changes before here: a frame that raised left it as it was
        self.context, self.valid = push_context(context, valid, z)
        self.frame_index += 1
        return z, fresh

    @torch.no_grad()
    def decode(self, backend: Backend, latents: torch.Tensor, fresh: bool, guide: torch.Tensor | None = None
               ) -> np.ndarray:
        """uint8 (H, W, 3) from a frame's latents by the streaming decoder, whose memory starts
        afresh with a stream (``fresh``, from ``sample``); ``guide``: the prepared frame's, for a
        guided decoder."""
        if fresh:
            self.decoder_state = None
        with backend.glue_threads():
            img, self.decoder_state = backend.decode(latents, self.decoder_state, guide)
            return (img[0].clamp(0, 1).permute(1, 2, 0) * 255).round().to(torch.uint8).numpy()

    def _advance(self, frame: Mapping[str, np.ndarray], decode: bool = False):
        """One frame: the student's output latents (1, C, h, w), or with ``decode`` the uint8
        (H, W, 3) frame."""
        if self.pipeline is not None:
            raise RuntimeError("this session is driven by a StreamPipeline; submit frames to it, or close it first")
        prepared = self.prepare(frame)
        z, fresh = self.sample(prepared)
        if not decode:
            if fresh:
                self.decoder_state = None
            return z
        return self.decode(prepared.backend, z, fresh, prepared.guide)

    def step_latent(self, frame: Mapping[str, np.ndarray]) -> torch.Tensor:
        """The student's output latents (1, C, h, w) for one G-buffer frame; advances the stream."""
        return self._advance(frame)

    def step(self, frame: Mapping[str, np.ndarray]) -> np.ndarray:
        """uint8 (H, W, 3) RGB for one G-buffer frame (clip-contract arrays without the T axis)."""
        return self._advance(frame, decode=True)

    def run(self, frames: Iterable[Mapping[str, np.ndarray]]) -> np.ndarray:
        """(N, H, W, 3) for a sequence of frames, continuing the current stream."""
        return np.stack([self.step(f) for f in frames])

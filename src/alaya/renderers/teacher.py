"""The teacher as a renderer: a clip's G-buffer + a prompt -> RGB frames.

G-buffer arrays (clip contract, leading dim T) are drawn as modality images, encoded by the
full codec (``teacher_gbuffer_latents``), and the teacher integrates its flow from noise to RGB
latents in windows of ``window`` frames (bidirectional in time within a window); the full
decoder turns latents into frames. Sampling is deterministic given ``seed``. A teacher with a
view branch also reads the camera (``K`` and ``world_to_camera``, as clips store them) as
``view_input`` (and, where its view input carries it, the raw G-buffer at pixel resolution:
``gbuffer.model_view_input``); without them it renders with the camera unknown.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from tqdm import tqdm

from alaya.codecs.autoencoder import Autoencoder
from alaya.codecs.gbuffer import (VIEW_INPUT_CHANNELS, check_gbuffer, gbuffer_input, model_view_input,
                                  teacher_gbuffer_latents)
from alaya.diffusion.flow import sample_euler, sample_heun, time_grid
from alaya.models.teacher import Teacher
from alaya.paths import default_weights
from alaya.text import PromptEncoder

SAMPLERS = {"euler": sample_euler, "heun": sample_heun}
PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16}


def precision_autocast(precision: str, device_type: str = "cpu") -> torch.autocast:
    """The autocast context a teacher call runs in at ``precision`` (a key of ``PRECISIONS``;
    fp32: autocast off)."""
    dtype = PRECISIONS[precision]
    return torch.autocast(device_type, dtype=dtype, enabled=dtype != torch.float32)


@dataclass
class SamplerConfig:
    steps: int = 50
    guidance: float = 2.0          # classifier-free guidance weight; 1 = no guidance
    sampler: str = "euler"
    shift: float = 1.0             # > 1 spends more steps at high noise (SD3)
    window: int = 16               # frames generated jointly
    noise_scale: float = 1.0       # the starting noise's scale (a temperature): < 1 trades the
                                   # samples' spread for fidelity to the conditional mean
    precision: Literal["fp32", "bf16"] = "fp32"   # the teacher's network calls: "fp32", or "bf16"
                                   # (autocast: faster on CPUs with native bf16, emulated and
                                   # slower elsewhere: docs/flash.md); the latents stay fp32

    def __post_init__(self):
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {sorted(SAMPLERS)}, got '{self.sampler}'")
        if self.steps < 1 or self.window < 1:
            raise ValueError(f"steps and window must be >= 1, got {self.steps}, {self.window}")
        if not 0.0 <= self.noise_scale <= 1.0:
            raise ValueError(f"noise_scale must be in [0, 1], got {self.noise_scale}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got '{self.precision}'")


class TeacherRenderer:
    def __init__(self, teacher: Teacher, autoencoder: Autoencoder, prompt_encoder: PromptEncoder | None = None,
                 sampler: SamplerConfig | None = None):
        self.teacher = teacher.eval()
        self.autoencoder = autoencoder.eval()
        self.prompt_encoder = prompt_encoder or PromptEncoder()
        self.sampler = sampler or SamplerConfig()

    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike = default_weights("teacher"),
                        autoencoder: str | os.PathLike = default_weights("autoencoder"), **kwargs) -> "TeacherRenderer":
        return cls(Teacher.from_pretrained(folder), Autoencoder.from_pretrained(autoencoder), **kwargs)

    @torch.no_grad()
    def gbuffer_latents(self, gbuffer: dict[str, np.ndarray]) -> torch.Tensor:
        check_gbuffer(gbuffer)
        x = gbuffer_input({k: gbuffer[k] for k in ("depth", "normal", "albedo", "roughness", "metallic")})
        return torch.cat([teacher_gbuffer_latents(self.autoencoder, x[i:i + 32]) for i in range(0, len(x), 32)])

    def view(self, gbuffer: dict[str, np.ndarray]) -> torch.Tensor | None:
        """(T, V, H, W) view input of a clip for a view teacher: None (camera unknown) for a
        camera-only teacher when the clip lacks ``K`` or ``world_to_camera``; a teacher whose view
        input carries the G-buffer gets it always, its camera channels zero without a camera."""
        V = self.teacher.config.view_channels
        if not V or (V == VIEW_INPUT_CHANNELS and ("K" not in gbuffer or "world_to_camera" not in gbuffer)):
            return None
        return model_view_input(gbuffer, V)          # zero camera channels without K and world_to_camera

    @torch.no_grad()
    def sample_latents(self, g: torch.Tensor, text: torch.Tensor, seed: int = 0,
                       view: torch.Tensor | None = None, progress: bool = False) -> torch.Tensor:
        """RGB latents (T, C, h, w) for G-buffer latents ``g`` (T, G, h, w), a prompt embedding (D,)
        and, for a view teacher, the view input (T, V, H, W) (None: camera unknown). ``progress``:
        a tqdm bar of the sampler's steps on stderr (a clip takes minutes on a CPU)."""
        s = self.sampler
        T, _, h, w = g.shape
        C = self.teacher.config.latent_channels
        gen = torch.Generator().manual_seed(seed)
        noise = torch.randn(1, T, C, h, w, generator=gen) * s.noise_scale
        text = text.reshape(1, -1)
        ts = time_grid(s.steps, s.shift)
        out = []
        bar = tqdm(total=-(-T // s.window) * s.steps, desc="teacher", unit="step", disable=not progress)
        for a in range(0, T, s.window):
            gw = g[None, a:a + s.window]
            zw = noise[:, a:a + s.window]
            # the view branch's features do not change with the step: computed once per window
            vf = None if view is None else self.teacher.view_features(view[None, a:a + s.window], zw.shape)
            cond = {"gbuffer": gw, "text": text, "view_features": vf,
                    "uncond": {"gbuffer": gw, "text": torch.zeros_like(text), "view_features": vf}}
            z = SAMPLERS[s.sampler](self._call, zw, ts, cond, s.guidance, callback=lambda i, z: bar.update())
            out.append(z[0])
        bar.close()
        return torch.cat(out)

    def _call(self, z: torch.Tensor, t: torch.Tensor, **cond) -> torch.Tensor:
        """One teacher call at the sampler's precision; the velocity comes back in fp32, so the
        sampler's state stays fp32."""
        with precision_autocast(self.sampler.precision, z.device.type):
            return self.teacher(z, t, **cond).float()

    @torch.no_grad()
    def decode(self, z: torch.Tensor) -> np.ndarray:
        rgb = torch.cat([self.autoencoder.decode(z[i:i + 32]) for i in range(0, len(z), 32)])
        return (rgb.clamp(0, 1).permute(0, 2, 3, 1) * 255).round().to(torch.uint8).numpy()

    def render(self, gbuffer: dict[str, np.ndarray], prompt: str, seed: int = 0, progress: bool = False) -> np.ndarray:
        """uint8 (T, H, W, 3) frames for a G-buffer clip and a free-text prompt (``progress``: a bar)."""
        text = self.prompt_encoder.encode(prompt)[0]
        return self.decode(self.sample_latents(self.gbuffer_latents(gbuffer), text, seed, self.view(gbuffer), progress))

"""A G-buffer-guided streaming decoder: latents at 1/8 resolution plus the frame's full-resolution
G-buffer and camera -> RGB.

The tiny decoder draws each 8x8 pixel block from one latent pixel through a block transform, so
any error in the latents shows as an 8x8 grid and every edge and texture has to be regenerated
from 32 numbers per block. Here the G-buffer and the camera (``gbuffer.decoder_guide``: world-space
normal, view ray, image position, albedo, camera-space normal, depth, roughness, metallic,
world-space position) feed the network at every scale, as in Enhancing Photorealism
Enhancement (Richter et al. 2021) and guided upsampling (Kopf et al. 2007): a small U-Net whose
encoder reads the guide at 1, 1/2, 1/4 and 1/8 resolution and whose decoder starts from the
latents at 1/8 and upsamples with convolutions over the guide's features at each scale, so the
output's edges are the engine's own. Nothing on the output path is a non-overlapping block
transform (bilinear upsampling and 3x3 convolutions only).

With ``albedo_gain`` the head also predicts a per-pixel, per-channel gain on the guide's albedo
(``rgb = base + offset + gain * albedo``): the reference is largely albedo times light, so the
surface texture reaches the output exactly and the network only has to say how much light falls
on it (and, for fog or night, how much of the texture shows), instead of redrawing the texture
through its features.

The latents' global average (after the stem) modulates the full-resolution features (scale and
shift per channel), so what the whole frame says about the style (fog, night, toon) reaches every
pixel. As the tiny decoder (TAEHV), the stem's features are concatenated with the previous
frame's (zeros after a reset) for a flicker-free stream::

    dec = GuidedDecoder.from_pretrained("weights/guided_decoder").eval()
    state = None
    for z, guide in stream:            # (1, 32, 16, 16) latents, (1, 20, 128, 128) guide
        rgb, state = dec(z, state, guide)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from alaya.codecs.gbuffer import GUIDE_CHANNELS, STAR_CHANNEL, VIEW_INPUT_CHANNELS
from alaya.codecs.tiny import TinyDecoder, with_memory
from alaya.nn.blocks import check_image, conv
from alaya.nn.pretrained import from_pretrained, read_config, save_pretrained


ALBEDO_CHANNELS = slice(VIEW_INPUT_CHANNELS, VIEW_INPUT_CHANNELS + 3)   # the guide's albedo, 0..1


@dataclass
class GuidedDecoderConfig:
    latent_channels: int = 32
    guide_channels: int = GUIDE_CHANNELS            # ``gbuffer.decoder_guide``
    widths: tuple[int, ...] = (16, 24, 32, 48)     # at 1, 1/2, 1/4, 1/8 resolution
    temporal: bool = True                          # the previous frame's stem features
    albedo_gain: bool = False                      # the head also outputs a gain on the guide's albedo
    sky_gain: bool = False                         # ... and a colour for the guide's stars
    full_res_blocks: int = 0                       # residual blocks at full resolution before the head

    @property
    def head_channels(self) -> int:
        return 3 + 3 * self.albedo_gain + 3 * self.sky_gain


def _up(x: torch.Tensor) -> torch.Tensor:
    return F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)


class GuidedDecoder(nn.Module):
    def __init__(self, config: GuidedDecoderConfig | None = None):
        super().__init__()
        self.config = c = config or GuidedDecoderConfig()
        w0, w1, w2, w3 = c.widths
        act = nn.SiLU
        self.guide0 = nn.Sequential(conv(c.guide_channels, w0), act())
        self.guide1 = nn.Sequential(conv(w0, w1, stride=2), act())
        self.guide2 = nn.Sequential(conv(w1, w2, stride=2), act())
        self.guide3 = nn.Sequential(conv(w2, w3, stride=2), act())
        self.stem = nn.Sequential(conv(c.latent_channels, w3), act())
        self.memory = nn.Sequential(conv(2 * w3, w3), act(), conv(w3, w3)) if c.temporal else None
        self.fuse3 = nn.Sequential(conv(2 * w3, w3), act(), conv(w3, w3), act())
        self.fuse2 = nn.Sequential(conv(w3 + w2, w2), act())
        self.fuse1 = nn.Sequential(conv(w2 + w1, w1), act(), conv(w1, w1), act())
        self.fuse0 = conv(w1 + w0, w0)
        self.film = nn.Linear(w3, 2 * w0)
        self.refine = nn.ModuleList(nn.Sequential(conv(w0, w0), act(), conv(w0, w0)) for _ in range(c.full_res_blocks))
        self.head = nn.Sequential(act(), conv(w0, w0), act(), conv(w0, c.head_channels))
        self.coarse = nn.Conv2d(w3, 3, 1)              # a smooth base colour, upsampled bilinearly
        for layer in (self.film, self.head[-1], *(block[-1] for block in self.refine)):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    @property
    def state_channels(self) -> int:
        return self.config.widths[-1]

    def forward(self, z: torch.Tensor, previous: torch.Tensor | None, guide: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """One frame: latents ``z`` (B, C, h, w), the stem features of the frame before
        (``previous``, None at a stream's start) and the guide (B, guide_channels, 8h, 8w).
        Returns (image in [0, 1] (B, 3, 8h, 8w), this frame's stem features for the next call)."""
        c = self.config
        check_image(z, c.latent_channels, 1, "guided decoder latent")
        B, _, h, w = z.shape
        if guide.ndim != 4 or guide.shape[0] != B or guide.shape[1] < c.guide_channels \
                or tuple(guide.shape[2:]) != (8 * h, 8 * w):
            raise ValueError(f"guided decoder guide: expected {(B, c.guide_channels, 8 * h, 8 * w)}, "
                             f"got {tuple(guide.shape)}")
        # The guide's channels are only ever appended: a decoder trained on fewer reads the prefix.
        guide = guide[:, :c.guide_channels]
        s = self.stem(z)
        x = with_memory(self.memory, s, previous, "guided decoder")
        g0 = self.guide0(guide)
        g1 = self.guide1(g0)
        g2 = self.guide2(g1)
        g3 = self.guide3(g2)
        x = self.fuse3(torch.cat([x, g3], 1))
        base = self.coarse(x)
        x = self.fuse2(torch.cat([_up(x), g2], 1))
        x = self.fuse1(torch.cat([_up(x), g1], 1))
        x = self.fuse0(torch.cat([_up(x), g0], 1))
        scale, shift = self.film(s.mean((2, 3))).chunk(2, 1)
        x = x * (1 + scale[:, :, None, None]) + shift[:, :, None, None]
        for block in self.refine:
            x = x + block(x)
        out = self.head(x)
        img = F.interpolate(base, scale_factor=8, mode="bilinear", align_corners=False) + out[:, :3]
        img = img * 0.5 + 0.5
        if c.albedo_gain:
            img = img + out[:, 3:6] * guide[:, ALBEDO_CHANNELS]
        if c.sky_gain:
            img = img + out[:, c.head_channels - 3:] * guide[:, STAR_CHANNEL:STAR_CHANNEL + 1]
        return (img if self.training else img.clamp(0, 1)), s

    def save_pretrained(self, folder, **metadata) -> None:
        save_pretrained(self, folder, **metadata)

    @classmethod
    def from_pretrained(cls, folder) -> "GuidedDecoder":
        return from_pretrained(cls, GuidedDecoderConfig, folder)


def extended(decoder: GuidedDecoder, albedo_gain: bool | None = None, sky_gain: bool | None = None,
             guide_channels: int | None = None, full_res_blocks: int | None = None) -> GuidedDecoder:
    """A copy of ``decoder`` that reads more of the guide (``guide_channels``, appended channels),
    outputs more gains (``albedo_gain``, ``sky_gain``) or has more residual blocks at full
    resolution (``full_res_blocks``; None: as it is), and decodes exactly as it does: the new
    input, output and last block weights are zero, so training starts from it."""
    c = decoder.config
    new = dataclasses.replace(c, albedo_gain=c.albedo_gain if albedo_gain is None else albedo_gain,
                              sky_gain=c.sky_gain if sky_gain is None else sky_gain,
                              guide_channels=guide_channels or c.guide_channels,
                              full_res_blocks=c.full_res_blocks if full_res_blocks is None else full_res_blocks)
    if (new.albedo_gain < c.albedo_gain or new.sky_gain < c.sky_gain
            or new.guide_channels < c.guide_channels or new.full_res_blocks < c.full_res_blocks):
        raise ValueError(f"extended: {new} drops a part of {c}")
    if new.sky_gain and new.guide_channels <= STAR_CHANNEL:
        raise ValueError(f"extended: sky_gain needs the guide's star channel ({STAR_CHANNEL}); "
                         f"guide_channels is {new.guide_channels}")
    out = GuidedDecoder(new)
    state = decoder.state_dict()
    first = state["guide0.0.weight"]
    state["guide0.0.weight"] = torch.cat([first, first.new_zeros(first.shape[0], new.guide_channels - c.guide_channels,
                                                                *first.shape[2:])], 1)
    last = f"head.{len(out.head) - 1}"
    for name in ("weight", "bias"):
        old = state[f"{last}.{name}"]
        grown = old.new_zeros(new.head_channels, *old.shape[1:])
        grown[:3] = old[:3]                              # the colour
        if c.albedo_gain:
            grown[3:6] = old[3:6]                        # the albedo gain keeps its place
        if c.sky_gain:
            grown[-3:] = old[-3:]                        # the sky gain is always last
        state[f"{last}.{name}"] = grown
    out.load_state_dict({**out.state_dict(), **state})   # new blocks keep their initialisation
    return out.train(decoder.training)


def with_albedo_gain(decoder: GuidedDecoder) -> GuidedDecoder:
    """A copy of ``decoder`` with ``albedo_gain`` on that decodes exactly as it does."""
    return extended(decoder, albedo_gain=True)


def load_decoder(folder) -> "GuidedDecoder | TinyDecoder":
    """The Flash renderer's streaming decoder saved in ``folder``: a ``GuidedDecoder`` or a
    ``TinyDecoder``, by the class its ``config.json`` names."""
    name = read_config(folder).get("class")
    classes = {"GuidedDecoder": GuidedDecoder, "TinyDecoder": TinyDecoder}
    if name not in classes:
        raise ValueError(f"{folder}/config.json: class {name!r} is not a streaming decoder ({sorted(classes)})")
    return classes[name].from_pretrained(folder)


def needs_guide(decoder) -> bool:
    """Whether ``decoder`` reads the full-resolution guide (``gbuffer.decoder_guide``)."""
    return isinstance(decoder, GuidedDecoder)

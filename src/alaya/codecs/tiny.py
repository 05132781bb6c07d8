"""Tiny distilled codecs (after TAESD/TAEHV): a grouped G-buffer encoder and a streaming decoder.

``TinyGBufferEncoder`` has one branch per modality (grouped convolutions, so all branches run
as one network) and maps the raw 9-channel G-buffer to the teacher's G-buffer latents.
``TinyDecoder`` maps latents to RGB with a temporal memory at the latent resolution: each frame's
features are concatenated with the previous frame's (zeros after ``reset``), as TAEHV does, so
streams decode without flicker. ``StreamingDecoder`` holds that state::

    dec = StreamingDecoder(TinyDecoder.from_pretrained("weights/tiny_decoder"))
    dec.reset()
    for z in latents:              # (1, C, 16, 16) each, e.g. from the Flash student
        frame = dec.decode(z)      # (1, 3, 128, 128) in [0, 1]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from alaya.codecs.gbuffer import GBUFFER_INPUT_CHANNELS, MODALITIES, RAW_CHANNELS
from alaya.nn.blocks import ResBlock, Upsample, bounded, check_image, conv
from alaya.nn.pretrained import from_pretrained, save_pretrained


@dataclass
class TinyGBufferEncoderConfig:
    latent_channels: int = 32            # per modality (the full codec's latent channels)
    width: int = 8                       # per-branch width
    modalities: tuple[str, ...] = MODALITIES


class TinyGBufferEncoder(nn.Module):
    def __init__(self, config: TinyGBufferEncoderConfig | None = None):
        super().__init__()
        self.config = c = config or TinyGBufferEncoderConfig()
        g = len(c.modalities)
        # pad every modality to 3 input channels so the branches are equal groups
        self.register_buffer("gather", self._gather_index(c.modalities), persistent=False)
        w = c.width * g
        # every layer is grouped, one branch per modality; the first layer and the linear path
        # read each 8x8 block directly with stride-8 convolutions (no pixel shuffles)
        self.net = nn.Sequential(
            nn.Conv2d(3 * g, 2 * w, 8, 8, groups=g), nn.ReLU(inplace=True),
            ResBlock(2 * w, groups=g),
            conv(2 * w, c.latent_channels * g, groups=g),
        )
        # linear 8x8 block path per modality, initialised from the full codec's block transform
        self.linear = nn.Conv2d(3 * g, c.latent_channels * g, 8, 8, groups=g)
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    @staticmethod
    def _gather_index(modalities: tuple[str, ...]) -> torch.Tensor:
        offsets, start = {}, 0
        for m in MODALITIES:
            offsets[m] = start
            start += RAW_CHANNELS[m]
        idx = []
        for m in modalities:
            n = RAW_CHANNELS[m]
            idx += [offsets[m] + min(i, n - 1) for i in range(3)]
        return torch.tensor(idx, dtype=torch.long)

    @torch.no_grad()
    def init_from_autoencoder(self, ae) -> None:
        """Copy the full codec's linear block transform into every modality's linear path,
        folding in how each modality image is made from the raw channels (``modality_images``)."""
        W = ae.encode_linear[1].weight[:, :, 0, 0]                 # (C, 192) over 2 * image - 1
        c = ae.encode_linear[1].bias
        C = W.shape[0]
        W8 = W.reshape(C, 3, 8, 8)                                  # pixel-unshuffle order
        for m, name in enumerate(self.config.modalities):
            a, b = (0.5, 0.5) if name == "normal" else (1.0, 0.0)   # image = a * raw + b
            self.linear.weight[m * C:(m + 1) * C] = 2 * a * W8
            self.linear.bias[m * C:(m + 1) * C] = c + W.sum(1) * (2 * b - 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 9, H, W) raw G-buffer (``gbuffer_input``) -> (B, 5 * C, H/8, W/8)."""
        check_image(x, GBUFFER_INPUT_CHANNELS, 8, "tiny G-buffer encoder input")
        x = x.index_select(1, self.gather)
        return bounded(self.linear(x) + self.net(x), 4.0)

    def save_pretrained(self, folder, **metadata) -> None:
        save_pretrained(self, folder, **metadata)

    @classmethod
    def from_pretrained(cls, folder) -> "TinyGBufferEncoder":
        return from_pretrained(cls, TinyGBufferEncoderConfig, folder)


def with_memory(memory: nn.Module | None, h: torch.Tensor, previous: torch.Tensor | None, name: str) -> torch.Tensor:
    """TAEHV's temporal memory: features ``h`` plus ``memory`` of them beside the previous frame's
    (zeros at a stream's start, ``previous`` None); ``h`` itself without a memory."""
    if memory is None:
        return h
    prev = torch.zeros_like(h) if previous is None else previous
    if prev.shape != h.shape:
        raise ValueError(f"{name} state has shape {tuple(prev.shape)}, expected {tuple(h.shape)}; "
                         "reset between streams")
    return h + memory(torch.cat([h, prev], 1))


@dataclass
class TinyDecoderConfig:
    latent_channels: int = 32
    channels: tuple[int, ...] = (48, 32, 16)       # widths at 1/8, 1/4, 1/2 resolution
    temporal: bool = True                          # TAEHV-style memory of the previous frame


class TinyDecoder(nn.Module):
    def __init__(self, config: TinyDecoderConfig | None = None):
        super().__init__()
        self.config = c = config or TinyDecoderConfig()
        w3, w2, w1 = c.channels
        self.stem = nn.Sequential(conv(c.latent_channels, w3), nn.ReLU(inplace=True))
        self.memory = (nn.Sequential(conv(2 * w3, w3), nn.ReLU(inplace=True), conv(w3, w3))
                       if c.temporal else None)
        self.body = nn.Sequential(
            nn.ReLU(inplace=True), ResBlock(w3),
            Upsample(w3, w2), conv(w2, w2), nn.ReLU(inplace=True),
            Upsample(w2, w1),
            conv(w1, 12), nn.PixelShuffle(2),     # 2x2 pixel blocks from the 1/2-res features
        )
        # linear 8x8 block path, initialised from the full decoder's (init_from_autoencoder)
        self.linear = nn.Sequential(nn.Conv2d(c.latent_channels, 192, 1), nn.PixelShuffle(8))
        nn.init.zeros_(self.body[-2].weight)
        nn.init.zeros_(self.body[-2].bias)

    @torch.no_grad()
    def init_from_autoencoder(self, ae) -> None:
        self.linear[0].load_state_dict(ae.decode_linear[0].state_dict())

    def forward(self, z: torch.Tensor, previous: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Decode one frame. ``previous``: the stem features of the frame before (None = start
        of a stream). Returns (image in [0, 1], this frame's stem features for the next call)."""
        check_image(z, self.config.latent_channels, 1, "tiny decoder latent")
        h = self.stem(z)
        x = with_memory(self.memory, h, previous, "tiny decoder")
        img = (self.linear(z) + self.body(x)) * 0.5 + 0.5
        return (img if self.training else img.clamp(0, 1)), h

    def decode_sequence(self, z: torch.Tensor) -> torch.Tensor:
        """(B, T, C, h, w) -> (B, T, 3, 8h, 8w), streaming from a reset state."""
        prev, out = None, []
        for t in range(z.shape[1]):
            img, prev = self(z[:, t], prev)
            out.append(img)
        return torch.stack(out, 1)

    def save_pretrained(self, folder, **metadata) -> None:
        save_pretrained(self, folder, **metadata)

    @classmethod
    def from_pretrained(cls, folder) -> "TinyDecoder":
        return from_pretrained(cls, TinyDecoderConfig, folder)


class StreamingDecoder:
    """``reset() / decode(latent) -> frame`` over a :class:`TinyDecoder`, keeping its memory."""

    def __init__(self, decoder: TinyDecoder):
        self.decoder = decoder.eval()
        self.state: torch.Tensor | None = None

    def reset(self) -> None:
        self.state = None

    @torch.no_grad()
    def decode(self, z: torch.Tensor) -> torch.Tensor:
        img, self.state = self.decoder(z, self.state)
        return img

"""The U-Net core the teacher and the student share, and its view branch.

Two levels: features at the latent resolution (width ``widths[0]``) and at half of it
(``widths[1]``), with one skip connection::

    stem features (N, w0, h, w) -> down0 -> down (stride 2) -> mid -> up (x2) -> [cat skip] -> up0 -> out

Every block is a ``FlowBlock``: a residual block whose group norms read the time and prompt
embedding (``AdaGroupNorm``), then a temporal convolution that mixes the frames of a clip. The
teacher runs the core over a clip window with convolutions that look both ways; the student runs
it on one frame at a time (causal; a convolution over one replicated frame is a 1x1 map). Each
model builds its own input layer (``stem``) and embedding, and calls ``build_core`` and
``run_core``: the core's modules are the model's own attributes, so their names in a state dict
(``down0.0.conv1.weight``, ...) are the same as when each model built them itself.
"""

from __future__ import annotations

import torch
from torch import nn

from alaya.nn.blocks import conv
from alaya.nn.conditioning import AdaGroupNorm, TemporalConv


def embedding_mlp(cin: int, dim: int) -> nn.Sequential:
    """Linear -> SiLU -> Linear, ``cin`` to ``dim``: what turns a time or prompt into the embedding."""
    return nn.Sequential(nn.Linear(cin, dim), nn.SiLU(), nn.Linear(dim, dim))


class FlowBlock(nn.Module):
    def __init__(self, cin: int, cout: int, emb_dim: int, kernel: int, causal: bool = False):
        super().__init__()
        self.norm1 = AdaGroupNorm(cin, emb_dim)
        self.conv1 = conv(cin, cout)
        self.norm2 = AdaGroupNorm(cout, emb_dim)
        self.conv2 = conv(cout, cout)
        nn.init.zeros_(self.conv2.weight)
        self.skip = nn.Identity() if cin == cout else nn.Conv2d(cin, cout, 1)
        self.temporal = TemporalConv(cout, kernel, causal)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor, emb: torch.Tensor, frames: int) -> torch.Tensor:
        h = self.conv1(self.act(self.norm1(x, emb)))
        h = self.conv2(self.act(self.norm2(h, emb)))
        return self.temporal(self.skip(x) + h, frames)


class UNetCore(nn.Module):
    """Base of the teacher and the student: ``build_view`` and ``build_core`` add the shared
    modules to the model, ``run_core`` runs them. A subclass calls the builders where it built
    these modules itself before, so that its parameters are created, initialised and ordered
    as they were (the same random init for a seed, the same optimizer state layout)."""

    def build_view(self, view_channels: int, view_pixel: int, width: int) -> None:
        """``view`` (``view_branch``) and ``view_pixel`` (``pixel_features``), or None without a view input."""
        self.view = view_branch(view_channels + view_pixel, width) if view_channels else None
        self.view_pixel = pixel_features(view_channels, view_pixel) if view_channels and view_pixel else None

    def build_core(self, widths: tuple[int, ...], emb_dim: int, blocks: int, out_channels: int,
                   kernel: int = 3, causal: bool = False) -> None:
        """down0 / mid / up0 hold ``blocks``, ``2 * blocks`` and ``blocks`` blocks; the output
        layer starts at zero."""
        w0, w1 = widths
        self.down0 = nn.ModuleList(FlowBlock(w0, w0, emb_dim, kernel, causal) for _ in range(blocks))
        self.down = nn.Conv2d(w0, w1, 3, 2, 1)
        self.mid = nn.ModuleList(FlowBlock(w1, w1, emb_dim, kernel, causal) for _ in range(2 * blocks))
        self.up = nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"), conv(w1, w0))
        self.up0 = nn.ModuleList(FlowBlock(2 * w0 if i == 0 else w0, w0, emb_dim, kernel, causal)
                                 for i in range(blocks))
        self.out_norm = nn.GroupNorm(8, w0)
        self.out = conv(w0, out_channels)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def run_core(self, x: torch.Tensor, emb: torch.Tensor | dict, frames: int) -> torch.Tensor:
        """Stem features (N, w0, h, w), N = clips x ``frames``, and the embedding (N, E) (or the
        norms' precomputed modulations, ``AdaGroupNorm``) -> output (N, out_channels, h, w)."""
        for blk in self.down0:
            x = blk(x, emb, frames)
        skip = x
        x = self.down(x)
        for blk in self.mid:
            x = blk(x, emb, frames)
        x = torch.cat([self.up(x), skip], 1)
        for blk in self.up0:
            x = blk(x, emb, frames)
        return self.out(nn.functional.silu(self.out_norm(x)))


def view_branch(channels: int, width: int) -> nn.Sequential:
    """Pixel-resolution view input (N, V, 8h, 8w) -> stem features (N, width, h, w): each 8x8
    block to channels, then two convolutions. The last starts at zero, so a network that gains
    the branch starts out computing what it computed without it; no biases, so a zero input (an
    unknown camera) adds exactly nothing, as None does."""
    branch = nn.Sequential(nn.PixelUnshuffle(8), nn.Conv2d(64 * channels, width, 1, bias=False), nn.SiLU(),
                           nn.Conv2d(width, width, 3, padding=1, bias=False))
    nn.init.zeros_(branch[-1].weight)
    return branch


def strided_view_branch(branch: nn.Sequential) -> nn.Sequential:
    """The same function as ``view_branch``'s ``branch`` with its 8x8 blocks read by one 8x8
    convolution of stride 8 (weights reshaped) instead of ``PixelUnshuffle`` + a 1x1
    convolution: onnxruntime runs PixelUnshuffle as a 6-D transpose, slower than the strided
    convolution (docs/flash.md, "The view branch's export"). For export; trained weights keep their layout."""
    unshuffle, blocks, act, conv_ = branch
    r = unshuffle.downscale_factor
    width, inputs = blocks.weight.shape[:2]
    strided = nn.Conv2d(inputs // (r * r), width, r, stride=r, bias=False)
    with torch.no_grad():       # PixelUnshuffle's channel c * r * r + i * r + j holds pixel (i, j) of channel c
        strided.weight.copy_(blocks.weight.reshape(width, inputs // (r * r), r, r))
    return nn.Sequential(strided, act, conv_)


def pixel_features(channels: int, features: int) -> nn.Sequential:
    """Per-pixel MLP (two 1x1 convolutions, no biases: zero in, zero out) whose ``features``
    outputs ``apply_view`` appends to the view input, so that the blocked branch can read
    per-pixel products (albedo times a light term) that a linear map of a block cannot form."""
    return nn.Sequential(nn.Conv2d(channels, features, 1, bias=False), nn.SiLU(),
                         nn.Conv2d(features, features, 1, bias=False), nn.SiLU())


def apply_view(branch: nn.Module, pixel: nn.Module | None, view: torch.Tensor) -> torch.Tensor:
    """Stem features of a view input (N, V, 8h, 8w) through ``view_branch`` (and ``pixel_features``)."""
    if pixel is not None:
        view = torch.cat([view, pixel(view)], 1)
    return branch(view)


def check_view(view: torch.Tensor | None, channels: int, shape: tuple[int, ...]) -> None:
    """``view`` must be None or (B, T, channels, 8h, 8w) for latents of ``shape`` (B, T, C, h, w)."""
    if view is None:
        return
    B, T, _, h, w = shape
    if channels == 0:
        raise ValueError("this model has no view branch (config.view_channels = 0) but got a view input")
    if view.shape != (B, T, channels, 8 * h, 8 * w):
        raise ValueError(f"view: expected {(B, T, channels, 8 * h, 8 * w)}, got {tuple(view.shape)}")

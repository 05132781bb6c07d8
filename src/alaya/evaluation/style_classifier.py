"""The style classifier: a small CNN that names the look of a frame (which of the reference
renderer's styles it shows). ``alaya eval render`` applies it to generated frames to measure
prompt control; it is trained on reference renders (``alaya train style-classifier``,
``alaya.train.style_classifier``).

Input: RGB in [0, 1] of any size, resized to ``size``². Four stride-2 conv stages, then the
per-channel mean *and* standard deviation over the image (a style is mostly colour statistics
and contrast, the std pooling makes those explicit), then a linear layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from alaya.data.frames import FrameBank
from alaya.evaluation.metrics import frames_to_tensor
from alaya.nn.pretrained import from_pretrained, save_pretrained


@dataclass
class StyleClassifierConfig:
    styles: tuple[str, ...] = ()
    channels: tuple[int, ...] = (16, 32, 64, 96)
    size: int = 64


class StyleClassifier(nn.Module):
    def __init__(self, config: StyleClassifierConfig):
        super().__init__()
        if len(config.styles) < 2:
            raise ValueError(f"a style classifier needs at least 2 styles, got {list(config.styles)}")
        self.config = config
        layers, cin = [], 3
        for c in config.channels:
            layers += [nn.Conv2d(cin, c, 3, 2, 1), nn.GroupNorm(min(8, c), c), nn.SiLU(),
                       nn.Conv2d(c, c, 3, 1, 1), nn.SiLU()]
            cin = c
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(2 * cin + 6, len(config.styles))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Logits (N, styles) of images (N, 3, H, W) in [0, 1]."""
        if images.ndim != 4 or images.shape[1] != 3:
            raise ValueError(f"images: expected (N, 3, H, W), got {tuple(images.shape)}")
        s = self.config.size
        x = F.interpolate(images.float(), size=(s, s), mode="area") if images.shape[-2:] != (s, s) else images.float()
        colour = torch.cat([x.mean((2, 3)), x.std((2, 3))], 1)
        h = self.features(x * 2 - 1)
        return self.head(torch.cat([h.mean((2, 3)), h.std((2, 3)), colour], 1))

    @torch.no_grad()
    def predict(self, frames: np.ndarray | torch.Tensor, batch: int = 64) -> list[str]:
        """Style names of uint8 frames (..., H, W, 3) or float images (N, 3, H, W)."""
        x = _as_images(frames)
        idx = torch.cat([self(x[i:i + batch]).argmax(1) for i in range(0, len(x), batch)])
        return [self.config.styles[i] for i in idx.tolist()]

    def save_pretrained(self, folder, **metadata) -> None:
        save_pretrained(self, folder, **metadata)

    @classmethod
    def from_pretrained(cls, folder) -> "StyleClassifier":
        return from_pretrained(cls, StyleClassifierConfig, folder).eval()


def _as_images(frames: np.ndarray | torch.Tensor) -> torch.Tensor:
    return frames_to_tensor(frames) if isinstance(frames, np.ndarray) else frames


def accuracy(model: StyleClassifier, bank: FrameBank, frames_per_clip: int | None = None) -> dict[str, float]:
    """Accuracy per style and overall on every (or every k-th) frame of a bank."""
    n, s, t, _, _ = bank.shape
    stride = max(1, t // frames_per_clip) if frames_per_clip else 1
    per_style = {}
    for si, name in enumerate(bank.styles):
        pred = model.predict(bank.rgb[:, si, ::stride])
        per_style[name] = float(np.mean([p == name for p in pred]))
    return {"accuracy": float(np.mean(list(per_style.values()))), **{f"accuracy_{k}": v for k, v in per_style.items()}}


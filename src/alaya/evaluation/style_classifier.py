"""The style classifier: a small CNN that names the look of a frame (which of the reference
renderer's styles it shows). ``alaya eval render`` applies it to generated frames to measure
prompt control; it is trained on reference renders (``alaya train style-classifier``).

Input: RGB in [0, 1] of any size, resized to ``size``². Four stride-2 conv stages, then the
per-channel mean *and* standard deviation over the image (a style is mostly colour statistics
and contrast, the std pooling makes those explicit), then a linear layer.

Training sees reference frames with blur, noise and random crops, so that a slightly soft or
noisy generated frame of the right look is still recognised; colours are never jittered, since
colour is what separates the styles.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from alaya.data.frames import FrameBank
from alaya.evaluation.metrics import frames_to_tensor
from alaya.nn.pretrained import from_pretrained, save_pretrained
from alaya.train.loop import TrainConfig, Trainer


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


def augment(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Random crop (50–100% of the side, resized back), flip, Gaussian blur and noise."""
    n, _, h, w = x.shape
    out = []
    for i in range(n):
        r = torch.rand(6, generator=gen)
        side = int(h * (0.5 + 0.5 * r[0]))
        y0, x0 = int((h - side) * r[1]), int((w - side) * r[2])
        img = x[i:i + 1, :, y0:y0 + side, x0:x0 + side]
        img = F.interpolate(img, size=(h, w), mode="bilinear", align_corners=False)
        if r[3] < 0.5:
            img = img.flip(-1)
        sigma = float(r[4]) * 1.5
        if sigma > 0.2:
            k = torch.arange(-3, 4, dtype=torch.float32)
            g = torch.exp(-k ** 2 / (2 * sigma ** 2))
            g = (g / g.sum()).to(img)
            img = F.conv2d(F.pad(img, (3, 3, 0, 0), mode="replicate"), g.view(1, 1, 1, 7).repeat(3, 1, 1, 1), groups=3)
            img = F.conv2d(F.pad(img, (0, 0, 3, 3), mode="replicate"), g.view(1, 1, 7, 1).repeat(3, 1, 1, 1), groups=3)
        img = img + float(r[5]) * 0.03 * torch.randn(img.shape, generator=gen)
        out.append(img)
    return torch.cat(out).clamp(0, 1)


@dataclass
class StyleClassifierTrainConfig:
    data: str
    out: str = "weights/style_classifier"
    classifier: StyleClassifierConfig = field(default_factory=StyleClassifierConfig)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(run_dir="runs/style_classifier",
                                                                   steps=1500, batch_size=48, lr=2e-3))


def accuracy(model: StyleClassifier, bank: FrameBank, frames_per_clip: int | None = None) -> dict[str, float]:
    """Accuracy per style and overall on every (or every k-th) frame of a bank."""
    n, s, t, _, _ = bank.shape
    stride = max(1, t // frames_per_clip) if frames_per_clip else 1
    per_style = {}
    for si, name in enumerate(bank.styles):
        pred = model.predict(bank.rgb[:, si, ::stride])
        per_style[name] = float(np.mean([p == name for p in pred]))
    return {"accuracy": float(np.mean(list(per_style.values()))), **{f"accuracy_{k}": v for k, v in per_style.items()}}


def train_style_classifier(cfg: StyleClassifierTrainConfig) -> StyleClassifier:
    train = FrameBank.load(cfg.data, "train", gbuffer=False)
    val = FrameBank.load(cfg.data, "val", gbuffer=False)
    tc = cfg.train
    torch.manual_seed(tc.seed)
    ccfg = StyleClassifierConfig(**{**cfg.classifier.__dict__, "styles": tuple(train.styles)})
    model = StyleClassifier(ccfg)

    def loss_fn(m, index: int):
        c, s, t = train.sample_indices(tc.batch_size, tc.seed, index)
        x = _as_images(train.rgb[c, s, t])
        gen = torch.Generator().manual_seed(int(np.random.default_rng([tc.seed, index, 2]).integers(2**62)))
        logits = m(augment(x, gen))
        y = torch.from_numpy(s)
        return F.cross_entropy(logits, y), {"train_acc": float((logits.argmax(1) == y).float().mean())}

    def validate(m) -> dict[str, float]:
        return {"accuracy": accuracy(m, val, frames_per_clip=4)["accuracy"]}

    trainer = Trainer(model, tc, loss_fn, validate, describe={"classifier": ccfg.__dict__})
    model = trainer.run().eval()
    if trainer.dist.is_main:
        test = FrameBank.load(cfg.data, "test", gbuffer=False)
        model.save_pretrained(cfg.out, trained={"steps": tc.steps, "batch_size": tc.batch_size,
                                                "data": cfg.data, "run_dir": tc.run_dir},
                              metrics={"val": trainer.last_val, "test": accuracy(model, test)})
    return model

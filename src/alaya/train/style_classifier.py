"""Training recipe for the style classifier (``alaya train style-classifier``): cross-entropy on
reference renders, which style each frame shows.

Training sees reference frames with blur, noise and random crops, so that a slightly soft or
noisy generated frame of the right look is still recognised; colours are never jittered, since
colour is what separates the styles.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from alaya.data.frames import FrameBank
from alaya.evaluation.metrics import frames_to_tensor
from alaya.evaluation.style_classifier import StyleClassifier, StyleClassifierConfig, accuracy
from alaya.train.loop import TrainConfig, Trainer


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


def train_style_classifier(cfg: StyleClassifierTrainConfig) -> StyleClassifier:
    train = FrameBank.load(cfg.data, "train", gbuffer=False)
    val = FrameBank.load(cfg.data, "val", gbuffer=False)
    tc = cfg.train
    torch.manual_seed(tc.seed)
    ccfg = StyleClassifierConfig(**{**cfg.classifier.__dict__, "styles": tuple(train.styles)})
    model = StyleClassifier(ccfg)

    def loss_fn(m, index: int):
        c, s, t = train.sample_indices(tc.batch_size, tc.seed, index)
        x = frames_to_tensor(train.rgb[c, s, t])
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

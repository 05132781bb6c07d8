"""The inverse-dynamics model (IDM): which action took frame t-1 to frame t.

``alaya eval world`` applies it to pairs of generated frames to measure whether a world model
obeys its actions (VPT, Baker et al. 2022, use an IDM to label video; Genie and GameNGen-style
evaluations compare its accuracy on generated and on real frames). Actions are classes, one
head per column group of ``alaya.data.actions``:

* ``forward``, ``strafe``, ``turn``, ``pitch``: 3 classes each, value < -1/3, in between, > 1/3;
* ``one_shot``: 5 classes, none / jump / attack / spell / summon.

Input: frames t-1 and t in [0, 1] and their difference (9 channels), area-resized to
``size``² (a multiple of 2^stages); conv stages of stride 2, a ``pool``² average pool that keeps
where in the image things moved (forward motion expands from the centre, so a global mean would
cancel it), a small MLP to the 17 logits.

Headline accuracy (``balanced_accuracy``): per head the mean recall over the classes present
in the labels, then the mean over the heads. Players stand still and do nothing most of the
time, so plain accuracy would reward a model that always answers "still" and "none".
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from alaya.data.actions import NAVIGATION, ONE_SHOT, check_actions
from alaya.data.episodes import read_episode
from alaya.evaluation.metrics import frames_to_tensor
from alaya.nn.model_card import write_model_card
from alaya.nn.pretrained import from_pretrained, save_pretrained

HEADS = (*NAVIGATION, "one_shot")
NAV_CLASSES = ("negative", "still", "positive")
ONE_SHOT_CLASSES = ("none", *ONE_SHOT)
HEAD_SIZES = (len(NAV_CLASSES),) * len(NAVIGATION) + (len(ONE_SHOT_CLASSES),)


@dataclass
class IDMConfig:
    channels: tuple[int, ...] = (32, 64, 96, 96)
    size: int = 64
    pool: int = 4
    hidden: int = 64
    threshold: float = 1 / 3     # |navigation value| above this is a move


def load_episode(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """A gameplay episode file: ``rgb`` uint8 (S, T, H, W, 3), ``styles`` (S,) str, ``actions``
    float32 (T, 8), checked (``alaya.data.episodes.read_episode``). The one place this package
    reads episode files."""
    return read_episode(path)


def checked_episode(episode: dict, name: str = "episode") -> dict[str, np.ndarray]:
    """``episode`` with its ``rgb``, ``styles`` and ``actions`` checked against each other, or a
    ValueError naming the key at fault."""
    for key in ("rgb", "styles", "actions"):
        if key not in episode:
            raise ValueError(f"{name}: missing '{key}' (has {sorted(episode)})")
    rgb, styles = np.asarray(episode["rgb"]), np.asarray(episode["styles"])
    if rgb.dtype != np.uint8 or rgb.ndim != 5 or rgb.shape[-1] != 3 or rgb.shape[2] != rgb.shape[3]:
        raise ValueError(f"{name}: 'rgb' must be uint8 (S, T, H, W, 3) with H == W, got {rgb.dtype} {rgb.shape}")
    if styles.shape != rgb.shape[:1] or styles.dtype.kind != "U":
        raise ValueError(f"{name}: 'styles' must be str ({rgb.shape[0]},) like rgb's first axis, "
                         f"got {styles.dtype} {styles.shape}")
    actions = check_actions(episode["actions"], where=f"{name}: 'actions'")
    if actions.ndim != 2 or len(actions) != rgb.shape[1]:
        raise ValueError(f"{name}: 'actions' must be ({rgb.shape[1]}, 8) like rgb's time axis, got {actions.shape}")
    return {**episode, "rgb": rgb, "styles": styles, "actions": actions}


def action_classes(actions, threshold: float = 1 / 3) -> torch.Tensor:
    """(T, 5) class indices of (T, 8) action rows: navigation columns 0/1/2 for < -threshold /
    in between / > threshold, then the one-shot action (0 none, 1 jump ... 4 summon)."""
    a = check_actions(actions)
    a = a.reshape(-1, a.shape[-1])
    nav = 1 + (a[:, :len(NAVIGATION)] > threshold).astype(np.int64) - (a[:, :len(NAVIGATION)] < -threshold)
    shot = (a[:, len(NAVIGATION):] * np.arange(1, len(ONE_SHOT) + 1)).sum(1, keepdims=True).astype(np.int64)
    return torch.from_numpy(np.concatenate([nav, shot], 1))


def balanced_accuracy(pred: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean recall over the classes present in ``labels`` (1-d tensors of class indices)."""
    if pred.shape != labels.shape or labels.ndim != 1 or len(labels) == 0:
        raise ValueError(f"pred and labels: expected two non-empty (N,) tensors, got "
                         f"{tuple(pred.shape)} and {tuple(labels.shape)}")
    return float(np.mean([float((pred[labels == c] == c).float().mean()) for c in labels.unique()]))


def _stage(cin: int, c: int) -> list[nn.Module]:
    return [nn.Conv2d(cin, c, 3, 2, 1), nn.GroupNorm(min(8, c), c), nn.SiLU(), nn.Conv2d(c, c, 3, 1, 1), nn.SiLU()]


class InverseDynamics(nn.Module):
    def __init__(self, config: IDMConfig):
        super().__init__()
        stride = 2 ** len(config.channels)
        if not config.channels or config.size % stride:
            raise ValueError(f"IDMConfig.size must be a multiple of {stride} (2^len(channels)), got {config.size}")
        if not 1 <= config.pool <= config.size // stride:
            raise ValueError(f"IDMConfig.pool must be in [1, {config.size // stride}], got {config.pool}")
        self.config = config
        layers, cin = [], 9
        for c in config.channels:
            layers += _stage(cin, c)
            cin = c
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(cin * config.pool ** 2, config.hidden), nn.SiLU(),
                                  nn.Linear(config.hidden, sum(HEAD_SIZES)))

    def forward(self, prev: torch.Tensor, next: torch.Tensor) -> torch.Tensor:
        """Logits (N, 17) of frame pairs (N, 3, H, W) in [0, 1]; ``split`` cuts them per head."""
        if prev.shape != next.shape or prev.ndim != 4 or prev.shape[1] != 3:
            raise ValueError(f"prev and next: expected two (N, 3, H, W) tensors of one shape, got "
                             f"{tuple(prev.shape)} and {tuple(next.shape)}")
        s = self.config.size
        x = torch.cat([prev, next], 1).float()
        if x.shape[-2:] != (s, s):
            x = F.interpolate(x, size=(s, s), mode="area")
        a, b = x[:, :3], x[:, 3:]
        h = self.features(torch.cat([a * 2 - 1, b * 2 - 1, b - a], 1))        # (N, C, s/16, s/16)
        h = F.adaptive_avg_pool2d(h, self.config.pool).flatten(1)              # (N, C * pool²)
        return self.head(h)

    @staticmethod
    def split(logits: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Per-head logits: 4 × (N, 3), then (N, 5)."""
        return logits.split(HEAD_SIZES, dim=1)

    @torch.no_grad()
    def predict(self, prev, next, batch: int = 256) -> torch.Tensor:
        """(N, 5) predicted classes of uint8 frames (N, H, W, 3) or float images (N, 3, H, W)."""
        a, b = _as_images(prev), _as_images(next)
        out = []
        for i in range(0, len(a), batch):
            logits = self(a[i:i + batch], b[i:i + batch])
            out.append(torch.stack([z.argmax(1) for z in self.split(logits)], 1))
        return torch.cat(out)

    def save_pretrained(self, folder, **metadata) -> None:
        save_pretrained(self, folder, **metadata)

    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike | Path) -> "InverseDynamics":
        return from_pretrained(cls, IDMConfig, folder).eval()


def _as_images(frames) -> torch.Tensor:
    return frames_to_tensor(frames) if isinstance(frames, np.ndarray) else frames


def accuracy(model: InverseDynamics, frames_prev, frames_next, actions) -> dict[str, float]:
    """The IDM on frame pairs (uint8 (N, H, W, 3) or float (N, 3, H, W)) against the (N, 8)
    actions that took each ``prev`` to its ``next``: ``balanced_accuracy`` (the headline, see
    the module docstring), ``plain_accuracy`` (mean over heads), both per head, and
    ``recall_<class>`` of each one-shot class present (``none``, ``jump``, ``attack``, ...): which
    keys a world model's frames show, since one glow for every key can score on the head's mean."""
    labels = action_classes(actions, model.config.threshold)
    if len(labels) != len(frames_prev) or len(frames_prev) != len(frames_next):
        raise ValueError(f"frames_prev, frames_next and actions must have one length, got "
                         f"{len(frames_prev)}, {len(frames_next)}, {len(labels)}")
    was_training = model.training
    pred = model.eval().predict(frames_prev, frames_next).cpu()
    model.train(was_training)
    out: dict[str, float] = {}
    for j, head in enumerate(HEADS):
        out[f"balanced_accuracy_{head}"] = balanced_accuracy(pred[:, j], labels[:, j])
        out[f"accuracy_{head}"] = float((pred[:, j] == labels[:, j]).float().mean())
    out["balanced_accuracy"] = float(np.mean([out[f"balanced_accuracy_{h}"] for h in HEADS]))
    out["plain_accuracy"] = float(np.mean([out[f"accuracy_{h}"] for h in HEADS]))
    shot = len(HEADS) - 1
    for c, name in enumerate(ONE_SHOT_CLASSES):
        rows = labels[:, shot] == c
        if rows.any():
            out[f"recall_{name}"] = float((pred[rows, shot] == c).float().mean())
    return out


# --- training ---------------------------------------------------------------------------------

def resize_frames(frames: np.ndarray, size: int) -> np.ndarray:
    """uint8 (..., H, W, 3) area-resized to (..., size, size, 3); unchanged when H == W == size."""
    if frames.shape[-3:-1] == (size, size):
        return frames
    lead = frames.shape[:-3]
    flat = frames.reshape(-1, *frames.shape[-3:])
    out = [F.interpolate(frames_to_tensor(chunk), size=(size, size), mode="area")
           for chunk in np.array_split(flat, max(1, flat[..., 0].size // 2**22))]
    x = (torch.cat(out).clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1)
    return x.reshape(*lead, size, size, 3).numpy()


def _episodes(source, split: str, size: int) -> list[tuple[str, dict]]:
    """(name, checked episode, rgb resized to ``size`` on load) for a list of npz paths, or for
    ``source.ids(split)`` of a dataset with ``ids`` and ``load``."""
    if hasattr(source, "ids") and hasattr(source, "load"):
        items = [(str(i), lambda i=i: source.load(i)) for i in source.ids(split)]
    else:
        items = [(str(p), lambda p=p: load_episode(p)) for p in source]
    out = []
    for name, load in items:
        ep = checked_episode(load(), name)
        out.append((name, {"rgb": resize_frames(ep["rgb"], size), "actions": ep["actions"]}))
    return out


class _PairBank:
    """Frame pairs (t-1, t) of episodes resized to the IDM's size, with their action classes."""

    def __init__(self, episodes: list[tuple[str, dict]], size: int, threshold: float):
        if not episodes:
            raise ValueError("IDM training: no episodes")
        self.rgb = [resize_frames(ep["rgb"], size) for _, ep in episodes]
        self.labels = [action_classes(ep["actions"], threshold) for _, ep in episodes]
        self.index = np.array([(e, s, t) for e, rgb in enumerate(self.rgb)
                               for s in range(rgb.shape[0]) for t in range(1, rgb.shape[1])], np.int64)
        if not len(self.index):
            raise ValueError("IDM training: the episodes have no frame pairs (each needs >= 2 frames)")

    def get(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
        e, s, t = self.index[rows].T
        prev = np.stack([self.rgb[i][j, k - 1] for i, j, k in zip(e, s, t)])
        nxt = np.stack([self.rgb[i][j, k] for i, j, k in zip(e, s, t)])
        return prev, nxt, torch.stack([self.labels[i][k] for i, k in zip(e, t)])

    def class_weights(self) -> list[torch.Tensor]:
        """Per head, inverse class frequency over all pairs (mean 1 per sample)."""
        labels = torch.cat([lab[1:] for lab, rgb in zip(self.labels, self.rgb) for _ in range(rgb.shape[0])])
        out = []
        for j, n in enumerate(HEAD_SIZES):
            count = torch.bincount(labels[:, j], minlength=n).float()
            w = torch.where(count > 0, 1.0 / count.clamp(min=1), torch.zeros_like(count))
            out.append(w * len(labels) / (w * count).sum())
        return out


def _augment_pair(a: torch.Tensor, b: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One Gaussian blur per pair (generated frames are softer than real ones), independent noise."""
    sigma = torch.rand(len(a), generator=gen) * 1.2
    k = torch.arange(-3, 4, dtype=torch.float32)
    g = torch.exp(-k[None] ** 2 / (2 * sigma[:, None].clamp(min=0.3) ** 2))
    g = torch.where(sigma[:, None] > 0.3, g, (k[None] == 0).float())
    g = g / g.sum(1, keepdim=True)                                              # (N, 7)
    n, c, h, w = a.shape

    def blur(x):
        x = x.reshape(1, n * c, h, w)
        kern = g.repeat_interleave(c, 0)
        x = F.conv2d(F.pad(x, (3, 3, 0, 0), mode="replicate"), kern.view(n * c, 1, 1, 7), groups=n * c)
        x = F.conv2d(F.pad(x, (0, 0, 3, 3), mode="replicate"), kern.view(n * c, 1, 7, 1), groups=n * c)
        return x.reshape(n, c, h, w)

    noise = torch.rand(n, 1, 1, 1, generator=gen) * 0.03
    return ((blur(a) + noise * torch.randn(a.shape, generator=gen)).clamp(0, 1),
            (blur(b) + noise * torch.randn(b.shape, generator=gen)).clamp(0, 1))


def _split(episodes, val, size: int) -> tuple[list[tuple[str, dict]], list[tuple[str, dict]]]:
    """Training and validation episodes (see ``train_idm``)."""
    train = _episodes(episodes, "train", size)
    if val is not None:
        return train, _episodes(val, "val", size)
    if hasattr(episodes, "ids"):
        return train, _episodes(episodes, "val", size) or train
    n_val = len(train) // 10 or (1 if len(train) >= 2 else 0)
    return (train[:len(train) - n_val], train[len(train) - n_val:]) if n_val else (train, train)


def _rows_actions(episodes: list[tuple[str, dict]], bank: _PairBank, rows: np.ndarray) -> np.ndarray:
    """(N, 8) action rows of the pairs ``rows`` of ``bank``."""
    e, _, t = bank.index[rows].T
    return np.stack([episodes[i][1]["actions"][k] for i, k in zip(e, t)])


def _eval_set(episodes: list[tuple[str, dict]], config: IDMConfig, n: int, seed: int):
    """(prev, next, actions) of up to ``n`` random pairs of ``episodes``."""
    bank = _PairBank(episodes, config.size, config.threshold)
    rows = np.random.default_rng([seed, 1]).permutation(len(bank.index))[:n]
    prev, nxt, _ = bank.get(rows)
    return prev, nxt, _rows_actions(episodes, bank, rows)


def train_idm(episodes, out: str | os.PathLike, steps: int = 3000, batch_size: int = 64, *,
              val=None, config: IDMConfig | None = None, lr: float = 2e-3, seed: int = 0,
              val_pairs: int = 2048, val_every: int = 250, device: str | None = None,
              progress: bool = True) -> InverseDynamics:
    """Train an IDM on gameplay episodes and write it to ``out`` (weights, config.json,
    metrics.jsonl, MODEL_CARD.md).

    ``episodes``: npz paths, or a dataset with ``ids(split)`` / ``load(id)`` (its train split;
    its val split validates, its test split, if any, is measured at the end). ``val``:
    validation episodes (paths or dataset); by default the last tenth of the paths (at least
    one) when there are two or more, else the training episodes themselves. Cross-entropy per
    head with inverse-frequency class weights (what balanced accuracy rewards), Adam with a
    cosine learning rate, blur and noise on the inputs."""
    if steps < 1 or batch_size < 1:
        raise ValueError(f"steps and batch_size must be >= 1, got steps={steps}, batch_size={batch_size}")
    config = config or IDMConfig()
    train_eps, val_eps = _split(episodes, val, config.size)
    bank = _PairBank(train_eps, config.size, config.threshold)
    val_set = _eval_set(val_eps, config, val_pairs, seed)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(seed)
    model = InverseDynamics(config).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 0.5 * (1 + math.cos(math.pi * min(i / steps, 1.0))))
    weights = [w.to(device) for w in bank.class_weights()]
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0, val_metrics = time.perf_counter(), {}
    with open(out / "metrics.jsonl", "w") as log:
        bar = tqdm(range(1, steps + 1), desc="train idm", disable=not progress, dynamic_ncols=True)
        for step in bar:
            prev, nxt, labels = bank.get(rng.integers(len(bank.index), size=batch_size))
            a, b = _augment_pair(frames_to_tensor(prev), frames_to_tensor(nxt), gen)
            logits, labels = model(a.to(device), b.to(device)), labels.to(device)
            loss = sum(F.cross_entropy(z, labels[:, j], weight=weights[j])
                       for j, z in enumerate(model.split(logits))) / len(HEADS)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            row = {"step": step, "loss": loss.item(), "elapsed_s": time.perf_counter() - t0}
            if step % val_every == 0 or step == steps:
                val_metrics = accuracy(model, *(_to(x, device) for x in val_set))
                row.update({f"val_{k}": v for k, v in val_metrics.items()})
                bar.set_postfix(loss=f"{loss.item():.3f}", val=f"{val_metrics['balanced_accuracy']:.3f}")
            log.write(json.dumps(row) + "\n")
    model = model.cpu().eval()
    metrics = {"val": val_metrics}
    if hasattr(episodes, "ids") and episodes.ids("test"):
        test_eps = _episodes(episodes, "test", config.size)
        metrics["test"] = accuracy(model, *_eval_set(test_eps, config, val_pairs, seed))
    source = getattr(episodes, "root", "an episode dataset") if hasattr(episodes, "ids") else "npz files"
    data = f"{len(train_eps)} episodes of {source} ({len(bank.index)} frame pairs), {len(val_eps)} for validation"
    model.save_pretrained(out, trained={"steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed,
                                        "data": data, "run_dir": str(out), "pairs": len(bank.index),
                                        "device": device, "train_episodes": [n for n, _ in train_eps],
                                        "val_episodes": [n for n, _ in val_eps]}, metrics=metrics)
    _write_card(out, data, device, len(val_set[0]), len(val_eps), val_metrics)
    return model


def _to(x: np.ndarray, device: str):
    """Frames go to ``device`` as float images (the model lives there); actions stay numpy."""
    return frames_to_tensor(x).to(device) if x.dtype == np.uint8 else x


def _write_card(out: Path, data: str, device: str, pairs: int, episodes: int, val: dict[str, float]) -> None:
    hardware = torch.cuda.get_device_name() if device.startswith("cuda") else f"{platform.machine()} CPU"
    notes = ["## Validation", "",
             f"{pairs} frame pairs of {episodes} held-out episodes; trained on {hardware}. Headline "
             "`balanced_accuracy`: per head the mean recall over the classes present in the labels, "
             "then the mean over the 5 heads (forward, strafe, turn, pitch: < -1/3 / between / > 1/3; "
             "one_shot: none / jump / attack / spell / summon). Chance is 1/3 per navigation head, "
             "1/5 for one_shot.", "",
             "| metric | value |", "|---|---|", *[f"| {k} | {v:.4g} |" for k, v in val.items()]]
    write_model_card(out, "Inverse-dynamics model",
                     "Predicts the action that took frame t-1 to frame t; `alaya eval world` compares "
                     "its accuracy on generated and on real frame pairs.",
                     "from alaya.evaluation.inverse_dynamics import InverseDynamics, accuracy\n"
                     f"idm = InverseDynamics.from_pretrained({str(out)!r})\n"
                     "classes = idm.predict(frames_prev, frames_next)   # (N, 5), uint8 (N, H, W, 3) in",
                     data, "\n".join(notes))

"""The training loop shared by every model: cosine LR with warm-up, gradient clipping, EMA,
optional bf16 autocast, periodic validation, CSV metrics, checkpoints that resume after a kill.

The caller supplies ``loss_fn(model, index) -> (loss, {metric: float})`` (which draws its own
batch, deterministically from ``index``) and optionally ``validate(model) -> {metric: float}``,
called with the EMA weights when EMA is on. A run folder holds ``config.json`` (resolved),
``metrics.jsonl`` (plotted to ``metrics.png`` at every checkpoint), ``latest.json`` + ``ckpt_*/``.

Under ``torchrun`` the same loop runs data-parallel (DistributedDataParallel, gloo on CPU, nccl
on GPU): ``index = step * world_size + rank``, so every rank draws different batches and a
single process sees exactly the batches of ``index = step``. Rank 0 logs, validates and writes
checkpoints; all ranks resume from them.

Devices (``TrainConfig.device``): ``"auto"`` trains on CUDA when torch sees a GPU (under
torchrun, GPU ``LOCAL_RANK``) and on the CPU otherwise; ``"cpu"`` and ``"cuda"`` force one. A
recipe that puts its batches on the model's device (``batch_to``, or drawing them there) says so with
``Trainer(..., on_any_device=True)``; the others train on the CPU whatever ``device`` says, and
``"cuda"`` is refused for them with the recipe named. Checkpoints hold CPU tensors, so a run
resumes on either, and the trained model comes back on the CPU.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from alaya.hardware import cpu_info
from alaya.io import atomic_write_text
from alaya.train import distributed
from alaya.train.checkpoint import load_checkpoint, save_checkpoint
from alaya.train.plots import plot_metrics

LossFn = Callable[[torch.nn.Module, int], tuple[torch.Tensor, dict[str, float]]]
ValFn = Callable[[torch.nn.Module], dict[str, float]]


@dataclass
class TrainConfig:
    run_dir: str
    steps: int = 2000
    batch_size: int = 32
    lr: float = 1e-3
    min_lr_ratio: float = 0.05
    warmup: int = 100
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    ema: float = 0.0                 # EMA decay; 0 disables
    bf16: bool = False               # autocast (a win on CPUs with native bf16 only)
    log_every: int = 25
    val_every: int = 250
    ckpt_every: int = 250
    seed: int = 0
    threads: int | None = None
    progress: bool = True
    device: str = "auto"             # "auto" (CUDA when available), "cpu", "cuda" or "cuda:N"

    def lr_at(self, step: int) -> float:
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        t = (step - self.warmup) / max(1, self.steps - self.warmup)
        return self.lr * (self.min_lr_ratio + (1 - self.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * t)))


def resolve_device(name: str, on_any_device: bool = True, recipe: str = "this recipe") -> torch.device:
    """The device a run trains on; ``"auto"`` is CUDA when torch sees a GPU (GPU ``LOCAL_RANK``
    under torchrun), else the CPU. Recipes that do not move their batches stay on the CPU."""
    if name == "auto":
        name = "cuda" if on_any_device and torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise ValueError(f"TrainConfig.device: '{name}' is not a device (use auto, cpu, cuda or cuda:N)") from err
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"TrainConfig.device: '{name}' is not supported (use auto, cpu, cuda or cuda:N)")
    if device.type == "cuda":
        if not on_any_device:
            raise ValueError(f"TrainConfig.device is '{name}', but {recipe} trains on the CPU only")
        if not torch.cuda.is_available():
            raise ValueError(f"TrainConfig.device is '{name}', but torch sees no CUDA device")
        if device.index is None:
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device


def module_device(module: torch.nn.Module) -> torch.device:
    return next(module.parameters()).device


def batch_to(module: torch.nn.Module, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``tensors`` moved to the device of ``module``'s parameters (a no-op on the CPU)."""
    device = module_device(module)
    return tuple(t.to(device, non_blocking=True) for t in tensors)


class Trainer:
    def __init__(self, model: torch.nn.Module, config: TrainConfig, loss_fn: LossFn,
                 validate: ValFn | None = None, describe: dict | None = None, on_any_device: bool = False):
        self.model, self.config, self.loss_fn, self.validate = model, config, loss_fn, validate
        self.device = resolve_device(config.device, on_any_device, type(model).__name__ + "'s recipe")
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            torch.backends.cudnn.benchmark = True     # batches keep their shapes: tune convolutions once
        self.dist = distributed.setup(self.device.type)
        model.to(self.device)
        self.run_dir = Path(config.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad],
                                     lr=config.lr, weight_decay=config.weight_decay)
        self.ema = copy.deepcopy(model).eval().requires_grad_(False) if config.ema > 0 else None
        self.step = 0
        self.describe = describe or {}
        self.last_val: dict[str, float] = {}

    @property
    def eval_model(self) -> torch.nn.Module:
        return self.ema if self.ema is not None else self.model

    def _log(self, row: dict) -> None:
        if not self.dist.is_main:
            return
        with open(self.run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")

    def _truncate_log(self, step: int) -> None:
        """Drop metric rows written after the checkpoint a resumed run starts from."""
        path = self.run_dir / "metrics.jsonl"
        if not path.exists():
            return
        rows = []
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:      # a line cut short by a kill
                continue
        atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in rows if r.get("step", 0) <= step))

    def run(self) -> torch.nn.Module:
        cfg = self.config
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        info = self.dist
        if cfg.bf16 and self.device.type == "cpu" and cpu_info()[1] is False and info.is_main:
            warnings.warn("--bf16 on a CPU without native bf16 (no avx512_bf16 / amx_bf16): autocast is "
                          "emulated and slower than fp32 here; drop --bf16", stacklevel=2)
        if info.is_main:
            atomic_write_text(self.run_dir / "config.json", json.dumps(
                {"train": dataclasses.asdict(cfg), "world_size": info.world_size, **self.describe},
                indent=2, default=str))
        distributed.barrier(info)
        state = load_checkpoint(self.run_dir, self.model, self.opt, self.ema)
        if state is not None:
            self.step = state["step"]
            self.last_val = state.get("val", {})
            if info.is_main:
                self._truncate_log(self.step)
        distributed.broadcast_module(self.model, info)
        if self.ema is not None:
            distributed.broadcast_module(self.ema, info)
        train_model = self.model
        if info.world_size > 1:
            train_model = torch.nn.parallel.DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        bar = tqdm(total=cfg.steps, initial=self.step, desc=self.run_dir.name,
                   disable=not (cfg.progress and info.is_main), dynamic_ncols=True)
        self.model.train()
        t0 = time.time()
        while self.step < cfg.steps:
            for group in self.opt.param_groups:
                group["lr"] = cfg.lr_at(self.step)
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=cfg.bf16):
                loss, metrics = self.loss_fn(train_model, self.step * info.world_size + info.rank)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"step {self.step}: loss is {loss.item()}; "
                                         f"last checkpoint in {self.run_dir}")
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
            self.opt.step()
            if self.ema is not None:
                with torch.no_grad():
                    for pe, pm in zip(self.ema.parameters(), self.model.parameters()):
                        pe.lerp_(pm, 1 - cfg.ema)
                    for be, bm in zip(self.ema.buffers(), self.model.buffers()):
                        be.copy_(bm)
            self.step += 1
            bar.update()
            if self.step % cfg.log_every == 0 or self.step == cfg.steps:
                row = {"step": self.step, "loss": float(loss.detach()), "grad_norm": float(grad_norm),
                       "lr": cfg.lr_at(self.step - 1), "elapsed_s": round(time.time() - t0, 3),
                       **{k: float(v) for k, v in metrics.items()}}
                if (self.validate is not None and info.is_main
                        and (self.step % cfg.val_every == 0 or self.step == cfg.steps)):
                    self.model.eval()
                    with torch.no_grad():
                        self.last_val = {f"val_{k}": float(v) for k, v in self.validate(self.eval_model).items()}
                    self.model.train()
                    row.update(self.last_val)
                self._log(row)
                bar.set_postfix({k: f"{v:.4g}" for k, v in row.items()
                                 if k in ("loss", *self.last_val)})
            if self.step % cfg.ckpt_every == 0 or self.step == cfg.steps:
                if info.is_main:
                    save_checkpoint(self.run_dir, self.step, self.model, self.opt, self.ema,
                                    {"val": self.last_val})
                    plot_metrics(self.run_dir)
                distributed.barrier(info)
        bar.close()
        self.model.to("cpu")
        if self.ema is not None:
            self.ema.to("cpu")
        return self.eval_model

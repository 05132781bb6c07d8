"""Training checkpoints in safetensors (never pickles): model, EMA and optimizer state.

A checkpoint is a folder ``ckpt_<step>/`` written completely before ``latest.json`` is
atomically pointed at it, so a run killed at any moment resumes from the last complete one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file

from alaya.io import atomic_save_tensors, atomic_write_text


def optimizer_tensors(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    sd = opt.state_dict()
    tensors, scalars = {}, {}
    for idx, state in sd["state"].items():
        for name, value in state.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{idx}.{name}"] = value
            else:
                scalars[f"{idx}.{name}"] = value
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def load_optimizer(opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], meta: dict) -> None:
    state: dict[int, dict] = {}
    for key, value in tensors.items():
        _, idx, name = key.split(".", 2)
        state.setdefault(int(idx), {})[name] = value
    for key, value in meta["scalars"].items():
        idx, name = key.split(".", 1)
        state.setdefault(int(idx), {})[name] = value
    opt.load_state_dict({"state": state, "param_groups": meta["param_groups"]})


def save_checkpoint(run_dir: Path, step: int, model: torch.nn.Module, opt: torch.optim.Optimizer,
                    ema: torch.nn.Module | None, extra: dict, keep: int = 2) -> Path:
    folder = run_dir / f"ckpt_{step:07d}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    atomic_save_tensors(folder / "model.safetensors", model.state_dict())
    if ema is not None:
        atomic_save_tensors(folder / "ema.safetensors", ema.state_dict())
    tensors, meta = optimizer_tensors(opt)
    atomic_save_tensors(folder / "optimizer.safetensors", tensors)
    atomic_write_text(folder / "state.json", json.dumps({"step": step, "optimizer": meta, **extra}))
    atomic_write_text(run_dir / "latest.json", json.dumps({"step": step, "folder": folder.name}))
    old = sorted(p for p in run_dir.glob("ckpt_*") if p.is_dir() and p != folder)
    for p in old[: max(0, len(old) - (keep - 1))]:
        shutil.rmtree(p, ignore_errors=True)
    return folder


def load_checkpoint(run_dir: Path, model: torch.nn.Module, opt: torch.optim.Optimizer,
                    ema: torch.nn.Module | None) -> dict | None:
    """Restore the latest complete checkpoint of ``run_dir``; its state.json, or None."""
    pointer = run_dir / "latest.json"
    if not pointer.exists():
        return None
    folder = run_dir / json.loads(pointer.read_text())["folder"]
    state = json.loads((folder / "state.json").read_text())
    model.load_state_dict(load_file(str(folder / "model.safetensors")))
    if ema is not None and (folder / "ema.safetensors").exists():
        ema.load_state_dict(load_file(str(folder / "ema.safetensors")))
    load_optimizer(opt, load_file(str(folder / "optimizer.safetensors")), state["optimizer"])
    return state

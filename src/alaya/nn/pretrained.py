"""``save_pretrained`` / ``from_pretrained``: safetensors weights + config.json, atomically.

A folder holds ``config.json`` ({"class": ..., "config": {...}, plus free metadata}) and
``model.safetensors``. Loading never unpickles anything.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, TypeVar

import torch
from safetensors.torch import load_file

from alaya.io import atomic_save_tensors, atomic_write_text

T = TypeVar("T", bound=torch.nn.Module)


def save_pretrained(model: torch.nn.Module, folder: str | os.PathLike, dtype: torch.dtype | None = None,
                    **metadata: Any) -> Path:
    """Write ``model`` (which has a dataclass ``config``) to ``folder``; with ``dtype`` (e.g.
    float16, half the bytes of a shipped model) its floating-point tensors are stored in it, and
    ``from_pretrained`` casts them back to the model's own dtype."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = dataclasses.asdict(model.config)
    state = model.state_dict()
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
        metadata = {**metadata, "stored_dtype": str(dtype).removeprefix("torch.")}
    atomic_save_tensors(folder / "model.safetensors", state)
    atomic_write_text(folder / "config.json", json.dumps(
        {"class": type(model).__name__, "config": config, **metadata}, indent=2, sort_keys=True))
    return folder


def read_config(folder: str | os.PathLike) -> dict:
    path = Path(folder) / "config.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing (expected a save_pretrained folder)")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: invalid JSON: {e}") from e


def from_pretrained(cls: type[T], config_cls: type, folder: str | os.PathLike) -> T:
    """Build ``cls(config_cls(**config))`` and load its safetensors weights strictly."""
    folder = Path(folder)
    meta = read_config(folder)
    if meta.get("class") != cls.__name__:
        raise ValueError(f"{folder}/config.json: holds a {meta.get('class')!r}, not a {cls.__name__}")
    fields = {f.name for f in dataclasses.fields(config_cls)}
    raw = meta.get("config", {})
    unknown = set(raw) - fields
    if unknown:
        raise ValueError(f"{folder}/config.json: unknown config keys {sorted(unknown)}")
    config = config_cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})
    model = cls(config)
    weights = folder / "model.safetensors"
    if not weights.exists():
        raise FileNotFoundError(f"{weights}: missing")
    state = load_file(str(weights))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(f"{weights}: missing keys {missing[:5]}, unexpected keys {unexpected[:5]}")
    return model


def copy_matching(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> list[str]:
    """Copy every tensor of ``state`` whose name and shape ``module`` shares; returns their names."""
    own = module.state_dict()
    copied = [k for k, v in state.items() if k in own and own[k].shape == v.shape]
    with torch.no_grad():
        for k in copied:
            own[k].copy_(state[k])
    return copied

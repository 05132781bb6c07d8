"""Data-parallel training by configuration: run the same command under ``torchrun`` and every
rank joins one process group (gloo on CPU, nccl on CUDA). Nothing else changes."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup(device_type: str = "cpu") -> DistInfo:
    """Join the process group when launched by torchrun (WORLD_SIZE > 1); else single process.
    The backend follows the device the ranks train on: nccl for CUDA, gloo for the CPU."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    return DistInfo(dist.get_rank(), dist.get_world_size())


def barrier(info: DistInfo) -> None:
    if info.world_size > 1:
        dist.barrier()


def broadcast_module(module: torch.nn.Module, info: DistInfo) -> None:
    """Make every rank start from rank 0's parameters and buffers."""
    if info.world_size > 1:
        for t in list(module.parameters()) + list(module.buffers()):
            dist.broadcast(t.data, 0)

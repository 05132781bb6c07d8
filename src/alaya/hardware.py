"""What the machine is: the CPU's model and whether it has native bf16, for choices and records;
a process's resident memory (``rss_mb``, for the benches' memory-growth lines) and the cores it
may run on (``usable_cores``).

On a CPU without native bf16 arithmetic (``avx512_bf16``, ``amx_bf16``; ``bf16`` on ARM), torch's
bf16 autocast is emulated and slower than fp32; with it, faster (docs/teacher.md has the
measurements). Benches pick bf16 by ``wants_bf16``; runs record ``hardware_line`` in their
model cards.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def usable_cores() -> int:
    """The cores this process may run on (its affinity, e.g. a container's CPU set), else all."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def rss_mb(pid: int | str = "self") -> float:
    """Resident memory of a process (default this one) in MB, from /proc (NaN where there is none)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def cpu_info(path: str = "/proc/cpuinfo") -> tuple[str, bool | None]:
    """(model name, whether the CPU has native bf16 arithmetic) from ``path``; ("", None) where it
    cannot be read (not Linux)."""
    try:
        text = Path(path).read_text()
    except OSError:
        return "", None
    name = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "")
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith(("flags", "Features"))), [])
    return name, any(f in flags for f in ("avx512_bf16", "amx_bf16", "bf16"))


def wants_bf16(choice: str) -> bool:
    """A bench's ``auto`` / ``on`` / ``off`` choice for bf16: ``auto`` where the CPU has native bf16."""
    if choice not in ("auto", "on", "off"):
        raise ValueError(f"bf16 choice must be auto, on or off, got '{choice}'")
    return choice == "on" or (choice == "auto" and bool(cpu_info()[1]))


def hardware_line(device: torch.device, bf16: bool, world_size: int = 1) -> str:
    """What a run trained on, for its model card: e.g. '1 x NVIDIA H200, PyTorch 2.11.0, bf16 autocast'."""
    import torch
    precision = "bf16 autocast" if bf16 else "fp32"
    if device.type == "cuda":
        return f"{world_size} x {torch.cuda.get_device_name(device)}, PyTorch {torch.__version__}, {precision}"
    name, native = cpu_info()
    about = f" ({name}{', native bf16' if native else ', no native bf16' if native is False else ''})" if name else ""
    return (f"{world_size} x {os.cpu_count()}-core {platform.machine()} CPU{about}, PyTorch {torch.__version__}, "
            f"{precision}")

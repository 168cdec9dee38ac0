"""The devices of this machine a model can run on, as the server's `initialize` answer and `agentrl doctor` describe
them: the CPU (its name, cores and memory) and every CUDA GPU torch sees (its name and memory)."""

from __future__ import annotations

import os
import platform
from typing import Any


def describe_devices() -> dict[str, Any]:
    cpu: dict[str, Any] = {"name": platform.processor() or platform.machine(), "cores": os.cpu_count() or 1}
    try:
        cpu["memoryBytes"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        pass
    gpus = []
    try:
        import torch

        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            gpus.append({"name": props.name, "memoryBytes": int(props.total_memory)})
    except ImportError:
        pass
    return {"cpu": cpu, "gpus": gpus}

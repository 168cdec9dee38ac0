"""What a device can do, from its maker's data sheet, and how far below it a figure is a warning."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DevicePeak:
    """A GPU's dense bf16 tensor-core peak and its memory bandwidth, from its maker's data sheet."""

    name: str
    bf16_tflops: float
    bandwidth_tb_s: float


# Matched against torch.cuda.get_device_name in this order (the first that the name contains): a more specific name
# before the one it contains ("H100 PCIe" before "H100", "L40S" before "L4").
KNOWN_GPUS: list[tuple[tuple[str, ...], DevicePeak]] = [
    (("H200",), DevicePeak("H200", 989.0, 4.8)),
    (("H100", "PCIe"), DevicePeak("H100 PCIe", 756.0, 2.0)),
    (("H100", "NVL"), DevicePeak("H100 NVL", 835.0, 3.9)),
    (("H100",), DevicePeak("H100 SXM", 989.0, 3.35)),
    (("B200",), DevicePeak("B200", 2250.0, 8.0)),
    (("A100", "80GB", "PCIe"), DevicePeak("A100 80GB PCIe", 312.0, 1.935)),
    (("A100", "80GB"), DevicePeak("A100 80GB SXM", 312.0, 2.039)),
    (("A100",), DevicePeak("A100 40GB", 312.0, 1.555)),
    (("L40S",), DevicePeak("L40S", 362.0, 0.864)),
    (("L40",), DevicePeak("L40", 181.0, 0.864)),
    (("L4",), DevicePeak("L4", 121.0, 0.3)),
]

# Below these shares of the bound a figure is a warning: the work ran, but far slower than this device should run
# it (throttled, shared with another job, or fallen onto a slow path). They are set from what such code reaches on
# published hardware, not yet from a run of this check on a GPU. The hf engine runs one Python step per token, so
# its decode is bound by kernel launches long before memory: a few percent of the bandwidth bound is normal for it.
MATMUL_FLOOR = 0.5
HF_DECODE_FLOOR = 0.005
VLLM_DECODE_FLOOR = 0.05
LEARNER_FLOOR = 0.1
# Peak memory above this share of the device leaves a run little room for longer episodes.
MEMORY_HEADROOM = 0.9


def device_peak(name: str) -> DevicePeak | None:
    """The table's entry for a device name, or None: an unknown GPU, or a MIG slice (a share of a GPU's peak)."""
    if "MIG" in name:
        return None
    for words, peak in KNOWN_GPUS:
        if all(word in name for word in words):
            return peak
    return None

"""bfloat16 where the hardware multiplies it, float32 elsewhere: what `auto` means for `train.bf16_autocast` and
`rollout.vllm_dtype`. Torch only (TRL's comparison script imports it from its own environment)."""

from __future__ import annotations

import torch


def bfloat16_is_native(device: torch.device) -> bool:
    """Whether this device multiplies bfloat16 matrices in hardware: CUDA GPUs that support it, and CPUs with the
    AVX-512 or AMX instructions oneDNN's bfloat16 kernels need. Elsewhere torch falls back to scalar loops: on a
    2-core AVX2 EPYC, a 2048x576 by 576x1536 product took 3.1 s in bfloat16 against 0.07 s in float32, and vLLM
    sampled SmolLM2-135M 3.5x slower in bfloat16 than in float32 (21 against 74 tokens/s)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return False


def uses_bf16_autocast(setting: bool | str, device: torch.device) -> bool:
    """train.bf16_autocast resolved: true and false as written, auto where `bfloat16_is_native`."""
    if setting == "auto":
        return bfloat16_is_native(device)
    return bool(setting)

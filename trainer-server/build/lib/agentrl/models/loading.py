"""Model backend: a transformers causal LM from a local path (or a built-in), on CPU or CUDA,
optionally with LoRA adapters. Nothing here ever reaches a model hub."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported anywhere below

import torch  # noqa: E402

from agentrl.run.config import ModelConfig  # noqa: E402

BUILTIN_MODELS = ("tiny", "smollm2")


def text_config(model: Any) -> Any:
    """The language model's config (multimodal configs nest it)."""
    config = model.config
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def resolve_device(requested: str) -> torch.device:
    if requested == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("model.device is 'cuda' but torch sees no CUDA device (is a CUDA build of torch installed?)")
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)


def resolve_dtype(requested: str, device: torch.device) -> torch.dtype:
    if requested == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[requested]


def _load_local(path: str, dtype: torch.dtype, attn: str) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    location = Path(path).expanduser()
    if not location.exists():
        raise FileNotFoundError(
            f"model.path {path!r} does not exist; give a local model directory or .gguf file, or a built-in: "
            f"{', '.join(BUILTIN_MODELS)}"
        )
    if location.is_file() and location.suffix == ".gguf":
        kwargs: dict[str, Any] = {"gguf_file": location.name, "local_files_only": True}
        tokenizer = AutoTokenizer.from_pretrained(location.parent, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(location.parent, dtype=dtype, attn_implementation=attn, **kwargs)
    else:
        tokenizer = AutoTokenizer.from_pretrained(location, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            location, dtype=dtype, attn_implementation=attn, local_files_only=True
        )
    return model, tokenizer


def load_policy(cfg: ModelConfig, seed: int) -> tuple[Any, Any, torch.device]:
    """(model, tokenizer, device). The model is in train mode, on its device, in its dtype."""
    device = resolve_device(cfg.device)
    dtype = resolve_dtype(cfg.dtype, device)
    if cfg.path == "tiny":
        from agentrl.models.tiny import build_tiny_model_and_tokenizer

        model, tokenizer = build_tiny_model_and_tokenizer(cfg.tiny_layers, cfg.tiny_hidden, seed, cfg.tiny_head_dim)
        model = model.to(dtype)
    elif cfg.path == "smollm2":
        from agentrl.models.smollm2 import load_smollm2

        model, tokenizer = load_smollm2(dtype)
    else:
        model, tokenizer = _load_local(cfg.path, dtype, cfg.attn_implementation)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    if cfg.lora.enabled:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(
            model,
            LoraConfig(
                r=cfg.lora.r,
                lora_alpha=cfg.lora.alpha,
                lora_dropout=cfg.lora.dropout,
                target_modules=cfg.lora.target_modules,
                task_type="CAUSAL_LM",
            ),
        )
    model.to(device)
    model.train()
    return model, tokenizer, device

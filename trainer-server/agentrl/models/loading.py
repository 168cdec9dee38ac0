"""Model backend: a transformers causal LM from a local folder, a .gguf file, a Hugging Face Hub id or a built-in,
on CPU or CUDA, optionally with LoRA adapters. Only a Hub id missing from the local Hub cache reaches the Hub, and
only when the Hub is not switched off (HF_HUB_OFFLINE)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from agentrl.contract.config import BUILTIN_MODELS, HUB_ID, ModelConfig


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


def _pretrained(source: str | Path, dtype: torch.dtype, attn: str, **kwargs: Any) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
    return AutoModelForCausalLM.from_pretrained(source, dtype=dtype, attn_implementation=attn, **kwargs), tokenizer


def _load_from_hub(model_id: str, dtype: torch.dtype, attn: str) -> tuple[Any, Any]:
    """From the local Hub cache if it is there (no network at all), else downloaded into it."""
    from huggingface_hub import constants

    try:
        return _pretrained(model_id, dtype, attn, local_files_only=True)
    except OSError:
        if constants.HF_HUB_OFFLINE:
            raise FileNotFoundError(
                f"model.path {model_id!r} is a Hugging Face Hub id that is not in this machine's Hub cache, and the "
                f"Hub is switched off here (HF_HUB_OFFLINE): download it where the Hub is reachable "
                f"(`hf download {model_id}`), or give a local folder"
            ) from None
    try:
        return _pretrained(model_id, dtype, attn)
    except OSError as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise FileNotFoundError(
            f"model.path {model_id!r}: not in the local Hub cache and not fetched from the Hub ({reason}); "
            f"download it (`hf download {model_id}`) or give a local folder"
        ) from None


def _load_path(path: str, dtype: torch.dtype, attn: str) -> tuple[Any, Any]:
    location = Path(path).expanduser()
    if location.exists():
        if location.is_file() and location.suffix == ".gguf":
            return _pretrained(location.parent, dtype, attn, gguf_file=location.name, local_files_only=True)
        if location.is_dir() and any((location / name).is_file() for name in ("config.json", "adapter_config.json")):
            return _pretrained(location, dtype, attn, local_files_only=True)  # a model, or a LoRA adapter on its base
        what = "a folder without config.json" if location.is_dir() else "not a folder nor a .gguf file"
        raise FileNotFoundError(
            f"model.path {path!r} is {what}: give a model folder as transformers' save_pretrained writes it "
            "(config.json, the weights, the tokenizer), a .gguf file, a Hugging Face Hub id (namespace/name), or a "
            f"built-in: {', '.join(BUILTIN_MODELS)}"
        )
    if HUB_ID.fullmatch(path):
        return _load_from_hub(path, dtype, attn)
    raise FileNotFoundError(
        f"model.path {path!r} does not exist; give a local model folder or .gguf file, a Hugging Face Hub id "
        f"(namespace/name), or a built-in: {', '.join(BUILTIN_MODELS)}"
    )


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
        model, tokenizer = _load_path(cfg.path, dtype, cfg.attn_implementation)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if cfg.gradient_checkpointing:
        # Non-reentrant, named (older transformers defaulted to reentrant): the learner's shared prefix
        # (models/prefix.py) reaches the checkpointed layers through their cache, whose gradient only this form carries.
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
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

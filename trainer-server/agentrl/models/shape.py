"""A model's shape, read from its config.json without loading it: what the memory plan counts
(agentrl/learning/memory_plan.py).

The file may come from anyone who can upload an env bundle to the server, so it is read with bounds: a regular file
of at most MAX_CONFIG_BYTES, JSON nested no deeper than the interpreter's recursion limit, and sizes that are whole
numbers from 1 to MAX_SIZE. One that breaks them is a ModelConfigInvalid, which says which bound and why, where a
1e308 hidden size overflowed the plan's arithmetic and 5,000 nested brackets the JSON reader (both internal errors of
`config/memoryPlan` and `run/start`).
"""

from __future__ import annotations

import json
import os
import reprlib
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.contract.config import HUB_ID, ConfigError, RunConfig, model_source

# Real config.json files are a few kilobytes; the largest (a label table, a quantizer's per-module settings) a few
# hundred.
MAX_CONFIG_BYTES = 4 << 20
# The largest vocabulary, hidden size, layer or head count the plan takes: over 60 times any released model's, and
# small enough that the plan's products of them stay well inside a float.
MAX_SIZE = 1 << 24
# How a message shows a value it refuses: a long string, number or list cut, a nested value one level deep.
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxlong = _SHORT.maxother = 40
_SHORT.maxlevel = 1
_shown = _SHORT.repr


class ModelConfigInvalid(ConfigError):  # noqa: N818 - a ConfigError, named for what is wrong
    """The model's config.json breaks a bound (too large, not JSON, nested too deep, a size out of range): `run/start`
    refuses the run with it, `config/memoryPlan` says it as the reason there is no plan."""


def _size(config: dict[str, Any], key: str, default: int | None = None) -> int:
    value = config.get(key)
    if value is None:
        if default is None:
            raise KeyError(key)  # not a decoder's shape: no plan, but nothing wrong with the file
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SIZE:
        raise ValueError(f"{key} is {_shown(value)}; it must be a whole number from 1 to {MAX_SIZE:,}")
    return value


@dataclass(frozen=True)
class ModelShape:
    """A dense decoder-only transformer's sizes, as its config.json names them."""

    model_type: str
    vocab: int
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ModelShape:
        """KeyError for a size a decoder's shape needs that the config lacks; ValueError for one out of bounds."""
        text = config.get("text_config") or config  # multimodal configs nest the language model's
        if not isinstance(text, dict):
            raise ValueError(f"text_config is {_shown(text)}, not an object")
        model_type = text.get("model_type") or config.get("model_type") or "unknown"
        if not isinstance(model_type, str):
            raise ValueError(f"model_type is {_shown(model_type)}, not a name")
        hidden, heads = _size(text, "hidden_size"), _size(text, "num_attention_heads")
        if heads > hidden:
            raise ValueError(f"num_attention_heads ({heads:,}) is more than hidden_size ({hidden:,})")
        return cls(
            model_type=model_type,
            vocab=_size(text, "vocab_size"),
            hidden=hidden,
            intermediate=_size(text, "intermediate_size", 4 * hidden),
            layers=_size(text, "num_hidden_layers"),
            heads=heads,
            kv_heads=_size(text, "num_key_value_heads", heads),
            head_dim=_size(text, "head_dim", hidden // heads),
            tied=bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", True))),
        )

    def module_shapes(self) -> dict[str, tuple[int, int]]:
        """Each layer's linear modules, (in, out), by the names LoRA's target_modules use."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        h, i = self.hidden, self.intermediate
        return {
            "q_proj": (h, q),
            "k_proj": (h, kv),
            "v_proj": (h, kv),
            "o_proj": (q, h),
            "gate_proj": (h, i),
            "up_proj": (h, i),
            "down_proj": (i, h),
        }

    def layer_linear_parameters(self) -> int:
        return sum(a * b for a, b in self.module_shapes().values())

    def parameters(self) -> int:
        embeddings = self.vocab * self.hidden * (1 if self.tied else 2)
        norms = 2 * self.hidden
        return embeddings + self.layers * (self.layer_linear_parameters() + norms) + self.hidden


def read_config_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`, or None where there is no such file; a ValueError saying which bound it breaks. A
    link is followed (the Hub cache links its files), a FIFO is refused without waiting for a writer."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as err:
        raise ValueError(f"it cannot be read ({err.strerror})") from None
    with open(fd, "rb") as file:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise ValueError("it is not a regular file")
        data = file.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ValueError(f"it is larger than {MAX_CONFIG_BYTES >> 20} MiB")
    try:
        found = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError("it nests too deep to read") from None
    except ValueError as err:  # UnicodeDecodeError is one, and an integer of more digits than Python converts
        raise ValueError(f"it is not JSON ({err})") from None
    if not isinstance(found, dict):
        raise ValueError(f"it holds {_shown(found)}, not an object")
    return found


def model_shape(config: RunConfig, base_dir: Path) -> tuple[ModelShape | None, str]:
    """The model's shape without loading its weights, and where it was read; None (and why) when it cannot be read:
    a .gguf file without a config.json beside it, a Hub id not in the local Hub cache, a missing folder, a config
    that is not a decoder's. ModelConfigInvalid when the config.json breaks a bound."""
    model = config.model
    if model.path == "tiny":
        from agentrl.models.tiny import build_tiny_tokenizer, tiny_config

        tiny = tiny_config(build_tiny_tokenizer(), model.tiny_layers, model.tiny_hidden, model.tiny_head_dim)
        return ModelShape.from_config(tiny.to_dict()), "the built-in tiny model's settings"
    if model.path == "smollm2":
        from agentrl.models.smollm2 import CONFIG_SHAPE

        return ModelShape.from_config(CONFIG_SHAPE), "SmolLM2-135M-Instruct's config"
    source = model_source(model.path, base_dir)
    path: Path | None = None
    if source in ("folder", "gguf"):
        local = base_dir / Path(model.path).expanduser()
        path = (local if source == "folder" else local.parent) / "config.json"
    elif source == "hub" and HUB_ID.fullmatch(model.path):
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model.path, "config.json")  # the local Hub cache only: never the network
        path = Path(cached) if isinstance(cached, str) else None
    try:
        found = read_config_json(path) if path is not None else None
        if found is None:
            return None, f"no config.json to read for model.path {model.path!r} on this machine"
        return ModelShape.from_config(found), f"{model.path}'s config.json"
    except KeyError as err:
        return None, f"model.path {model.path!r}: its config.json has no {err} a decoder's shape needs"
    except ValueError as err:
        raise ModelConfigInvalid(f"model.path {model.path!r}: its config.json is invalid: {err}") from None

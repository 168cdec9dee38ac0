"""A policy's weights on disk in the form every tool loads: transformers' `save_pretrained` folder, safetensors.

A checkpoint keeps the policy in `CHECKPOINT_POLICY` (the full model, or under LoRA the adapter alone, with the
tokenizer and generation config), so a checkpoint is itself a folder transformers or peft load directly;
`agentrl export` writes the same form anywhere, optionally with the adapter merged in. Checkpoints written before
this form kept a pickled state dict (`LEGACY_WEIGHTS`); they still load.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from agentrl.contract.files_inside import is_plain_file, is_plain_folder, open_inside

CHECKPOINT_POLICY = "policy"
LEGACY_WEIGHTS = "model.pt"
ADAPTER_CONFIG = "adapter_config.json"


def is_adapter(model: Any) -> bool:
    return hasattr(model, "peft_config")


def save_policy(model: Any, tokenizer: Any, folder: Path) -> None:
    """The model (under LoRA: the adapter alone) and its tokenizer, as `save_pretrained` writes them."""
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if is_adapter(model):  # the generation config belongs with the base model's weights, which stay out
        model.get_base_model().generation_config.save_pretrained(folder)


def policy_folder(path: Path) -> Path | None:
    """The save_pretrained folder in `path` (a checkpoint) or `path` itself (an export), or None for a legacy
    checkpoint. A link is never followed: the files a run folder holds are read from inside it (files_inside)."""
    for folder in (path / CHECKPOINT_POLICY, path):
        if is_plain_folder(folder) and (
            is_plain_file(folder / "config.json") or is_plain_file(folder / ADAPTER_CONFIG)
        ):
            return folder
    return None


def _load_tensors(folder: Path, name: str) -> dict[str, torch.Tensor]:
    """The safetensors file `name` of `folder`, opened without following a link (a weights file planted as a link
    would load another file's tensors into an export); safetensors maps a file by its path, so it is given the
    descriptor's own (/dev/fd/N: the file opened, whatever is at its name by now)."""
    from safetensors.torch import load_file

    with open_inside(folder, name, None) as handle:
        return load_file(f"/dev/fd/{handle.fileno()}")


def _shared_storage_names(model: Any) -> set[str]:
    """Names of tensors that share storage with an earlier one (tied weights): save_pretrained writes each once."""
    seen: dict[int, list[str]] = defaultdict(list)
    for name, tensor in model.state_dict().items():
        seen[tensor.untyped_storage().data_ptr()].append(name)
    return {name for names in seen.values() for name in names[1:]}


def load_policy_weights(model: Any, path: Path) -> None:
    """Load the weights of a checkpoint or an exported folder into `model`, in place (the optimizer keeps its
    parameters). An adapter folder goes into a LoRA policy, a full model into a plain one."""
    folder = policy_folder(path)
    if folder is None:
        if not is_plain_file(path / LEGACY_WEIGHTS):
            raise FileNotFoundError(
                f"{path} holds no policy: neither a save_pretrained folder ({CHECKPOINT_POLICY}/, "
                f"config.json or {ADAPTER_CONFIG}) nor an older checkpoint's {LEGACY_WEIGHTS}"
            )
        with open_inside(path, LEGACY_WEIGHTS, None) as legacy:
            model.load_state_dict(torch.load(legacy, map_location="cpu"))
        return
    holds_adapter = is_plain_file(folder / ADAPTER_CONFIG)
    if holds_adapter != is_adapter(model):
        raise ValueError(
            f"{folder} holds {'a LoRA adapter' if holds_adapter else 'a full model'} but the run "
            f"config's model.lora.enabled is {is_adapter(model)}"
        )
    files = sorted(folder.glob("adapter_model.safetensors" if holds_adapter else "model*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder} has no safetensors weights")
    state: dict[str, torch.Tensor] = {}
    for file in files:  # one file, or the shards of a large model
        state.update(_load_tensors(folder, file.name))
    if holds_adapter:
        from peft import set_peft_model_state_dict

        result = set_peft_model_state_dict(model, state)
        unexpected = list(result.unexpected_keys)
        missing = [name for name in result.missing_keys if ".lora_" in name]
    else:
        result = model.load_state_dict(state, strict=False)
        unexpected = list(result.unexpected_keys)
        missing = [name for name in result.missing_keys if name not in _shared_storage_names(model)]
    if missing or unexpected:
        raise ValueError(f"{folder} does not fit this model: missing {missing[:5]}, unexpected {unexpected[:5]}")

"""The prefix every row of a batch shares (system prompt, worked examples, a group's prompt), computed once.

The rollout's prefill and the learner's forward both run it through the model for one row and repeat its
keys and values for every row; in the learner the gradient flows back through the repeat into that one
computation, so the result is exact, not an approximation.

Under gradient checkpointing (model.gradient_checkpointing, a model in train mode) transformers turns the cache off
in the layers it checkpoints, since a checkpointed layer runs twice (its forward, then again in the backward to rebuild
its activations) and a second run would append its keys and values to the cache again. The learner keeps the shared
prefix there with a cache that tolerates the second run (`_checkpointed_prefix_cache`): the prefix's layers store
their keys and values once, and the rows' layers read them without storing theirs, so both runs of a layer compute
the same; `layers_read_cache` lets the checkpointed layers see it. Where this transformers cannot
(`checkpointing_keeps_cache`), the learner runs the prefix within every row instead.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Iterator
from typing import Any

import torch

# Below this many shared tokens, computing the shared prefix separately saves less than its extra call costs.
MIN_SHARED_PREFIX = 16
_CLASS_VALUE = object()  # a layer that had no `_can_checkpoint_with_cache` of its own


def shared_prefix_cache(model: Any, prefix_ids: list[int] | torch.Tensor, rows: int, device: torch.device) -> Any:
    """The model's key/value cache for `prefix_ids`, computed once and repeated for `rows` rows. Under gradient
    checkpointing the cache tolerates the layers' second run in the backward; the call that reads it runs inside
    `layers_read_cache(model)`."""
    prefix = torch.as_tensor(prefix_ids, dtype=torch.long, device=device).reshape(1, -1)
    if gradient_checkpointing(model):
        return _checkpointed_prefix_cache(model, prefix, rows)
    cache = model(input_ids=prefix, use_cache=True, logits_to_keep=1).past_key_values
    cache.batch_repeat_interleave(rows)
    return cache


def shared_prefix_length(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> int:
    """How many leading tokens every row of a right-padded batch has in common."""
    same = (input_ids == input_ids[:1]).all(0) & (attention_mask > 0).all(0)
    differs = (~same).nonzero()
    return int(differs[0]) if len(differs) else input_ids.shape[1]


def _checkpointed_layers(model: Any) -> list[Any]:
    """The modules transformers checkpoints in this model's forward (none outside train mode)."""
    if not model.training:
        return []
    return [module for module in model.modules() if getattr(module, "gradient_checkpointing", False) is True]


def gradient_checkpointing(model: Any) -> bool:
    """Whether the model's next forward checkpoints its layers (gradient checkpointing on, in train mode)."""
    return bool(_checkpointed_layers(model))


def checkpointing_keeps_cache(model: Any) -> bool:
    """Whether this transformers lets a checkpointed layer read a cache (its layers' `_can_checkpoint_with_cache`, in
    transformers 5.19) and keeps one as a list of key/value layers the shared prefix's cache can copy."""
    try:
        from transformers import DynamicCache
        from transformers.modeling_layers import GradientCheckpointingLayer
    except ImportError:
        return False
    layers = [m for m in _checkpointed_layers(model) if isinstance(m, GradientCheckpointingLayer)]
    return (
        bool(layers)
        and hasattr(GradientCheckpointingLayer, "_can_checkpoint_with_cache")
        and hasattr(DynamicCache(), "layers")
    )


@contextlib.contextmanager
def layers_read_cache(model: Any) -> Iterator[None]:
    """Within the block, the model's checkpointed layers pass the cache they are given to their attention instead of
    dropping it (a no-op without gradient checkpointing). Only for the caches `shared_prefix_cache` makes, which a
    layer's second run in the backward does not change."""
    layers = [m for m in _checkpointed_layers(model) if hasattr(type(m), "_can_checkpoint_with_cache")]
    own = [layer.__dict__.get("_can_checkpoint_with_cache", _CLASS_VALUE) for layer in layers]
    for layer in layers:
        layer._can_checkpoint_with_cache = True
    try:
        yield
    finally:
        for layer, value in zip(layers, own):
            if value is _CLASS_VALUE:
                del layer._can_checkpoint_with_cache
            else:
                layer._can_checkpoint_with_cache = value


@functools.cache
def _prefix_cache_class() -> type:
    from transformers import DynamicCache

    class CheckpointedPrefixCache(DynamicCache):
        """A shared prefix's cache whose layers may run twice. Recording the prefix (`reading` false), each layer stores
        its keys and values at its first run, and a second run gets what the first got, from a copy of the layer as
        it was before. Read by the rows (`reading` true), each layer's keys and values are appended to a copy of the
        layer, so the prefix stays as it is however often a layer runs. Either way a run does exactly what the
        plain cache's update does."""

        reading = False

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
            if self.reading:
                return copy.copy(self.layers[layer_idx]).update(key_states, value_states, *args, **kwargs)
            before = self._before.get(layer_idx)
            if before is not None:  # the layer's second run, in the backward
                return copy.copy(before).update(key_states, value_states, *args, **kwargs)
            self._before[layer_idx] = copy.copy(self.layers[layer_idx])
            return super().update(key_states, value_states, layer_idx, *args, **kwargs)

    return CheckpointedPrefixCache


def _checkpointed_prefix_cache(model: Any, prefix: torch.Tensor, rows: int) -> Any:
    """The prefix's cache under gradient checkpointing: computed once for one row, checkpointed like every other
    forward, with the gradient flowing back into it; repeated for `rows` rows in a copy that the rows' layers read."""
    decoder = model.get_decoder()
    recording = _prefix_cache_class()(config=decoder.config)
    recording._before = {}
    with layers_read_cache(model):
        # use_cache=False: what transformers makes of True under checkpointing; the layers still fill the cache given.
        model(input_ids=prefix, past_key_values=recording, use_cache=False, logits_to_keep=1)
    if recording.get_seq_length() != prefix.shape[1]:
        raise RuntimeError(
            f"the shared prefix's cache holds {recording.get_seq_length()} positions after a forward of "
            f"{prefix.shape[1]} under gradient checkpointing: this model's layers did not store their keys and values"
        )
    reading = copy.copy(recording)
    reading.layers = [copy.copy(layer) for layer in recording.layers]
    reading.reading = True
    reading.batch_repeat_interleave(rows)
    return reading

"""The prefix every row of a batch shares (system prompt, worked examples, a group's prompt), computed once.

The rollout's prefill and the learner's forward both run it through the model for one row and repeat its
keys and values for every row; in the learner the gradient flows back through the repeat into that one
computation, so the result is exact, not an approximation.
"""

from __future__ import annotations

from typing import Any

import torch

# Below this many shared tokens, computing the shared prefix separately saves less than its extra call costs.
MIN_SHARED_PREFIX = 16


def shared_prefix_cache(model: Any, prefix_ids: list[int] | torch.Tensor, rows: int, device: torch.device) -> Any:
    """The model's key/value cache for `prefix_ids`, computed once and repeated for `rows` rows."""
    prefix = torch.as_tensor(prefix_ids, dtype=torch.long, device=device).reshape(1, -1)
    cache = model(input_ids=prefix, use_cache=True, logits_to_keep=1).past_key_values
    cache.batch_repeat_interleave(rows)
    return cache


def shared_prefix_length(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> int:
    """How many leading tokens every row of a right-padded batch has in common."""
    same = (input_ids == input_ids[:1]).all(0) & (attention_mask > 0).all(0)
    differs = (~same).nonzero()
    return int(differs[0]) if len(differs) else input_ids.shape[1]

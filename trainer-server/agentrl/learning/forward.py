"""The learner's forward pass: per-token logprobs of a micro-batch's rows (and their entropy, their most likely
tokens, the critic's values), computed the cheap way, with the same numbers as the model's full forward.

Four savings, all exact. The micro-batch runs at its own width, and its rows were bucketed by length or by group
(`plan_micro_rows`), so little padding or prompt is computed. The vocabulary projection and its softmax run only at
each row's own positions that predict a token the loss or the logprob-gap metric reads, about one in five positions
of a multi-turn episode: the decoder's last hidden states are picked there and projected by the model's own output
head (`vocabulary_logits`), a chunk of positions at a time (`target_logprobs`), and the entropy only where it is
asked for. And the prefix every row shares (system prompt, worked examples) runs once: its keys and values are
repeated for every row, and the gradient flows back through the repeat into that one computation.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Protocol

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from agentrl.learning.batch import TrainBatch
from agentrl.learning.logprobs import target_logprobs
from agentrl.learning.microbatches import read_tokens, shared_prefix_to_run_once
from agentrl.models.prefix import (
    checkpointing_keeps_cache,
    gradient_checkpointing,
    layers_read_cache,
    shared_prefix_cache,
)

# On CPU, up to this many positions a row, scaled-dot-product attention's math backend (matmuls and a softmax) runs
# the forward and backward faster than the fused flash kernel, and beyond it slower (measured on 2 cores, bf16,
# SmolLM2's 9 heads, 8 rows, 30 layers' forward and backward: 0.22 s against 0.41 s at 95 positions, 0.37 against
# 0.54 at 128, 0.69 against 0.51 at 192, 5.6 against 2.1 at 460). The forward picks by each micro-batch's width.
CPU_MATH_ATTENTION_WIDTH = 160

log = logging.getLogger(__name__)


class Forward(Protocol):
    """A forward pass of `model` over a micro-batch (PolicyForward, or a distribution's wrapping of it)."""

    def __call__(
        self, model: Any, batch: TrainBatch, *, with_values: bool, with_entropy: bool
    ) -> dict[str, torch.Tensor]: ...


class PolicyForward:
    """The forward pass of one learner. `critic` is the value head the pass runs on the decoder's hidden states (set
    by the learner once it has one); `shared_prefix_once` is false where every process must call each layer the same
    number of times whatever rows it holds (a sharded learner's)."""

    def __init__(self, device: torch.device, temperature: float, entropy_grad: bool, shared_prefix_once: bool) -> None:
        self.device = device
        self.temperature = temperature
        self.entropy_grad = entropy_grad  # a graph through the entropy only when it is in the loss
        self.shared_prefix_once = shared_prefix_once
        self.critic: nn.Module | None = None
        self._checkpointing_keeps_cache: bool | None = None  # known at the first checkpointed forward

    def __call__(
        self, model: Any, batch: TrainBatch, *, with_values: bool, with_entropy: bool
    ) -> dict[str, torch.Tensor]:
        """Per-token logprob of each token given its prefix (entry t: token t), its entropy and whether it is the
        most likely token `with_entropy` (the training pass, which reports them), and values."""
        width = int(batch.attention_mask.sum(1).max())
        input_ids = batch.input_ids[:, :width].to(self.device)
        attention = batch.attention_mask[:, :width].to(self.device)
        wanted = read_tokens(batch, width)
        rows, targets = (index.to(self.device) for index in wanted.nonzero(as_tuple=True))
        shared = shared_prefix_to_run_once(batch, width, wanted, with_values) if self.shared_prefix_once else 0
        if shared and not self._prefix_runs_once_under_checkpointing(model):
            shared = 0
        past = shared_prefix_cache(model, input_ids[0, :shared], len(batch), self.device) if shared else None
        positions = torch.arange(shared, width, device=self.device).expand(len(batch), -1)
        with self._attention_kernel(width), layers_read_cache(model):
            hidden = model.get_decoder()(
                input_ids=input_ids[:, shared:],
                attention_mask=attention,
                position_ids=positions,
                past_key_values=past,
                # Under checkpointing transformers turns use_cache off (with a warning); the layers still read `past`.
                use_cache=past is not None and not gradient_checkpointing(model),
            ).last_hidden_state  # [B, width - shared, H]
        picked, entropy, greedy = target_logprobs(
            model,
            hidden[rows, targets - 1 - shared],  # [N, H]: the hidden state that predicts each read token
            input_ids[rows, targets],
            temperature=self.temperature,
            entropy=with_entropy,
            entropy_grad=self.entropy_grad,
        )
        shape = (len(batch), batch.input_ids.shape[1])
        result = {"logprobs": torch.zeros(shape, device=self.device).index_put((rows, targets), picked)}
        if entropy is not None and greedy is not None:
            result["entropy"] = torch.zeros(shape, device=self.device).index_put((rows, targets), entropy)
            result["greedy"] = torch.zeros(shape, device=self.device).index_put((rows, targets), greedy)
        if with_values:
            assert self.critic is not None
            result["values"] = nn.functional.pad(self.critic(hidden), (0, shape[1] - width))
        return result

    def _prefix_runs_once_under_checkpointing(self, model: Any) -> bool:
        """Whether the shared prefix can run once for this forward: always, but under gradient checkpointing with a
        transformers whose checkpointed layers drop every cache (`checkpointing_keeps_cache`); then each row runs the
        prefix itself (exact, slower), and the run's log says so once."""
        if not gradient_checkpointing(model):
            return True
        if self._checkpointing_keeps_cache is None:
            self._checkpointing_keeps_cache = checkpointing_keeps_cache(model)
            if not self._checkpointing_keeps_cache:
                import transformers

                log.warning(
                    "model.gradient_checkpointing: this transformers (%s) drops the cache in checkpointed layers, "
                    "so the training pass computes the prompt a group's rows share in every row rather than once",
                    transformers.__version__,
                )
        return self._checkpointing_keeps_cache

    def _attention_kernel(self, width: int) -> Any:
        """Attention for rows of `width` positions: the math backend on CPU up to `CPU_MATH_ATTENTION_WIDTH`, else
        the model's own choice. The same attention either way; only the kernel, and so the rounding, differs."""
        if self.device.type == "cpu" and width <= CPU_MATH_ATTENTION_WIDTH:
            return sdpa_kernel(SDPBackend.MATH)
        return contextlib.nullcontext()

"""The learner: one policy update from one step's episodes.

Order of work: recompute the trainer's logprobs (and the reference's, the critic's values) without
gradients; report how far they are from the rollout's; let the algorithm turn rewards into
advantages; then for each update epoch accumulate gradients over micro-batches of the rows that carry
a gradient (`_rows_to_train`) and take one optimizer step. Logits are divided by the rollout
temperature, as in the rollout engine, and projected onto the vocabulary a chunk of positions at a
time (`target_logprobs`).
What the algorithm decides (advantages, a critic, where the KL goes, extra loss terms) is in its
own file under algorithms/; the episodes are only read, and what the update computed per episode
comes back in the `Update`.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.checkpoint import checkpoint

from agentrl.learning.algorithms import get_algorithm
from agentrl.learning.algorithms.common import (
    aggregate,
    clipped_policy_loss,
    kl_penalty,
    masked_mean,
    truncated_is_weights,
)
from agentrl.learning.batch import TrainBatch, collate
from agentrl.learning.cpu_memory import keep_freed_memory
from agentrl.models.loading import text_config
from agentrl.models.precision import uses_bf16_autocast
from agentrl.rollout.episode import Episode
from agentrl.rollout.prefix import MIN_SHARED_PREFIX, shared_prefix_cache, shared_prefix_length
from agentrl.run.config import RunConfig


class NonFiniteError(ValueError):
    """A NaN or infinite reward, loss or gradient: the step stops before the optimizer changes a weight."""


def in_row_order(chunks: list[torch.Tensor], micro_rows: list[torch.Tensor], shape: tuple[int, int]) -> torch.Tensor:
    """The micro-batches' per-row results put back in the batch's row order, on the CPU, as one `shape` tensor
    ([rows, width]); a row that no micro-batch here holds (another data-parallel worker's, or one the update did not
    run) is zeros."""
    if not chunks:
        return torch.zeros(shape)
    return torch.zeros(shape, dtype=chunks[0].dtype).index_copy(0, torch.cat(micro_rows).cpu(), torch.cat(chunks).cpu())


def vocabulary_logits(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """What the causal LM's own forward makes of these last hidden states: its output head, then the final
    soft-capping some models apply (Gemma 2 and 3). `check_vocabulary_logits` proves it per model."""
    logits = model.get_output_embeddings()(hidden)
    cap = _final_logit_cap(model)
    return torch.tanh(logits / cap) * cap if cap else logits


def _final_logit_cap(model: Any) -> float | None:
    return getattr(text_config(model), "final_logit_softcapping", None) or None


@torch.no_grad()
def check_vocabulary_logits(model: Any, device: torch.device) -> None:
    """The learner projects only chosen hidden states; refuse a model whose forward does more to its
    logits than `vocabulary_logits` reproduces, instead of training it on the wrong distribution."""
    probe = torch.arange(1, 9, device=device).reshape(1, -1) % text_config(model).vocab_size
    was_training = model.training
    model.eval()  # no dropout in either pass
    try:
        own = model(input_ids=probe).logits
        ours = vocabulary_logits(model, model.get_decoder()(input_ids=probe).last_hidden_state)
    finally:
        model.train(was_training)
    if not torch.allclose(own.float(), ours.float(), atol=1e-4, rtol=1e-4, equal_nan=True):
        raise ValueError(
            f"the learner cannot reproduce the logits of model type {text_config(model).model_type!r}: "
            "its forward transforms the output head's logits in a way agentrl does not know "
            "(known: none, or Gemma's final soft-capping)"
        )


# Read positions projected onto the vocabulary at once: as many as make 24 MiB of float32 logits (128 rows of
# SmolLM2's 49,152 entries) instead of [every read position, V]. Below glibc's largest mmap threshold (32 MiB, which
# `keep_freed_memory` sets), so a chunk's buffers come back from the heap instead of fresh pages from the kernel.
LOGIT_CHUNK_BYTES = 24 << 20
# What the backward may keep of the forward's logits (every chunk's [rows, V] in the projection's dtype: 2 bytes an
# entry under bf16 autocast). Up to this, the chunks' logits stay alive until the backward; beyond it (a large
# vocabulary times many read positions: 8 rows of 4,000 tokens on a 152k vocabulary keep ~10 GB in bf16), the
# backward projects each chunk again, one projection of the read positions more. On SmolLM2's single-turn benchmark
# step (micro-batches of ~470 read positions: 46 MiB kept in bf16) projecting again cost 0.6-0.9 s of a 10 s update.
KEPT_LOGITS_BYTES = 1 << 30
# The output head's backward gathers this many bytes of gradient rows ([rows, V] in the projection's dtype) before
# it multiplies them into the head's weight gradient: one [V, H] product per block instead of one per 128-row chunk,
# a far better shaped matrix product (on 2 cores in bf16: 78-220 GFLOP/s at 128 rows, 340 at 470) and one [V, H]
# result to add up instead of four (SmolLM2's 49,152 x 576 weight; the backward was 1.2 s of its update's
# 8 s at 128 rows a product). Sized so SmolLM2's ~470 read positions a micro-batch make one block.
GRADIENT_BLOCK_BYTES = 64 << 20
# On CPU, up to this many positions a row, scaled-dot-product attention's math backend (matmuls and a softmax) runs
# the forward and backward faster than the fused flash kernel, and beyond it slower (measured on 2 cores, bf16,
# SmolLM2's 9 heads, 8 rows, 30 layers' forward and backward: 0.22 s against 0.41 s at 95 positions, 0.37 against
# 0.54 at 128, 0.69 against 0.51 at 192, 5.6 against 2.1 at 460). The learner picks by each micro-batch's width.
CPU_MATH_ATTENTION_WIDTH = 160


def entropy_from_logits(logits: torch.Tensor, normaliser: torch.Tensor) -> torch.Tensor:
    return normaliser - (torch.softmax(logits, -1) * logits).sum(-1)  # H = log Z - E_p[logit]


def _target_logprob(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """log pi(a) = logit_a - log Z for each row of float32 sampling logits [rows, V], and log Z."""
    normaliser = torch.logsumexp(logits, -1)
    return logits.gather(-1, targets[:, None]).squeeze(-1) - normaliser, normaliser


def _sampling_logits(raw: torch.Tensor, cap: float | None, temperature: float) -> torch.Tensor:
    """The float32 logits the rollout samples from, from the head's raw output: soft-capped (Gemma), then / T. A new
    tensor (`raw` is kept for the backward), changed in place from there on."""
    logits = raw.to(torch.float32, copy=True)
    if cap:
        logits = logits.div_(cap).tanh_().mul_(cap)  # cap * tanh(raw / cap), in place on the fresh float copy
    if temperature != 1.0:  # a full pass over [rows, V]
        logits = logits.div_(temperature)
    return logits


class _OutputHeadLogprobs(torch.autograd.Function):
    """log pi(target | hidden) through a linear output head, `chunk_rows` read positions at a time, with the backward
    written out instead of recorded: autograd's backward of the chunked projection makes, per chunk, a [V, H] weight
    gradient from 128 rows (a badly shaped product) and adds it up; this one gathers each chunk's gradient rows into
    blocks (`GRADIENT_BLOCK_BYTES`) and makes the weight gradient once a block. Same operations, same dtypes.

    With l the sampling logits of a row (soft-capped raw logits / T), p = softmax(l), a the target, g and g_H the
    gradients reaching its logprob and its entropy H = log Z - sum_k p_k l_k:
        dL/dl_k = g [k = a] - p_k (g + g_H (log p_k + H))
        dL/draw_k = dL/dl_k / T * (1 - tanh(raw_k / cap)^2)        (the last factor only with a cap)
        dL/dhidden = dL/draw @ W,   dL/dW = dL/draw^T @ hidden,   dL/dbias = sum over rows of dL/draw"""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        targets: torch.Tensor,
        settings: dict[str, Any],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        dtype, rows = settings["dtype"], settings["chunk_rows"]
        with torch.autocast(hidden.device.type, enabled=False):  # the dtypes are chosen here, as autocast would
            inputs = hidden.to(dtype)
            head = weight.to(dtype)
            head_bias = None if bias is None else bias.to(dtype)
            picked, normalisers, entropies, kept = [], [], [], []
            for hidden_chunk, target_chunk in zip(inputs.split(rows), targets.split(rows)):
                raw = nn.functional.linear(hidden_chunk, head, head_bias)  # [rows, V]
                logits = _sampling_logits(raw, settings["cap"], settings["temperature"])
                chunk_picked, normaliser = _target_logprob(logits, target_chunk)
                picked.append(chunk_picked)
                normalisers.append(normaliser)
                if settings["entropy"]:
                    entropies.append(entropy_from_logits(logits, normaliser))
                if settings["keep_logits"]:
                    kept.append(raw)
        logprobs = torch.cat(picked)
        entropy = torch.cat(entropies) if entropies else logprobs.new_zeros(0)
        if not settings["entropy_grad"]:
            ctx.mark_non_differentiable(entropy)
        ctx.settings = settings
        ctx.input_dtype = hidden.dtype
        ctx.save_for_backward(inputs, head, head_bias, targets, torch.cat(normalisers), entropy, *kept)
        return logprobs, entropy

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: Any, logprob_grad: torch.Tensor, entropy_grad: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, ...]:
        settings = ctx.settings
        inputs, head, head_bias, targets, normalisers, entropy, *kept = ctx.saved_tensors
        cap, temperature, rows = settings["cap"], settings["temperature"], settings["chunk_rows"]
        with_entropy_grad = settings["entropy_grad"] and entropy_grad is not None
        vocabulary = head.shape[0]
        block_rows = max(rows, GRADIENT_BLOCK_BYTES // (vocabulary * head.element_size()) // rows * rows)
        need_weight, need_bias = ctx.needs_input_grad[1], ctx.needs_input_grad[2]
        hidden_grad = torch.empty(inputs.shape, dtype=ctx.input_dtype, device=inputs.device)
        weight_grad = torch.zeros(head.shape, dtype=torch.float32, device=head.device) if need_weight else None
        bias_grad = torch.zeros(vocabulary, dtype=torch.float32, device=head.device) if need_bias else None
        for block_start in range(0, len(inputs), block_rows):
            block_inputs = inputs[block_start : block_start + block_rows]
            raw_grad = torch.empty((len(block_inputs), vocabulary), dtype=head.dtype, device=head.device)
            for start in range(0, len(block_inputs), rows):
                at = slice(block_start + start, block_start + start + rows)
                raw = kept[at.start // rows] if kept else nn.functional.linear(inputs[at], head, head_bias)
                log_p = _sampling_logits(raw, cap, temperature).sub_(normalisers[at, None])
                g = logprob_grad[at, None]
                if with_entropy_grad:
                    coefficient = (log_p + entropy[at, None]).mul_(entropy_grad[at, None]).add_(g)
                    grad = log_p.exp_().mul_(coefficient).neg_()  # -p (g + g_H (log p + H))
                else:
                    grad = log_p.exp_().mul_(-g)  # -p g
                grad.scatter_add_(1, targets[at, None], g)  # + g at the target
                if temperature != 1.0:
                    grad.div_(temperature)
                if cap:
                    grad.mul_(1 - torch.tanh(raw.float() / cap) ** 2)
                raw_grad[start : start + len(grad)] = grad
            hidden_grad[block_start : block_start + len(block_inputs)] = raw_grad @ head
            if weight_grad is not None:
                weight_grad.add_(raw_grad.t() @ block_inputs)
            if bias_grad is not None:
                bias_grad.add_(raw_grad.sum(0, dtype=torch.float32))
        return (hidden_grad, weight_grad, bias_grad, None, None)


def _chunk_logprobs(
    model: Any, hidden: torch.Tensor, targets: torch.Tensor, temperature: float, entropy: bool, entropy_grad: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    logits = vocabulary_logits(model, hidden).float()  # [rows, V]
    if temperature != 1.0:  # a full pass over [rows, V], and another in the backward
        logits = logits / temperature
    picked, normaliser = _target_logprob(logits, targets)
    if not entropy:
        return picked, None
    # Last: non-reentrant checkpointing stops recomputing once it has every tensor the backward saved, so the
    # backward does not compute an entropy that carries no gradient again.
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        return picked, entropy_from_logits(logits, normaliser)


def target_logprobs(
    model: Any,
    hidden: torch.Tensor,
    targets: torch.Tensor,
    *,
    temperature: float,
    entropy: bool,
    entropy_grad: bool,
    chunk_rows: int | None = None,
    kept_logits_bytes: int = KEPT_LOGITS_BYTES,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(target_n | hidden_n) for each of the N rows of `hidden` [N, H], and, when asked, the entropy of pi
    there (with a graph only with `entropy_grad`): log_softmax(logits / T)[target] = logit_target / T - log Z.

    No [N, V] tensor is ever made at once: `chunk_rows` rows at a time (by default `LOGIT_CHUNK_BYTES` of float32
    logits) are projected by the model's own head. With gradients, when every chunk's logits together exceed
    `kept_logits_bytes`, the backward projects each chunk again instead of keeping every chunk's logits alive from
    the forward to the backward. Exact: the same operations on the same rows.

    A linear head (the usual case) runs through `_OutputHeadLogprobs`, whose backward is written out; any other head
    (one wrapped by a LoRA adapter, say) through autograd, each chunk under activation checkpointing when the logits
    are not kept."""
    head = model.get_output_embeddings()
    vocabulary = head.weight.shape[0]
    chunk_rows = chunk_rows or max(1, LOGIT_CHUNK_BYTES // (vocabulary * 4))
    autocast = torch.is_autocast_enabled(hidden.device.type)
    dtype = torch.get_autocast_dtype(hidden.device.type) if autocast else head.weight.dtype
    if isinstance(head, nn.Linear):
        needs_graph = torch.is_grad_enabled() and (hidden.requires_grad or head.weight.requires_grad)
        settings = {
            "dtype": dtype,
            "chunk_rows": chunk_rows,
            "temperature": temperature,
            "cap": _final_logit_cap(model),
            "entropy": entropy,
            "entropy_grad": entropy and entropy_grad,
            "keep_logits": needs_graph and len(hidden) * vocabulary * dtype.itemsize <= kept_logits_bytes,
        }
        logprobs, entropies = _OutputHeadLogprobs.apply(hidden, head.weight, head.bias, targets, settings)
        return logprobs, entropies if entropy else None
    checkpointed = torch.is_grad_enabled() and len(hidden) * vocabulary * dtype.itemsize > kept_logits_bytes
    picked_chunks, entropy_chunks = [], []
    for hidden_chunk, target_chunk in zip(hidden.split(chunk_rows), targets.split(chunk_rows)):
        args = (model, hidden_chunk, target_chunk, temperature, entropy, entropy_grad)
        if checkpointed:
            picked, chunk_entropy = checkpoint(_chunk_logprobs, *args, use_reentrant=False)
        else:
            picked, chunk_entropy = _chunk_logprobs(*args)
        picked_chunks.append(picked)
        entropy_chunks.append(chunk_entropy)
    return torch.cat(picked_chunks), torch.cat(entropy_chunks) if entropy else None


def _rows_mask(rows: torch.Tensor, count: int) -> torch.Tensor:
    return torch.zeros(count, dtype=torch.bool).index_fill(0, rows, True)


def _row_means(values: torch.Tensor, mask: torch.Tensor) -> list[float]:
    """Each row's mean of `values` over its masked positions (0 for a row with none)."""
    return ((values * mask).sum(1) / mask.sum(1).clamp(min=1.0)).tolist()


def step_advantage_spread(advantages: torch.Tensor, batch: TrainBatch) -> float:
    """Over the episodes with two trained steps or more: the mean of (largest - smallest) of their steps' mean
    advantages. 0 when every token of an episode gets the same advantage (GRPO without process rewards); a
    step-level algorithm spreads credit over the steps."""
    mask = batch.train_mask
    steps = int(batch.token_turns.max()) + 1 if batch.token_turns.numel() else 0
    if steps < 2:
        return 0.0
    index = batch.token_turns.clamp(min=0)
    counts = torch.zeros(len(batch), steps).scatter_add_(1, index, mask * (batch.token_turns >= 0))
    sums = torch.zeros(len(batch), steps).scatter_add_(1, index, advantages * mask * (batch.token_turns >= 0))
    means = sums / counts.clamp(min=1.0)
    present = counts > 0
    several = present.sum(1) >= 2
    if not several.any():
        return 0.0
    highest = torch.where(present, means, torch.full_like(means, -torch.inf)).max(1).values
    lowest = torch.where(present, means, torch.full_like(means, torch.inf)).min(1).values
    return float((highest - lowest)[several].mean())


def _hidden_size(model: Any) -> int:
    return int(text_config(model).hidden_size)


def _read_tokens(batch: TrainBatch, width: int) -> torch.Tensor:
    """[rows, width] bool: the tokens whose logprob the loss or the logprob-gap metric reads."""
    wanted = (batch.train_mask + batch.sampled_mask)[:, :width] > 0
    wanted[:, 0] = False  # nothing predicts the first token
    return wanted


def _run_once(batch: TrainBatch, width: int, wanted: torch.Tensor, with_values: bool) -> int:
    """How many leading positions every row of the micro-batch shares and `_forward` runs once: the rows' common
    prefix up to the first position that predicts a read token, when it is worth a call of its own. None with values:
    the critic reads every position's hidden state."""
    if with_values or len(batch) < 2:
        return 0
    read = wanted.any(0).nonzero()
    first_predicting = int(read[0]) - 1 if len(read) else width - 1
    shared = min(shared_prefix_length(batch.input_ids[:, :width], batch.attention_mask[:, :width]), first_predicting)
    return shared if shared >= MIN_SHARED_PREFIX else 0


def _positions_computed(batch: TrainBatch, with_values: bool) -> int:
    """The decoder positions `_forward` computes for this micro-batch: the shared prefix once, the rest row by row."""
    width = int(batch.attention_mask.sum(1).max())
    shared = _run_once(batch, width, _read_tokens(batch, width), with_values)
    return len(batch) * (width - shared) + shared


@dataclass(frozen=True)
class Update:
    metrics: dict[str, float]
    advantages: list[list[float | None]]  # per episode, per token: A_t on the trained tokens, None elsewhere
    # Per episode, in order: "logprob_gap" (mean |rollout - learner| logprob over its sampled tokens) and, with a
    # reference, "kl_ref" (mean KL over its trained tokens); the health checks name the worst episodes with them.
    per_episode: dict[str, list[float]]


class Learner:
    def __init__(self, model: Any, tokenizer: Any, config: RunConfig, device: torch.device) -> None:
        self.model = model
        self.config = config
        self.device = device
        self.bf16_autocast = uses_bf16_autocast(config.train.bf16_autocast, device)
        if device.type == "cpu":
            keep_freed_memory()  # the same sizes are freed and allocated again every micro-batch
        check_vocabulary_logits(model, device)
        self.algorithm = get_algorithm(config.algorithm.name)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.temperature = config.rollout.temperature if config.rollout.temperature > 0 else 1.0
        trainable = [p for p in model.parameters() if p.requires_grad]
        groups: list[dict[str, Any]] = [{"params": trainable, "lr": config.train.lr}]
        self.critic: nn.Module | None = self.algorithm.make_critic(_hidden_size(model))
        if self.critic is not None:
            self.critic.to(device)
            groups.append({"params": list(self.critic.parameters()), "lr": config.train.critic_lr})
        # One fused kernel a parameter instead of a dozen elementwise passes over every weight (CPU and CUDA have it).
        fused = device.type in ("cpu", "cuda")
        self.optimizer = torch.optim.AdamW(groups, weight_decay=config.train.weight_decay, fused=fused)
        self.reference = self._make_reference() if config.algorithm.kl.coef > 0 else None

    def _make_reference(self) -> Any:
        if self.config.model.lora.enabled:
            return None  # the adapter-disabled base model is the reference: no copy
        reference = copy.deepcopy(self.model).eval()
        for p in reference.parameters():
            p.requires_grad_(False)
        return reference

    @contextlib.contextmanager
    def _reference_model(self) -> Any:
        if self.reference is not None:
            yield self.reference
        else:
            with self.model.disable_adapter():
                yield self.model

    def _forward(
        self, model: Any, batch: TrainBatch, *, with_values: bool, with_entropy: bool
    ) -> dict[str, torch.Tensor]:
        """Per-token logprob of each token given its prefix (entry t: token t), its entropy `with_entropy`
        (the training pass, which reports it; with a graph when it is in the loss), and values.

        Four savings, all exact. The micro-batch runs at its own width, and its rows were bucketed by
        length or by group (`_micro_rows`), so little padding or prompt is computed. The vocabulary
        projection and its softmax run only at each row's own positions that predict a token the loss or the logprob-gap metric
        reads, about one in five positions of a multi-turn episode: the decoder's last hidden states are
        picked there and projected by the model's own output head (`vocabulary_logits`), a chunk of
        positions at a time (`target_logprobs`), and the entropy only where it is asked for. And the prefix
        every row shares (system prompt, worked examples) runs once: its keys and values are repeated
        for every row, and the gradient flows back through the repeat into that one computation."""
        width = int(batch.attention_mask.sum(1).max())
        input_ids = batch.input_ids[:, :width].to(self.device)
        attention = batch.attention_mask[:, :width].to(self.device)
        wanted = _read_tokens(batch, width)
        rows, targets = (index.to(self.device) for index in wanted.nonzero(as_tuple=True))
        shared = _run_once(batch, width, wanted, with_values)
        past = shared_prefix_cache(model, input_ids[0, :shared], len(batch), self.device) if shared else None
        positions = torch.arange(shared, width, device=self.device).expand(len(batch), -1)
        with self._attention_kernel(width):
            hidden = model.get_decoder()(
                input_ids=input_ids[:, shared:],
                attention_mask=attention,
                position_ids=positions,
                past_key_values=past,
                use_cache=past is not None,
            ).last_hidden_state  # [B, width - shared, H]
        picked, entropy = target_logprobs(
            model,
            hidden[rows, targets - 1 - shared],  # [N, H]: the hidden state that predicts each read token
            input_ids[rows, targets],
            temperature=self.temperature,
            entropy=with_entropy,
            entropy_grad=self.config.algorithm.entropy_coef > 0,  # a graph only when it is in the loss
        )
        shape = (len(batch), batch.input_ids.shape[1])
        result = {"logprobs": torch.zeros(shape, device=self.device).index_put((rows, targets), picked)}
        if entropy is not None:
            result["entropy"] = torch.zeros(shape, device=self.device).index_put((rows, targets), entropy)
        if with_values:
            assert self.critic is not None
            result["values"] = nn.functional.pad(self.critic(hidden), (0, shape[1] - width))
        return result

    def _rows_to_train(self, zero_advantage: torch.Tensor, kl_in_loss: bool) -> torch.Tensor:
        """The rows the training passes run (and a scoring pass that runs after the advantages). A row whose
        advantage is 0 on every trained token adds exactly nothing to the gradient when the advantage-weighted
        surrogate is the only loss term (no critic, no KL term in the loss, no entropy bonus): its tokens' loss is
        -0 * ratio, and every loss is normalised by the whole batch's figures, so leaving the row out changes no
        weight. GRPO and RLOO give every episode of a group whose samples all earned the same reward that
        advantage; in the bundled demo that was 13 of its 40 groups."""
        if self.critic is not None or kl_in_loss or self.config.algorithm.entropy_coef > 0:
            return torch.arange(len(zero_advantage))
        return (~zero_advantage).nonzero().squeeze(1)

    def on_policy(self) -> bool:
        """Whether the weights that sampled are the weights this update starts from, and nothing but the training
        pass needs logprobs: then pi_old is the training pass's own (detached) logprobs."""
        return (
            self.config.train.update_epochs == 1
            and self.critic is None
            and self.config.algorithm.kl.coef == 0
            and self.config.train.async_steps == 0
        )

    def behaviour_correction(self) -> bool:
        """Truncated importance weights for tokens sampled by other numbers than pi_old: another engine's kernels
        (algorithm.rollout_is), or weights one step older (train.async_steps, whose pi_old is then the scoring
        pass's: the decoupled, proximal-policy form of PPO)."""
        return self.config.algorithm.rollout_is.enabled or self.config.train.async_steps > 0

    def _attention_kernel(self, width: int) -> Any:
        """Attention for rows of `width` positions: the math backend on CPU up to `CPU_MATH_ATTENTION_WIDTH`, else
        the model's own choice. The same attention either way; only the kernel, and so the rounding, differs."""
        if self.device.type == "cpu" and width <= CPU_MATH_ATTENTION_WIDTH:
            return sdpa_kernel(SDPBackend.MATH)
        return contextlib.nullcontext()

    def _precision(self, enabled: bool = True) -> Any:
        """bf16 autocast (train.bf16_autocast). Autocast keeps the bf16 copy of each weight it casts until its
        outermost region ends, so one region spans a pass's micro-batches and each weight is cast once a pass, not
        once a micro-batch; inside it, `enabled=False` keeps each backward out of autocast, as autocast asks."""
        if not self.bf16_autocast:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=enabled)

    def _micro_rows(self, batch: TrainBatch) -> list[torch.Tensor]:
        """The rows of each micro-batch this process computes, in whichever of two orders has the decoder compute
        fewer positions: bucketed by length, so that a micro-batch of short episodes does not compute the padding up
        to the longest episode of the step; or group by group, so that a micro-batch's rows share their whole
        prompt, which `_forward` runs once (measured on SmolLM2's single-turn benchmark step, 32 episodes of ~90
        tokens with 31-token prompts: 2,384 positions by length, 2,135 by group)."""
        size = self.config.train.micro_batch_size
        lengths = batch.attention_mask.sum(1)
        by_length = torch.argsort(lengths, stable=True)
        by_group = torch.argsort(batch.group_ids * (int(lengths.max()) + 1) + lengths, stable=True)
        with_values = self.critic is not None
        splits = [list(order.split(size)) for order in (by_length, by_group)]
        return min(splits, key=lambda split: sum(_positions_computed(batch.select(r), with_values) for r in split))

    # A data-parallel learner (agentrl/cluster/learner_workers.py) computes some of the micro-batches in each of
    # its processes and overrides the three methods below to add up what they computed; one process has all.
    # Every loss term is normalised by the whole batch's figures (`norm` in `update`), so the sum over the
    # micro-batches of all processes is the single-process loss, whichever process computed which.

    def _sum_rows(self, per_row: torch.Tensor) -> torch.Tensor:
        """A [rows, ...] tensor in which each process filled the rows it computed (zeros elsewhere), complete."""
        return per_row

    def _sum_gradients(self, params: list[torch.Tensor]) -> None:
        """Make each parameter's gradient the sum of every process's, before clipping and the optimizer step."""

    def _sum_totals(self, totals: dict[str, float]) -> dict[str, float]:
        """The loss parts summed over every process's micro-batches."""
        return totals

    @torch.no_grad()
    def _score_batch(self, batch: TrainBatch, micro_rows: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        was_training = self.model.training
        self.model.eval()
        # Every process returns (and adds up with the others, `_sum_rows`) the same parts, whether its share of
        # `micro_rows` is empty or not.
        parts: dict[str, list[torch.Tensor]] = {"logprobs": []}
        if self.critic is not None:
            parts["values"] = []
        if self.config.algorithm.kl.coef > 0:
            parts["ref_logprobs"] = []
        try:
            with self._precision():
                for rows in micro_rows:
                    out = self._forward(
                        self.model, batch.select(rows), with_values=self.critic is not None, with_entropy=False
                    )
                    parts["logprobs"].append(out["logprobs"])
                    if "values" in parts:
                        parts["values"].append(out["values"])
            if "ref_logprobs" in parts:
                with self._reference_model() as reference, self._precision():
                    for rows in micro_rows:
                        ref_out = self._forward(reference, batch.select(rows), with_values=False, with_entropy=False)
                        parts["ref_logprobs"].append(ref_out["logprobs"])
        finally:
            self.model.train(was_training)
        return {
            name: self._sum_rows(in_row_order(chunks, micro_rows, tuple(batch.input_ids.shape)))
            for name, chunks in parts.items()
        }

    def update(self, episodes: list[Episode]) -> Update:
        started = time.perf_counter()
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        cfg = self.config.algorithm
        batch = collate(episodes, pad_id=self.pad_id, train_on_tool_tokens=cfg.train_on_tool_tokens)
        mask = batch.train_mask
        # On-policy (one pass, one optimizer step, nothing else read before the update): the weights that
        # sampled are the weights of the training pass, so pi_old is that pass's own detached logprobs
        # and the separate scoring pass would compute the same numbers a second time. Otherwise the scoring pass
        # runs before the advantages only when they read it (a critic's values, the KL to the reference); else it
        # computes pi_old after them, of the rows the update trains alone.
        on_policy = self.on_policy()
        scored_first = not on_policy and (self.critic is not None or cfg.kl.coef > 0)
        scored = self._score_batch(batch, self._micro_rows(batch)) if scored_first else {}
        old_logprobs: torch.Tensor | None = scored.get("logprobs")
        metrics: dict[str, float] = {}
        kl = None
        per_episode: dict[str, list[float]] = {}
        if "ref_logprobs" in scored:
            kl = kl_penalty(old_logprobs, scored["ref_logprobs"], cfg.kl.estimator)
            metrics["actor/kl_ref"] = float(masked_mean(kl, mask))
            per_episode["kl_ref"] = _row_means(kl, mask)
        old_values: torch.Tensor | None = scored.get("values")
        targets = self.algorithm.compute_advantages(batch, cfg, values=old_values, kl=kl)
        advantages = targets.advantages
        norm = {
            "tokens": float(mask.sum().clamp(min=1.0)),
            "sequences": float(len(batch)),
            "max_tokens": float(self.config.rollout.max_turns * self.config.rollout.max_new_tokens),
        }
        kl_in_loss = kl is not None and not self.algorithm.kl_in_reward
        zero_advantage = (advantages * mask == 0).all(1)
        metrics["adv/zero_frac"] = float(zero_advantage.float().mean())
        trained_rows = self._rows_to_train(zero_advantage, kl_in_loss)
        micro_rows = (
            [trained_rows[rows] for rows in self._micro_rows(batch.select(trained_rows))] if len(trained_rows) else []
        )
        # The diagnostics (entropy, clip fraction, importance weights) are means over the tokens the passes computed.
        computed_norm = {**norm, "tokens": float(mask[trained_rows].sum().clamp(min=1.0))}
        if not on_policy and not scored_first and len(trained_rows):
            old_logprobs = self._score_batch(batch, micro_rows)["logprobs"]
        totals: dict[str, float] = {}
        grad_norm = 0.0
        for _ in range(self.config.train.update_epochs):
            self.optimizer.zero_grad(set_to_none=True)
            from_training_pass = []
            with self._precision():  # one region a pass: each weight cast to bf16 once
                for rows in micro_rows:
                    micro = batch.select(rows)
                    out = self._forward(self.model, micro, with_values=self.critic is not None, with_entropy=True)
                    micro_mask = micro.train_mask.to(self.device)
                    if old_logprobs is None:
                        from_training_pass.append(out["logprobs"].detach())
                    micro_old = from_training_pass[-1] if old_logprobs is None else old_logprobs[rows].to(self.device)
                    per_token, clipped = clipped_policy_loss(
                        out["logprobs"],
                        micro_old,
                        advantages[rows].to(self.device),
                        cfg.clip_eps,
                        cfg.clip_eps_high if cfg.clip_eps_high is not None else cfg.clip_eps,
                    )
                    parts = {}
                    if self.behaviour_correction():
                        weights = truncated_is_weights(
                            micro_old,
                            micro.rollout_logprobs.to(self.device),
                            micro.sampled_mask.to(self.device),
                            cfg.rollout_is.cap,
                        )
                        per_token = per_token * weights
                        parts["actor/rollout_is_weight"] = aggregate(weights, micro_mask, "token-mean", computed_norm)
                        parts["actor/rollout_is_capped_frac"] = aggregate(
                            (weights >= cfg.rollout_is.cap).float(), micro_mask, "token-mean", computed_norm
                        )
                    parts["loss/policy"] = aggregate(per_token, micro_mask, cfg.loss_agg, norm)
                    parts["actor/entropy"] = aggregate(out["entropy"], micro_mask, "token-mean", computed_norm)
                    parts["actor/clip_frac"] = aggregate(clipped, micro_mask, "token-mean", computed_norm)
                    loss = parts["loss/policy"] - cfg.entropy_coef * parts["actor/entropy"]
                    if kl_in_loss:  # the reference is frozen: its logprobs from the scoring pass still hold
                        ref = scored["ref_logprobs"][rows].to(self.device)
                        per_token_kl = kl_penalty(out["logprobs"], ref, cfg.kl.estimator)
                        parts["loss/kl"] = aggregate(per_token_kl, micro_mask, "token-mean", norm)
                        loss = loss + cfg.kl.coef * parts["loss/kl"]
                    extra_losses = self.algorithm.extra_losses(
                        cfg,
                        values=out.get("values"),
                        old_values=None if old_values is None else old_values[rows].to(self.device),
                        returns=None if targets.returns is None else targets.returns[rows].to(self.device),
                    )
                    for name, (weight, per_token_extra) in extra_losses.items():
                        parts[name] = aggregate(per_token_extra, micro_mask, "token-mean", norm)
                        loss = loss + weight * parts[name]
                    with self._precision(enabled=False):
                        loss.backward()
                    for name, value in parts.items():
                        totals[name] = totals.get(name, 0.0) + float(value.detach())
            if old_logprobs is None:
                old_logprobs = self._sum_rows(in_row_order(from_training_pass, micro_rows, tuple(mask.shape)))
            params = [p for group in self.optimizer.param_groups for p in group["params"]]
            if not micro_rows:  # no row carried a gradient: the zeros running them would have summed to, for AdamW
                for p in params:
                    p.grad = torch.zeros_like(p)
            self._sum_gradients(params)
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, self.config.train.max_grad_norm))
            if not math.isfinite(grad_norm):
                losses = ", ".join(f"{name} {value:.4g}" for name, value in totals.items() if name.startswith("loss/"))
                raise NonFiniteError(
                    f"the gradient norm is {grad_norm} (losses: {losses}); the optimizer step was not "
                    "taken, so the weights are those of the last step"
                )
            self.optimizer.step()
        assert old_logprobs is not None
        # Rollout vs trainer logprobs for the same weights: should be ~0 (docs/token-pipeline.md, rule 5). Over the rows
        # the learner computed: all of them when scored first, else those the update trained.
        learner_read = (
            torch.ones(len(batch), dtype=torch.bool) if scored_first else _rows_mask(trained_rows, len(batch))
        )
        gap_mask = batch.sampled_mask * learner_read[:, None]
        gap = (batch.rollout_logprobs - old_logprobs).abs()
        if gap_mask.any():
            metrics["actor/logprob_gap"] = float(masked_mean(gap, gap_mask))
        per_episode["logprob_gap"] = _row_means(gap, gap_mask)
        epochs = self.config.train.update_epochs
        metrics.update({name: total / epochs for name, total in self._sum_totals(totals).items()})
        trained = advantages[mask.bool()]
        metrics.update(
            {
                "actor/grad_norm": grad_norm,
                "adv/mean": float(trained.mean()) if trained.numel() else 0.0,
                "adv/std": float(trained.std(unbiased=False)) if trained.numel() else 0.0,
                "adv/min": float(trained.min()) if trained.numel() else 0.0,
                "adv/max": float(trained.max()) if trained.numel() else 0.0,
                "steps/advantage_spread": step_advantage_spread(advantages, batch),
            }
        )
        elapsed = time.perf_counter() - started
        metrics["perf/train_time_s"] = elapsed
        metrics["perf/train_tokens_per_s"] = float(batch.attention_mask.sum()) * epochs / elapsed if elapsed else 0.0
        if torch.cuda.is_available():
            metrics["perf/peak_memory_mb"] = torch.cuda.max_memory_allocated() / 2**20
        advantages_per_episode = []
        for row, episode in enumerate(episodes):
            n = len(episode.token_ids)
            advantages_per_episode.append(
                [
                    float(a) if trained else None
                    for a, trained in zip(advantages[row, :n].tolist(), mask[row, :n].bool().tolist())
                ]
            )
        return Update(metrics, advantages_per_episode, per_episode)

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"optimizer": self.optimizer.state_dict()}
        if self.critic is not None:
            state["value_head"] = self.critic.state_dict()  # the key checkpoints have always had
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        if self.critic is not None:
            self.critic.load_state_dict(state["value_head"])

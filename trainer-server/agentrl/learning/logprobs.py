"""Log-probabilities of chosen tokens under the policy, computed from the decoder's last hidden states without ever
making the whole [positions, vocabulary] logits tensor: the output head projects a chunk of read positions at a time
(`target_logprobs`), and a linear head's backward is written out (`_OutputHeadLogprobs`) so its weight gradient is one
well-shaped product a block of rows. The logits are the ones the rollout samples from: the model's own head, Gemma's
final soft-capping, divided by the rollout temperature. Exact: the same operations as the model's own forward
(`check_vocabulary_logits` proves it per model).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from agentrl.models.loading import text_config


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


def entropy_from_logits(logits: torch.Tensor, normaliser: torch.Tensor) -> torch.Tensor:
    return normaliser - (torch.softmax(logits, -1) * logits).sum(-1)  # H = log Z - E_p[logit]


def greedy_hits(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """1.0 where the target is the policy's most likely token (its logit the row's largest; the soft-cap and the
    temperature keep the order): the token accuracy an sft run reports, and a sampled token's greediness in RL."""
    return (logits.gather(-1, targets[:, None]).squeeze(-1) >= logits.amax(-1)).float()


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
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        dtype, rows = settings["dtype"], settings["chunk_rows"]
        with torch.autocast(hidden.device.type, enabled=False):  # the dtypes are chosen here, as autocast would
            inputs = hidden.to(dtype)
            head = weight.to(dtype)
            head_bias = None if bias is None else bias.to(dtype)
            picked, normalisers, entropies, hits, kept = [], [], [], [], []
            for hidden_chunk, target_chunk in zip(inputs.split(rows), targets.split(rows)):
                raw = nn.functional.linear(hidden_chunk, head, head_bias)  # [rows, V]
                logits = _sampling_logits(raw, settings["cap"], settings["temperature"])
                chunk_picked, normaliser = _target_logprob(logits, target_chunk)
                picked.append(chunk_picked)
                normalisers.append(normaliser)
                if settings["entropy"]:
                    entropies.append(entropy_from_logits(logits, normaliser))
                    hits.append(greedy_hits(logits, target_chunk))
                if settings["keep_logits"]:
                    kept.append(raw)
        logprobs = torch.cat(picked)
        entropy = torch.cat(entropies) if entropies else logprobs.new_zeros(0)
        greedy = torch.cat(hits) if hits else logprobs.new_zeros(0)
        # One call: each call replaces the last one's set.
        ctx.mark_non_differentiable(greedy, *([] if settings["entropy_grad"] else [entropy]))
        ctx.settings = settings
        ctx.input_dtype = hidden.dtype
        ctx.save_for_backward(inputs, head, head_bias, targets, torch.cat(normalisers), entropy, *kept)
        return logprobs, entropy, greedy

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: Any, logprob_grad: torch.Tensor, entropy_grad: torch.Tensor | None, _greedy_grad: torch.Tensor | None
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
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    logits = vocabulary_logits(model, hidden).float()  # [rows, V]
    if temperature != 1.0:  # a full pass over [rows, V], and another in the backward
        logits = logits / temperature
    picked, normaliser = _target_logprob(logits, targets)
    if not entropy:
        return picked, None, None
    # Last: non-reentrant checkpointing stops recomputing once it has every tensor the backward saved, so the
    # backward does not compute an entropy that carries no gradient again.
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        return picked, entropy_from_logits(logits, normaliser), greedy_hits(logits.detach(), targets)


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
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """log pi(target_n | hidden_n) for each of the N rows of `hidden` [N, H], and, when asked (`entropy`), the
    entropy of pi there (with a graph only with `entropy_grad`) and whether the target is pi's most likely token
    (`greedy_hits`, no graph): log_softmax(logits / T)[target] = logit_target / T - log Z.

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
        logprobs, entropies, greedy = _OutputHeadLogprobs.apply(hidden, head.weight, head.bias, targets, settings)
        return (logprobs, entropies, greedy) if entropy else (logprobs, None, None)
    checkpointed = torch.is_grad_enabled() and len(hidden) * vocabulary * dtype.itemsize > kept_logits_bytes
    picked_chunks, entropy_chunks, greedy_chunks = [], [], []
    for hidden_chunk, target_chunk in zip(hidden.split(chunk_rows), targets.split(chunk_rows)):
        args = (model, hidden_chunk, target_chunk, temperature, entropy, entropy_grad)
        if checkpointed:
            picked, chunk_entropy, chunk_greedy = checkpoint(_chunk_logprobs, *args, use_reentrant=False)
        else:
            picked, chunk_entropy, chunk_greedy = _chunk_logprobs(*args)
        picked_chunks.append(picked)
        entropy_chunks.append(chunk_entropy)
        greedy_chunks.append(chunk_greedy)
    if not entropy:
        return torch.cat(picked_chunks), None, None
    return torch.cat(picked_chunks), torch.cat(entropy_chunks), torch.cat(greedy_chunks)

"""Pieces every algorithm shares: masked statistics, returns, the loss aggregations, the KL estimators and the
per-step views of a batch (the policy losses are in agentrl/learning/policy_losses/)."""

from __future__ import annotations

import torch

EPS = 1e-6


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def masked_std(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mean = masked_mean(x, mask)
    return torch.sqrt(masked_mean((x - mean) ** 2, mask))


# Positions per block of the backward discounted sum: a block is one matrix product, blocks are chained.
_BLOCK = 256


def pack_chains(values: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's masked positions moved to its front, in order, zeros after them: (packed, order). The chain of
    trained tokens then has its `next` position one column to the right; `unpack_chains` puts results back."""
    order = torch.argsort((mask <= 0).to(torch.int8), dim=1, stable=True)
    return torch.gather(values * (mask > 0), 1, order), order


def unpack_chains(packed: torch.Tensor, order: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(packed).scatter(1, order, packed) * (mask > 0)


def discounted_sum_backward(packed: torch.Tensor, discount: float) -> torch.Tensor:
    """y_k = x_k + discount * y_{k+1} along each row (0 after the row's end), without a loop over positions:
    within a block of positions y = x D^T with D[k, j] = discount^(j - k) for j >= k, and each block adds the
    first y of the block after it, discounted: a loop over blocks of 256 positions. In float64."""
    x = packed.double()
    rows, width = x.shape
    steps = torch.arange(_BLOCK, dtype=torch.float64)
    gaps = steps[None, :] - steps[:, None]  # j - k
    weights = torch.where(gaps >= 0, discount ** gaps.clamp(min=0), torch.zeros(()))  # D
    result = torch.zeros_like(x)
    carry = torch.zeros(rows, dtype=torch.float64)  # y at the first position of the block after this one
    for start in reversed(range(0, width, _BLOCK)):
        block = x[:, start : start + _BLOCK]
        size = block.shape[1]
        inside = block @ weights[:size, :size].T + carry[:, None] * discount ** (size - steps[:size])
        result[:, start : start + size] = inside
        carry = inside[:, 0]
    return result.to(packed.dtype)


def returns_to_go(token_rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """G_t = r_t + gamma * G_next, where `next` is the next position with mask 1: the discount steps
    across trained tokens only, so tool tokens between turns neither discount nor reward."""
    packed, order = pack_chains(token_rewards, mask)
    return unpack_chains(discounted_sum_backward(packed, gamma), order, mask)


def episode_returns(token_rewards: torch.Tensor) -> torch.Tensor:
    """R_i = outcome reward + every process reward of episode i."""
    return token_rewards.sum(-1)


def group_stats(values: torch.Tensor, group_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: mean and (population) std of `values` over the rows of its group."""
    _, index = group_ids.unique(return_inverse=True)
    count = torch.zeros(int(index.max()) + 1 if len(index) else 0, dtype=values.dtype).index_add_(
        0, index, torch.ones_like(values)
    )
    mean = torch.zeros_like(count).index_add_(0, index, values) / count
    variance = torch.zeros_like(count).index_add_(0, index, (values - mean[index]) ** 2) / count
    return mean[index], variance.sqrt()[index]


def truncated_is_weights(
    old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, sampled: torch.Tensor, cap: float
) -> torch.Tensor:
    """Per-token w_t = min(pi_old(a_t) / pi_rollout(a_t), cap) on sampled tokens, 1 elsewhere (truncated importance
    sampling): pi_old is what the learner computes for the weights that sampled, pi_rollout what the engine's own
    kernels reported while sampling. No gradient flows through w."""
    ratio = torch.exp(old_logprobs - rollout_logprobs).clamp(max=cap)
    return torch.where(sampled > 0, ratio, torch.ones_like(ratio)).detach()


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, mode: str, norm: dict[str, float]) -> torch.Tensor:
    """Sum over this micro-batch, divided by a constant of the whole step, so that accumulating the
    micro-batches' gradients gives exactly the gradient of the full batch.

    token-mean:              sum_i,t L m / sum_i,t m                       (all tokens weigh the same)
    seq-mean-token-mean:     1/N sum_i (sum_t L m / sum_t m)               (all sequences weigh the same)
    seq-mean-token-sum-norm: 1/N sum_i (sum_t L m) / max_tokens            (Dr.GRPO: no length bias)
    """
    if mode == "token-mean":
        return (per_token * mask).sum() / norm["tokens"]
    per_sequence = (per_token * mask).sum(-1)
    if mode == "seq-mean-token-mean":
        return (per_sequence / mask.sum(-1).clamp(min=1.0)).sum() / norm["sequences"]
    if mode == "seq-mean-token-sum-norm":
        return per_sequence.sum() / (norm["sequences"] * norm["max_tokens"])
    raise ValueError(f"unknown loss aggregation {mode!r}")


def kl_penalty(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-token estimate of KL(pi || pi_ref) from samples of pi (Schulman's k1 and k3)."""
    log_ratio = logprobs - ref_logprobs  # log pi/pi_ref
    if estimator == "k1":
        return log_ratio  # k1 = log r: unbiased, high variance, can be negative
    if estimator == "k3":
        return torch.exp(-log_ratio) - 1.0 + log_ratio  # k3 = (r' - 1) - log r', r' = pi_ref/pi: unbiased, >= 0
    raise ValueError(f"unknown KL estimator {estimator!r}")


def step_rewards(token_rewards: torch.Tensor, token_turns: torch.Tensor, steps: int) -> torch.Tensor:
    """r_i,k = the rewards on turn k's tokens of episode i: its process reward, plus the outcome on the last turn.
    [B, T] -> [B, steps]."""
    in_turn = token_turns >= 0
    return torch.zeros(token_rewards.shape[0], steps, dtype=token_rewards.dtype).scatter_add_(
        1, token_turns.clamp(min=0), token_rewards * in_turn
    )


def step_sums(
    values: torch.Tensor, mask: torch.Tensor, token_turns: torch.Tensor, steps: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per episode and turn: the sum of `values` over the turn's trained tokens, and how many there are.
    [B, T] -> ([B, steps], [B, steps])."""
    in_turn = ((mask > 0) & (token_turns >= 0)).to(values.dtype)
    index = token_turns.clamp(min=0)
    counts = torch.zeros(mask.shape[0], steps, dtype=values.dtype).scatter_add_(1, index, in_turn)
    sums = torch.zeros(mask.shape[0], steps, dtype=values.dtype).scatter_add_(1, index, values * in_turn)
    return sums, counts


def trained_steps(mask: torch.Tensor, token_turns: torch.Tensor, steps: int) -> torch.Tensor:
    """[B, steps] bool: turn k of episode i has trained tokens (turns past an episode's end have none)."""
    return step_sums(mask, mask, token_turns, steps)[1] > 0


def first_token_of_steps(mask: torch.Tensor, token_turns: torch.Tensor, steps: int) -> torch.Tensor:
    """[B, steps] long: the position of turn k's first trained token (where its value is read); 0 for no such turn."""
    width = mask.shape[1]
    positions = torch.arange(width).expand_as(token_turns)
    candidates = torch.where((mask > 0) & (token_turns >= 0), positions, torch.full_like(positions, width))
    first = torch.full((mask.shape[0], steps), width, dtype=torch.long).scatter_reduce_(
        1, token_turns.clamp(min=0), candidates, reduce="amin"
    )
    return first.clamp(max=width - 1) * (first < width)


def over_tokens(per_step: torch.Tensor, token_turns: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Each trained token gets its turn's value: [B, steps] -> [B, T], 0 off the mask."""
    return torch.gather(per_step, 1, token_turns.clamp(min=0)) * (mask > 0) * (token_turns >= 0)

"""Pieces every algorithm shares: masked statistics, returns, the clipped policy loss with its three
aggregations, and the KL estimators."""

from __future__ import annotations

import torch

EPS = 1e-6


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def masked_std(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mean = masked_mean(x, mask)
    return torch.sqrt(masked_mean((x - mean) ** 2, mask))


def returns_to_go(token_rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """G_t = r_t + gamma * G_next, where `next` is the next position with mask 1: the discount steps
    across trained tokens only, so tool tokens between turns neither discount nor reward."""
    returns = torch.zeros_like(token_rewards)
    for row in range(token_rewards.shape[0]):
        running = 0.0
        for t in reversed(mask[row].nonzero().flatten().tolist()):
            running = float(token_rewards[row, t]) + gamma * running
            returns[row, t] = running
    return returns


def episode_returns(token_rewards: torch.Tensor) -> torch.Tensor:
    """R_i = outcome reward + every process reward of episode i."""
    return token_rewards.sum(-1)


def group_stats(values: torch.Tensor, group_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: mean and (population) std of `values` over the rows of its group."""
    means, stds = torch.empty_like(values), torch.empty_like(values)
    for group in group_ids.unique():
        rows = group_ids == group
        means[rows] = values[rows].mean()
        stds[rows] = values[rows].std(unbiased=False)
    return means, stds


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float,
    clip_high: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token PPO surrogate: L = max(-A * r, -A * clip(r, 1 - eps_low, 1 + eps_high)), r = pi / pi_old.
    Returns (loss per token, 1 where the clip was active)."""
    ratio = torch.exp(logprobs - old_logprobs)  # r_t
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    return torch.maximum(unclipped, clipped), (clipped > unclipped).float()


def truncated_is_weights(old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, sampled: torch.Tensor,
                         cap: float) -> torch.Tensor:
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

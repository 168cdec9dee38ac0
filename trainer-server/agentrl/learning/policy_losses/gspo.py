"""GSPO (Zheng et al. 2025, arXiv 2507.18071): the clipped surrogate with one importance ratio per sequence, the
geometric mean of its tokens' ratios, in its token form (GSPO-token), so each token keeps its own advantage:

    s_i     = exp( 1/|y_i| sum_t log(pi(a_t) / pi_old(a_t)) )        over sequence i's trained tokens
    s_i,t   = sg[s_i] * pi(a_t) / sg[pi(a_t)]                          value s_i, gradient through log pi(a_t)
    L_i,t   = max(-A_i,t s_i,t, -A_i,t clip(s_i,t, 1 - eps_low, 1 + eps_high))

A sequence is an episode (every turn's trained tokens). Clipping a whole sequence on one ratio needs a far narrower
range than PPO's per-token one: the paper uses eps_low 3e-4 and eps_high 4e-4 (`algorithm.clip_eps`,
`algorithm.clip_eps_high`).
"""

from __future__ import annotations

import torch

from agentrl.contract.training_config import AlgorithmConfig


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    cfg: AlgorithmConfig,
) -> tuple[torch.Tensor, torch.Tensor]:
    trained = (mask > 0).to(logprobs.dtype)
    log_ratio = (logprobs - old_logprobs) * trained
    sequence_log_ratio = log_ratio.sum(-1) / trained.sum(-1).clamp(min=1.0)  # log s_i
    token_log_ratio = sequence_log_ratio.detach()[:, None] + logprobs - logprobs.detach()  # log s_i,t
    ratio = torch.exp(token_log_ratio)
    clip_low, clip_high = cfg.clip_eps_range()
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    return torch.maximum(unclipped, clipped), (clipped > unclipped).float()

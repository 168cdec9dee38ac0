"""The advantage-weighted negative log-likelihood, no ratio and no clip:

    L_t = -A_t log pi(a_t)

With sft's advantages (A_t = 1 on every demonstrated token) it is the cross-entropy of supervised fine-tuning, and
the learner's token-mean makes it the mean negative log-likelihood of the batch's trained tokens (the DeepSeek-R1
cold start, STaR's and RFT's fine-tuning on kept episodes). Under a policy-gradient algorithm it is plain
REINFORCE: the same gradient as the clipped surrogate on-policy, with no bound on how far an update moves.
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
    return -advantages * logprobs, torch.zeros_like(logprobs)  # -A_t log pi(a_t); nothing is ever clipped

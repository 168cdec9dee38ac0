"""CISPO (MiniMax-M1, arXiv 2506.13585): REINFORCE with a clipped, stop-gradient importance weight, so no token's
gradient is ever dropped (PPO's clip zeroes the gradient of a token whose ratio left the range; CISPO only bounds its
weight):

    r_t = pi(a_t) / pi_old(a_t)
    L_t = -sg[clip(r_t, 1 - eps_low, 1 + eps_high)] * A_t * log pi(a_t)

On-policy (r_t = 1) its gradient is PPO's. MiniMax-M1 bounds only the top (no lower clip: `algorithm.clip_eps` 10)
and tunes eps_high (`algorithm.clip_eps_high`).
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
    ratio = torch.exp(logprobs.detach() - old_logprobs)  # r_t, no gradient
    clip_low, clip_high = cfg.clip_eps_range()
    weight = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)  # sg[clip(r_t)]
    return -weight * advantages * logprobs, (weight != ratio).float()

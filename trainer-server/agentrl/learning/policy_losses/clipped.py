"""PPO's clipped surrogate (Schulman et al. 2017), per token, with DAPO's clip-higher (`algorithm.clip_eps_high`):

    r_t = pi(a_t) / pi_old(a_t)
    L_t = max(-A_t r_t, -A_t clip(r_t, 1 - eps_low, 1 + eps_high))

The default policy loss of every algorithm.
"""

from __future__ import annotations

import torch

from agentrl.contract.training_config import AlgorithmConfig


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float,
    clip_high: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (loss per token, 1 where the clip was active)."""
    ratio = torch.exp(logprobs - old_logprobs)  # r_t
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    return torch.maximum(unclipped, clipped), (clipped > unclipped).float()


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    cfg: AlgorithmConfig,
) -> tuple[torch.Tensor, torch.Tensor]:
    return clipped_policy_loss(logprobs, old_logprobs, advantages, *cfg.clip_eps_range())

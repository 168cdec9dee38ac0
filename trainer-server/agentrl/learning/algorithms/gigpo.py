"""GiGPO: group-in-group policy optimisation, advantages at two levels (Feng et al., 2025, arXiv 2505.10978).

A group is the episodes sampled for one task; inside it, the steps that start from the same environment state
(the env's `state_key`, else the observation the model read) form an anchor-state group. Step k of episode i:
    r_i,k   = the rewards of step k (its process reward; the outcome on the last step)
    R_i,k   = r_i,k + gamma * R_i,k+1                          (the discounted return from step k, 0 past the end)
    A^E_i   = (R_i - mean_g(R)) / (std_g(R) + eps)             (episode level: GRPO over the group's totals)
    A^S_i,k = (R_i,k - mean_s(R)) / (std_s(R) + eps)           (step level: over the anchor group s of step k)
    A_i,t   = A^E_i + omega * A^S_i,k                          for every token t of step k
R_i is episode i's total reward, omega is algorithm.step_advantage_weight, gamma algorithm.gamma (the paper: 0.95).
With norm_adv_by_std false neither level divides by its std. A group or anchor group whose returns are all equal
carries no signal at its level and gets 0 there; an anchor group of one step (a state no other sample reached) too.
Without repeated states every anchor group but the first step's is of size one, and GiGPO is GRPO plus the
first-step term. The loss is the clipped surrogate.
"""

from __future__ import annotations

import torch

from agentrl.contract.training_config import AlgorithmConfig
from agentrl.learning.algorithms.base import Advantages, Algorithm
from agentrl.learning.algorithms.common import (
    EPS,
    episode_returns,
    group_stats,
    over_tokens,
    step_rewards,
    trained_steps,
)
from agentrl.learning.batch import TrainBatch


def discounted_step_returns(rewards: torch.Tensor, exists: torch.Tensor, gamma: float) -> torch.Tensor:
    """R_k = r_k + gamma * R_next over each row's steps, next = the row's next existing step; 0 where none."""
    returns = torch.zeros_like(rewards)
    later = torch.zeros(rewards.shape[0], dtype=rewards.dtype)  # R of the next existing step
    for k in reversed(range(rewards.shape[1])):
        here = rewards[:, k] + gamma * later  # R_k
        returns[:, k] = torch.where(exists[:, k], here, torch.zeros_like(here))
        later = torch.where(exists[:, k], here, later)
    return returns


def normalised(values: torch.Tensor, groups: torch.Tensor, by_std: bool) -> torch.Tensor:
    """(x - mean) / (std + eps) within each group (no division when not by_std); 0 for a group whose values are
    all equal, a group of one included."""
    mean, std = group_stats(values, groups)
    centred = values - mean
    if by_std:
        centred = centred / (std + EPS)
    return torch.where(std < EPS, torch.zeros_like(centred), centred)


class GiGPO(Algorithm):
    def compute_advantages(
        self,
        batch: TrainBatch,
        cfg: AlgorithmConfig,
        *,
        values: torch.Tensor | None = None,
        kl: torch.Tensor | None = None,
    ) -> Advantages:
        if batch.turn_states is None:
            raise ValueError("GiGPO needs each turn's state (TrainBatch.turn_states, from collate)")
        mask = batch.train_mask
        steps = batch.turn_states.shape[1]
        exists = trained_steps(mask, batch.token_turns, steps)
        returns = discounted_step_returns(
            step_rewards(batch.token_rewards, batch.token_turns, steps), exists, cfg.gamma
        )
        episode_level = normalised(episode_returns(batch.token_rewards), batch.group_ids, cfg.norm_adv_by_std)  # A^E_i
        rows, ks = exists.nonzero(as_tuple=True)
        anchors = batch.group_ids[rows] * (int(batch.turn_states.max()) + 1) + batch.turn_states[rows, ks]  # (g, s)
        step_level = torch.zeros_like(returns)
        step_level[rows, ks] = normalised(returns[rows, ks], anchors, cfg.norm_adv_by_std)  # A^S_i,k
        per_step = episode_level[:, None] + cfg.step_advantage_weight * step_level  # A^E_i + omega * A^S_i,k
        return Advantages(over_tokens(per_step, batch.token_turns, mask))


ALGORITHM = GiGPO()

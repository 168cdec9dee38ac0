"""RLOO: REINFORCE with a leave-one-out baseline (Ahmadian et al., 2024).

Rewards -> advantages. With k samples in a group, token t of episode i gets
    A_i,t = G_i,t - 1/(k-1) * sum_{j != i} R_j
where R_j is episode j's total reward and G_i,t the reward still to come from token t (outcome plus
the process rewards of its turn and later turns). The baseline excludes the sample itself, so it is
unbiased; a group of one has no baseline (A = G). The loss is the clipped surrogate.
"""

from __future__ import annotations

import torch

from agentrl.contract.training_config import AlgorithmConfig
from agentrl.learning.algorithms.base import Advantages, Algorithm
from agentrl.learning.algorithms.common import episode_returns, returns_to_go
from agentrl.learning.batch import TrainBatch


class RLOO(Algorithm):
    def compute_advantages(
        self,
        batch: TrainBatch,
        cfg: AlgorithmConfig,
        *,
        values: torch.Tensor | None = None,
        kl: torch.Tensor | None = None,
    ) -> Advantages:
        rewards = batch.token_rewards
        episode_return = episode_returns(rewards)  # R_j
        baseline = torch.zeros_like(episode_return)
        for group in batch.group_ids.unique():
            rows = batch.group_ids == group
            k = int(rows.sum())
            if k > 1:
                baseline[rows] = (episode_return[rows].sum() - episode_return[rows]) / (k - 1)  # mean of the others
        to_go = returns_to_go(rewards, batch.train_mask)  # G_i,t
        return Advantages((to_go - baseline[:, None]) * batch.train_mask)  # G_i,t - baseline


ALGORITHM = RLOO()

"""REINFORCE++: token-level REINFORCE with the KL penalty in the reward and a global baseline
(Hu, 2025).

Rewards -> advantages. Each trained token's reward is its environment reward minus the KL penalty,
    r'_t = r_t - beta * kl_t            (r_t: process reward on a turn's last token, outcome on the last)
the return discounts across trained tokens only (tool tokens are skipped),
    G_t = r'_t + gamma * G_next
and the advantage is G normalised over every trained token of the whole batch:
    A_t = (G_t - mean_batch(G)) / (std_batch(G) + eps)
Because the KL is already in the reward, the learner adds no separate KL loss for this algorithm.
"""

from __future__ import annotations

import torch

from agentrl.contract.training_config import AlgorithmConfig
from agentrl.learning.algorithms.base import Advantages, Algorithm
from agentrl.learning.algorithms.common import EPS, masked_mean, masked_std, returns_to_go
from agentrl.learning.batch import TrainBatch


class ReinforcePP(Algorithm):
    kl_in_reward = True  # r'_t below holds the KL penalty: the learner adds no KL loss

    def compute_advantages(
        self,
        batch: TrainBatch,
        cfg: AlgorithmConfig,
        *,
        values: torch.Tensor | None = None,
        kl: torch.Tensor | None = None,
    ) -> Advantages:
        rewards = batch.token_rewards
        if kl is not None and cfg.kl.coef > 0:
            rewards = rewards - cfg.kl.coef * kl * batch.train_mask  # r'_t = r_t - beta * kl_t
        to_go = returns_to_go(rewards, batch.train_mask, cfg.gamma)  # G_t
        mean, std = masked_mean(to_go, batch.train_mask), masked_std(to_go, batch.train_mask)
        return Advantages((to_go - mean) / (std + EPS) * batch.train_mask)  # (G_t - mean(G)) / (std(G) + eps)


ALGORITHM = ReinforcePP()

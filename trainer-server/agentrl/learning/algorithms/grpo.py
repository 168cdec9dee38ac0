"""GRPO: the group of samples of one prompt is its own baseline (Shao et al., 2024).

Rewards -> advantages. Let G_i,t be the reward still to come from token t of episode i: the outcome
plus the process rewards of t's own turn and of later turns (gamma = 1). Token t in turn k gets
    A_i,t = (G_i,t - b_g,k) / (std_g(R) + eps)       (Dr.GRPO, norm_adv_by_std=false: no division)
    b_g,k = mean of G_j at the start of turn k, over the episodes j of the group that reached turn k
    R_j   = G_j at its first token = outcome + every process reward of episode j
Without process rewards every G_i,t = R_i, b_g,k = mean_g(R), and this is the paper's GRPO. With
them, a turn is credited with its own and later turns' process rewards, against the group's
average at the same turn. A group whose episodes all earned the same total reward carries no
signal and gets zero advantage. The loss is the clipped surrogate (DAPO clip-higher via clip_eps_high).
"""

from __future__ import annotations

import torch

from agentrl.contract.training_config import AlgorithmConfig
from agentrl.learning.algorithms.base import Advantages, Algorithm
from agentrl.learning.algorithms.common import EPS, episode_returns, group_stats, returns_to_go
from agentrl.learning.batch import TrainBatch


class GRPO(Algorithm):
    def compute_advantages(
        self,
        batch: TrainBatch,
        cfg: AlgorithmConfig,
        *,
        values: torch.Tensor | None = None,
        kl: torch.Tensor | None = None,
    ) -> Advantages:
        mask = batch.train_mask
        to_go = returns_to_go(batch.token_rewards, mask)  # G_i,t
        _, std = group_stats(episode_returns(batch.token_rewards), batch.group_ids)  # std_g(R)
        advantages = torch.zeros_like(to_go)
        for group in batch.group_ids.unique():
            rows = (batch.group_ids == group).nonzero().flatten().tolist()
            for turn in batch.token_turns[rows].unique().tolist():
                in_turn = (batch.token_turns == turn) & (mask > 0)
                reached = [r for r in rows if bool(in_turn[r].any())]
                if not reached:
                    continue
                starts = [float(to_go[r, in_turn[r].nonzero()[0, 0]]) for r in reached]  # G_j at the start of turn k
                baseline = sum(starts) / len(starts)  # b_g,k
                for r in reached:
                    advantages[r, in_turn[r]] = to_go[r, in_turn[r]] - baseline  # G_i,t - b_g,k
        if cfg.norm_adv_by_std:
            advantages = advantages / (std[:, None] + EPS)  # / (std_g(R) + eps)
        no_signal = std < EPS  # every episode of the group earned the same total reward
        advantages[no_signal] = 0.0
        return Advantages(advantages * mask)


ALGORITHM = GRPO()

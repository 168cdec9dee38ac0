"""RFT: rejection-sampling fine-tuning, expert iteration online (STaR, RFT, RAFT, ReST-EM): each step the policy
samples its rollouts, the episodes that earned enough are kept, and the model imitates them.

Let R_i be episode i's total reward (outcome + every process reward) and F the step's episodes that pass
algorithm.rft_where (Search Episodes' filters; every episode when unset). The kept episodes are
    K = F & { i : R_i >= tau }                          algorithm.rft_min_reward: tau
    K = F & { i : R_i = max_g R > min_g R }             unset: each group's best, where the group differs
and every trained token of a kept episode is a token to imitate, the others nothing:
    A_i,t = 1[i in K]
so with the policy loss `nll` (rft's default, as sft's) the update minimises L = -mean_t A_t log pi(a_t): the
cross-entropy of the kept episodes' sampled tokens. No critic, no baseline: a failure teaches nothing, and a group
whose samples all earned the same teaches nothing unless tau keeps them all.
"""

from __future__ import annotations

import torch

from agentrl.contract.training_config import AlgorithmConfig
from agentrl.learning.algorithms.base import Advantages, Algorithm
from agentrl.learning.algorithms.common import EPS, episode_returns
from agentrl.learning.batch import TrainBatch


class RFT(Algorithm):
    def compute_advantages(
        self,
        batch: TrainBatch,
        cfg: AlgorithmConfig,
        *,
        values: torch.Tensor | None = None,
        kl: torch.Tensor | None = None,
    ) -> Advantages:
        returns = episode_returns(batch.token_rewards)  # R_i
        if cfg.rft_min_reward is not None:
            kept = returns >= cfg.rft_min_reward  # R_i >= tau
        else:
            kept = torch.zeros_like(returns, dtype=torch.bool)
            for group in batch.group_ids.unique():
                rows = batch.group_ids == group
                best, worst = returns[rows].max(), returns[rows].min()
                kept |= rows & (returns >= best - EPS) & (best - worst > EPS)  # R_i = max_g R > min_g R
        if batch.passes_filter is not None:
            kept &= batch.passes_filter  # i in F
        return Advantages(batch.train_mask * kept[:, None].to(batch.train_mask.dtype))  # A_i,t = 1[i in K]


ALGORITHM = RFT()

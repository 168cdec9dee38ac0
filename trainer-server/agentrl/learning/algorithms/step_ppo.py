"""Step-level PPO: GAE over the agent's steps, not its tokens (StepPO, the Agent-R1 line's step-level MDP).

An episode is a chain of steps (turns); the state of step k is everything before its first sampled token, so the
critic's value of step k is V_t at that token (the same value head as `ppo`, read once per step):
    r_k       = the rewards of step k (its process reward; the outcome on the last step)
    delta_k   = r_k + gamma * V_k+1 - V_k                      (V after the last step = 0)
    A_k       = delta_k + gamma * lambda * A_k+1
    returns_k = A_k + V_k                                      (the value target)
and every token of step k gets A_k. The critic is fit on every token of a step to that step's return (its value
at the step's first token is the one GAE reads; the other tokens share the target). Against token-level `ppo`,
gamma and lambda discount per step instead of per token, so credit does not fade with a turn's length, and the
advantage does not change inside a turn. Loss: as `ppo` (clipped policy loss + the clipped value loss).
"""

from __future__ import annotations

import torch

from agentrl.contract.training_config import AlgorithmConfig
from agentrl.learning.algorithms.base import Advantages
from agentrl.learning.algorithms.common import first_token_of_steps, over_tokens, step_rewards, trained_steps
from agentrl.learning.algorithms.ppo import PPO
from agentrl.learning.batch import TrainBatch


class StepPPO(PPO):
    def compute_advantages(
        self,
        batch: TrainBatch,
        cfg: AlgorithmConfig,
        *,
        values: torch.Tensor | None = None,
        kl: torch.Tensor | None = None,
    ) -> Advantages:
        if values is None:
            raise ValueError("step-level PPO needs the critic's values")
        mask = batch.train_mask
        steps = int(batch.token_turns.max()) + 1 if batch.token_turns.numel() else 0
        exists = trained_steps(mask, batch.token_turns, steps)
        rewards = step_rewards(batch.token_rewards, batch.token_turns, steps)  # r_k
        step_values = torch.gather(values.float(), 1, first_token_of_steps(mask, batch.token_turns, steps))  # V_k
        advantages = torch.zeros_like(rewards)
        later_value = torch.zeros(len(batch), dtype=rewards.dtype)  # V_k+1 of the row's next step
        later_advantage = torch.zeros(len(batch), dtype=rewards.dtype)  # A_k+1
        for k in reversed(range(steps)):
            delta = rewards[:, k] + cfg.gamma * later_value - step_values[:, k]  # delta_k
            here = delta + cfg.gamma * cfg.lam * later_advantage  # A_k
            advantages[:, k] = torch.where(exists[:, k], here, torch.zeros_like(here))
            later_value = torch.where(exists[:, k], step_values[:, k], later_value)
            later_advantage = torch.where(exists[:, k], here, later_advantage)
        step_returns = (advantages + step_values) * exists  # returns_k = A_k + V_k
        return Advantages(
            over_tokens(advantages, batch.token_turns, mask), returns=over_tokens(step_returns, batch.token_turns, mask)
        )


ALGORITHM = StepPPO()

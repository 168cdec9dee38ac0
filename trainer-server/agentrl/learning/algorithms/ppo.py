"""PPO with a value head and GAE over assistant tokens only (Schulman et al., 2017; Agent-R1).

The critic is a linear value head on the policy's last hidden state: V_t is read from the hidden
state that predicts token t, i.e. the value of the state just before token t is sampled.

Rewards -> advantages. The trained tokens of an episode, in order, form one chain; tool and
observation tokens between turns are skipped (the advantage mask), so the bootstrap jumps from the
last assistant token of turn k to the first assistant token of turn k+1:
    delta_k = r_k + gamma * V_{k+1} - V_k              (V after the last trained token = 0)
    A_k     = delta_k + gamma * lambda * A_{k+1}
    returns_k = A_k + V_k                              (the value target)
r_k is the process reward on each turn's last token and the outcome on the episode's last token.
Loss: the clipped policy loss + vf_coef * 0.5 * max((V - ret)^2, (clip(V, V_old +- vf_clip) - ret)^2).
"""

from __future__ import annotations

import torch
from torch import nn

from agentrl.contract.training_config import AlgorithmConfig
from agentrl.learning.algorithms.base import Advantages, Algorithm
from agentrl.learning.algorithms.common import discounted_sum_backward, pack_chains, unpack_chains
from agentrl.learning.batch import TrainBatch


class ValueHead(nn.Linear):
    """V_t = w . h_{t-1} + b on the policy's last hidden states [rows, width, hidden] -> [rows, width]. Starts at
    V = 0 (zero weights), so the first advantages are the plain discounted returns."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__(hidden_size, 1)
        nn.init.zeros_(self.weight)
        nn.init.zeros_(self.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        values = super().forward(hidden[:, :-1].float()).squeeze(-1)  # h_{t-1} -> V_t
        return nn.functional.pad(values, (1, 0))  # nothing precedes the first token: V_0 = 0


class PPO(Algorithm):
    def make_critic(self, hidden_size: int) -> ValueHead:
        return ValueHead(hidden_size)

    def compute_advantages(
        self,
        batch: TrainBatch,
        cfg: AlgorithmConfig,
        *,
        values: torch.Tensor | None = None,
        kl: torch.Tensor | None = None,
    ) -> Advantages:
        if values is None:
            raise ValueError("PPO needs the critic's values")
        mask = batch.train_mask  # the advantage mask: each row's trained tokens, in order, are one chain
        rewards, order = pack_chains(batch.token_rewards, mask)
        chain_values, _ = pack_chains(values, mask)
        next_values = nn.functional.pad(chain_values[:, 1:], (0, 1))  # V_{k+1}; 0 after the last trained token
        deltas = rewards + cfg.gamma * next_values - chain_values  # delta_k (0 past the chain's end)
        advantages = unpack_chains(discounted_sum_backward(deltas, cfg.gamma * cfg.lam), order, mask)  # A_k
        return Advantages(advantages, returns=(advantages + values) * mask)  # returns_k = A_k + V_k

    def extra_losses(
        self,
        cfg: AlgorithmConfig,
        *,
        values: torch.Tensor | None,
        old_values: torch.Tensor | None,
        returns: torch.Tensor | None,
    ) -> dict[str, tuple[float, torch.Tensor]]:
        assert values is not None and old_values is not None and returns is not None  # the critic's, see make_critic
        clipped = old_values + torch.clamp(values - old_values, -cfg.vf_clip, cfg.vf_clip)  # clip(V, V_old +- vf_clip)
        per_token = 0.5 * torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)
        return {"loss/value": (cfg.vf_coef, per_token)}


ALGORITHM = PPO()

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
Value loss: 0.5 * max((V - ret)^2, (clip(V, V_old +- vf_clip) - ret)^2).
"""

from __future__ import annotations

import torch

from agentrl.algorithms.common import discounted_sum_backward, pack_chains, unpack_chains
from agentrl.batch import TrainBatch
from agentrl.config import AlgorithmConfig

NEEDS_CRITIC = True


def compute_advantages(
    batch: TrainBatch, cfg: AlgorithmConfig, *, values: torch.Tensor | None = None, **_: object
) -> tuple[torch.Tensor, torch.Tensor]:
    if values is None:
        raise ValueError("PPO needs the critic's values")
    mask = batch.train_mask  # the advantage mask: each row's trained tokens, in order, are one chain
    rewards, order = pack_chains(batch.token_rewards, mask)
    chain_values, _ = pack_chains(values, mask)
    next_values = torch.nn.functional.pad(chain_values[:, 1:], (0, 1))  # V_{k+1}; 0 after the last trained token
    deltas = rewards + cfg.gamma * next_values - chain_values  # delta_k (0 past the chain's end)
    advantages = unpack_chains(discounted_sum_backward(deltas, cfg.gamma * cfg.lam), order, mask)  # A_k
    returns = (advantages + values) * mask  # value targets
    return advantages, returns


def value_loss(
    new_values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, vf_clip: float
) -> torch.Tensor:
    clipped = old_values + torch.clamp(new_values - old_values, -vf_clip, vf_clip)
    return 0.5 * torch.maximum((new_values - returns) ** 2, (clipped - returns) ** 2)  # per token

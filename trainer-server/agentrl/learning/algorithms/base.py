"""What the learner asks of an algorithm. Each file beside this one answers it for one algorithm.

The learner's part is the same for all of them: score the batch (pi_old, pi_ref, the critic's values), ask the
algorithm for advantages, then minimise the clipped policy loss - entropy bonus (+ KL penalty) + the algorithm's
extra loss terms, over micro-batches and update epochs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch
from torch import nn

from agentrl.contract.training_config import AlgorithmConfig
from agentrl.learning.batch import TrainBatch


@dataclass(frozen=True)
class Advantages:
    advantages: torch.Tensor  # A_t per token; 0 off the train mask
    returns: torch.Tensor | None = None  # the critic's targets, for an algorithm with a critic


class Algorithm(ABC):
    kl_in_reward: bool = False
    """True: with algorithm.kl.coef > 0 the KL penalty is subtracted from the reward that `compute_advantages`
    receives, and the learner adds no KL term to the loss."""

    def make_critic(self, hidden_size: int) -> nn.Module | None:
        """A critic, trained beside the policy at train.critic_lr: it maps the policy's last hidden states
        [rows, width, hidden_size] to per-token values [rows, width]. None: this algorithm needs none."""
        return None

    @abstractmethod
    def compute_advantages(
        self,
        batch: TrainBatch,
        cfg: AlgorithmConfig,
        *,
        values: torch.Tensor | None = None,
        kl: torch.Tensor | None = None,
    ) -> Advantages:
        """Per-token advantages from the batch's per-token rewards. `values`: the critic's V_t before the update
        (with a critic); `kl`: the per-token KL to the reference (when algorithm.kl.coef > 0)."""

    def extra_losses(
        self,
        cfg: AlgorithmConfig,
        *,
        values: torch.Tensor | None,
        old_values: torch.Tensor | None,
        returns: torch.Tensor | None,
    ) -> dict[str, tuple[float, torch.Tensor]]:
        """Loss terms beside the policy's, for one micro-batch: metric name -> (weight, loss per token); the
        learner averages each over the trained tokens. `values`: the critic's in this pass, `old_values` before
        the update, `returns` from `compute_advantages` (each None without a critic)."""
        return {}

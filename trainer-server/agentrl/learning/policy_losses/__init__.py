"""The policy losses, one file each, read top to bottom: `<name>.py` defines `policy_loss`, which turns the policy's
and pi_old's per-token logprobs and the advantages into a loss per token, with the equation beside each line.

The names are the run contract's (`agentrl.contract.training_config.POLICY_LOSS_NAMES`, the run config's
`algorithm.policy_loss`); this registry finds each name's file, beside the algorithm registry (which decides the
advantages: `agentrl.learning.algorithms`).
"""

from __future__ import annotations

import importlib
from typing import Protocol

import torch

from agentrl.contract.training_config import POLICY_LOSS_NAMES, AlgorithmConfig


class PolicyLoss(Protocol):
    def __call__(
        self,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        advantages: torch.Tensor,
        mask: torch.Tensor,
        cfg: AlgorithmConfig,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """For a micro-batch's rows [rows, T]: (loss per token, 1 where a clip was active), both read only on `mask`
        (the trained tokens); the learner aggregates the loss by `algorithm.loss_agg`."""
        ...


def get_policy_loss(name: str) -> PolicyLoss:
    """The `policy_loss` that agentrl/learning/policy_losses/<name>.py defines."""
    if name not in POLICY_LOSS_NAMES:
        raise ValueError(f"unknown policy loss {name!r}; known: {sorted(POLICY_LOSS_NAMES)}")
    return importlib.import_module(f"{__name__}.{name}").policy_loss

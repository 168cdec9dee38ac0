"""The policy losses, one file each, read top to bottom: `<name>.py` defines `policy_loss`, which turns the policy's
and pi_old's per-token logprobs and the advantages into a loss per token, with the equation beside each line.

The names are the run contract's (`agentrl.contract.training_config.POLICY_LOSS_NAMES`, the run config's
`algorithm.policy_loss`); this registry finds each name's file, beside the algorithm registry (which decides the
advantages: `agentrl.learning.algorithms`). A user's own loss is named MODULE:NAME instead: a function with the
`PolicyLoss` signature, loaded as the env's code is.
"""

from __future__ import annotations

import importlib
from typing import Protocol

import torch

from agentrl.contract.training_config import POLICY_LOSS_NAMES, AlgorithmConfig
from agentrl.environment.user_code import load_named


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
    """The `policy_loss` that agentrl/learning/policy_losses/<name>.py defines, or the user's function that `name`
    gives as MODULE:NAME."""
    if ":" in name:
        return load_named(name, "algorithm.policy_loss")
    if name not in POLICY_LOSS_NAMES:
        raise ValueError(
            f"unknown policy loss {name!r}; known: {sorted(POLICY_LOSS_NAMES)}, or MODULE:NAME of your own"
        )
    return importlib.import_module(f"{__name__}.{name}").policy_loss

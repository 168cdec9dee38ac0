"""SFT: supervised fine-tuning on given episodes (data.sft: a run's picked episodes, or demonstrations), in the same
learner, token pipeline and loss mask as the policy-gradient algorithms.

Every trained token is a token to imitate, whatever reward its episode earned (the episodes were picked for it):
    A_t = 1            on the trained tokens (the assistant's: never the prompt's or the observations')
and the policy loss `nll` (sft's default) makes the update minimise
    L = -mean_t log pi(a_t)
the demonstrations' cross-entropy. No critic, no group baseline; a KL to the reference (algorithm.kl.coef) keeps the
model near where it started, as in RL.
"""

from __future__ import annotations

import torch

from agentrl.contract.training_config import AlgorithmConfig
from agentrl.learning.algorithms.base import Advantages, Algorithm
from agentrl.learning.batch import TrainBatch


class SFT(Algorithm):
    def compute_advantages(
        self,
        batch: TrainBatch,
        cfg: AlgorithmConfig,
        *,
        values: torch.Tensor | None = None,
        kl: torch.Tensor | None = None,
    ) -> Advantages:
        return Advantages(batch.train_mask.clone())  # A_t = 1 on every trained token


ALGORITHM = SFT()

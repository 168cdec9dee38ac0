"""The algorithms, one file each, read top to bottom: `<name>.py` turns per-token rewards into per-token
advantages, with the equation beside each line, and says what else it needs from the learner (`base.Algorithm`).

This module is the one registry of their names: the run config's `algorithm.name`, the server's capabilities
and the learner all read `ALGORITHM_NAMES`. It imports no torch, so the config and the server load fast; an
algorithm's file is imported when the learner asks for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    from agentrl.learning.algorithms.base import Algorithm

AlgorithmName = Literal["gigpo", "grpo", "ppo", "reinforce_pp", "rloo", "step_ppo"]  # each the name of its file here
ALGORITHM_NAMES: tuple[AlgorithmName, ...] = get_args(AlgorithmName)


def get_algorithm(name: str) -> Algorithm:
    """The `ALGORITHM` that agentrl/learning/algorithms/<name>.py defines."""
    if name not in ALGORITHM_NAMES:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHM_NAMES)}")
    return importlib.import_module(f"{__name__}.{name}").ALGORITHM

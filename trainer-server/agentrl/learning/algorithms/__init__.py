"""The algorithms, one file each, read top to bottom: `<name>.py` turns per-token rewards into per-token
advantages, with the equation beside each line, and says what else it needs from the learner (`base.Algorithm`).

The names are the run contract's (`agentrl.contract.training_config.ALGORITHM_NAMES`: the run config's `algorithm.name`
and the server's capabilities read them); this registry finds each name's file, imported when the learner asks.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from agentrl.contract.training_config import ALGORITHM_NAMES

if TYPE_CHECKING:
    from agentrl.learning.algorithms.base import Algorithm


def get_algorithm(name: str) -> Algorithm:
    """The `ALGORITHM` that agentrl/learning/algorithms/<name>.py defines."""
    if name not in ALGORITHM_NAMES:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHM_NAMES)}")
    return importlib.import_module(f"{__name__}.{name}").ALGORITHM

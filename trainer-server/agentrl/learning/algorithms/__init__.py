"""The algorithms, one file each, read top to bottom: `<name>.py` turns per-token rewards into per-token
advantages, with the equation beside each line, and says what else it needs from the learner (`base.Algorithm`).

The names are the run contract's (`agentrl.contract.training_config.ALGORITHM_NAMES`: the run config's `algorithm.name`
and the server's capabilities read them); this registry finds each name's file, imported when the learner asks. A
user's own algorithm is named MODULE:NAME instead: a subclass of `base.Algorithm`, loaded as the env's code is.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from agentrl.contract.training_config import ALGORITHM_NAMES
from agentrl.environment.user_code import load_named

if TYPE_CHECKING:
    from agentrl.learning.algorithms.base import Algorithm


def get_algorithm(name: str) -> Algorithm:
    """The `ALGORITHM` that agentrl/learning/algorithms/<name>.py defines, or an instance of the user's class that
    `name` gives as MODULE:NAME."""
    if ":" in name:
        from agentrl.learning.algorithms.base import Algorithm

        made = load_named(name, "algorithm.name")
        if not (isinstance(made, type) and issubclass(made, Algorithm)):
            raise ValueError(f"algorithm.name: {name} is not a subclass of agentrl.learning.algorithms.base.Algorithm")
        return made()
    if name not in ALGORITHM_NAMES:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHM_NAMES)}, or MODULE:NAME of your own")
    return importlib.import_module(f"{__name__}.{name}").ALGORITHM

"""One algorithm per file; each turns per-token rewards into per-token advantages and says how."""

from __future__ import annotations

from types import ModuleType

from agentrl.algorithms import grpo, ppo, reinforce_pp, rloo

_ALGORITHMS: dict[str, ModuleType] = {"grpo": grpo, "ppo": ppo, "reinforce_pp": reinforce_pp, "rloo": rloo}


def get_algorithm(name: str) -> ModuleType:
    try:
        return _ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(_ALGORITHMS)}") from None

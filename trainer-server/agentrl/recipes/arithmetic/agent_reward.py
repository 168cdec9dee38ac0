"""The reward of the arithmetic agent (agent.py): 1 when its final `Answer:` equals the gold number, else 0, as the
ToolEnv recipe scores it (env.py), with the same breakdown but for `tool_use`, which only the agent's code sees."""

from __future__ import annotations

from typing import Any

from agentrl import EpisodeScore
from agentrl.recipes.answers import numeric_answer


def score(task: dict[str, Any], result: str | None) -> EpisodeScore:
    answer, correct = numeric_answer(result or "", float(task["answer"]))
    return EpisodeScore(
        reward=float(correct),
        breakdown={"accuracy": float(correct), "answered": float(answer is not None)},
        final_answer=answer,
    )

"""A scripted policy: the rollout engine writes given turns instead of sampling them, so tests, fixtures and
demos drive the real pipeline (tool calls, observations, masks, rewards, the learner, the run folder) with
exact, known assistant text.

    train(config, runs_dir=..., policy=ScriptedPolicy(['<tool_call>{"name": "search", ...}</tool_call>', "done"]))

Turn N of every episode is `turns[N]` (the last one again for any turn after it), ended by the end-of-sequence
token, each token given `logprob`. The turn number is read from the context: the number of assistant turns the
chat template has opened in it (the built-in tiny model's template, ChatML, opens each with <|im_start|>assistant).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from agentrl.rollout.hf_engine import HfRolloutEngine
from agentrl.rollout.loop import TurnEnd

ASSISTANT_TURN_OPENS = "<|im_start|>assistant"


@dataclass(frozen=True)
class ScriptedPolicy:
    turns: list[str]
    logprob: float = -1.0

    def turn(self, index: int) -> str:
        return self.turns[min(index, len(self.turns) - 1)]


class ScriptedRolloutEngine(HfRolloutEngine):
    """The hf engine with its sampling replaced by a ScriptedPolicy; everything around it is the real engine."""

    description = "scripted"

    def __init__(self, *args: Any, policy: ScriptedPolicy, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.policy = policy

    def _generate(
        self,
        contexts: list[list[int]],
        limits: list[int],
        call_ends: list[list[str]],
        generators: list[torch.Generator],
        row_done: Callable[[int, list[int], list[float], TurnEnd], None],
    ) -> None:
        for row, (context, limit) in enumerate(zip(contexts, limits)):
            turn = self.tokenizer.decode(context).count(ASSISTANT_TURN_OPENS) - 1  # the prompt opens this one
            ids = self.chat.encode(self.policy.turn(turn))[: limit - 1] + [self.eos_id]
            row_done(row, ids, [self.policy.logprob] * len(ids), "eos")

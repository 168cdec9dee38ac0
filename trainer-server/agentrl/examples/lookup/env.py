"""The bundled tiny example: a key-value store behind one tool. The agent is asked for the value
of a key and earns reward for calling `lookup` with exactly that key, then answering.

It is built to be learnable by the tiny random model in a few dozen CPU steps: besides the outcome
reward, a shaped process reward pays for how much of the correct call the first turn got right.
"""

from __future__ import annotations

import json
from typing import Any

from agentrl import EpisodeScore, StepResult, Tool, ToolCallOutcome, ToolEnv

TABLE = {
    str(k): v for k, v in enumerate(["red", "blue", "green", "gold", "pink", "gray", "teal", "lime", "navy", "plum"])
}


class Lookup(Tool):
    name = "lookup"
    description = "Return the value stored under a key (a digit)."
    parameters = {
        "type": "object",
        "properties": {"key": {"type": "string", "description": "the key, a single digit"}},
        "required": ["key"],
        "additionalProperties": False,
    }

    def execute(self, key: str) -> Any:
        if key not in TABLE:
            raise KeyError(f"no value under key {key!r}")
        return TABLE[key]


def correct_call(key: str) -> str:
    return f"<tool_call>{json.dumps({'name': 'lookup', 'arguments': {'key': key}})}</tool_call>"


def call_credit(text: str, target: str) -> float:
    """Share of `target` (the correct call) whose longest prefix appears anywhere in `text`:
    a dense signal that grows piece by piece as the model gets more of the call right."""
    matched = 0
    while matched < len(target) and target[: matched + 1] in text:
        matched += 1
    return matched / len(target)


class LookupEnv(ToolEnv):
    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        self.tools = [Lookup()]
        self.key = ""
        self.looked_up = False

    def reset(self, task: dict[str, Any]) -> list[dict[str, Any]]:
        self.key = str(task["key"])
        return [{"role": "user", "content": f"key {self.key}"}]

    def step(self, assistant_text: str, calls: list[ToolCallOutcome]) -> StepResult:
        first_turn = not self.looked_up
        self.looked_up = self.looked_up or any(
            c.error is None and c.name == "lookup" and (c.arguments or {}).get("key") == self.key for c in calls
        )
        shaped = 0.5 * call_credit(assistant_text, correct_call(self.key)) if first_turn else 0.0
        result = super().step(assistant_text, calls)
        return StepResult(messages=result.messages, reward=shaped, done=result.done)

    def score(self, final_text: str) -> EpisodeScore:
        answered = TABLE[self.key] in final_text
        return EpisodeScore(
            reward=float(self.looked_up) + 0.5 * float(self.looked_up and answered),
            breakdown={"looked_up": float(self.looked_up), "answered": float(answered)},
            final_answer=final_text.strip() or None,
        )

    def scripted_turns(self, task: dict[str, Any]) -> list[str]:
        key = str(task["key"])
        return [correct_call(key), f"The value is {TABLE[key]}."]

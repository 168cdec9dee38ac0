"""GSM8K with a calculator: the quickest demonstration that tool-use RL learns.

Outcome reward: 1 when the final `Answer:` equals GSM8K's gold number, plus 0.2 for giving an
`Answer:` line at all (a small model gets some signal before it gets answers right). Process reward:
+0.1 for each turn whose tool calls all ran, -0.1 for a turn with a malformed or failing call.
Breakdown: `accuracy` (the outcome), `format` (an `Answer:` was given), `tool_use` (a call succeeded).
Data: GSM8K (Cobbe et al., 2021), MIT license; see data/SOURCE.md.
"""

from __future__ import annotations

from typing import Any

from agentrl import EpisodeScore, StepResult, ToolCallOutcome, ToolEnv
from agentrl.recipes.answers import gsm8k_gold, numeric_answer
from agentrl.recipes.calculator import Calculator

FORMAT_REWARD = 0.2
SYSTEM_PROMPT = (
    "Solve the math word problem step by step. Use the calculator tool for arithmetic. "
    "When you know the result, end with a line 'Answer: <number>'."
)


class GSM8KCalculatorEnv(ToolEnv):
    def __init__(self, **args: Any) -> None:
        if args.get("baseline"):
            raise ValueError(f"the GSM8K recipe has no {args['baseline']!r} baseline; baselines are for multi-hop QA")
        super().__init__(**args)
        self.tools = [Calculator()]
        self.gold = ""
        self.tool_successes = 0

    def reset(self, task: dict[str, Any]) -> list[dict[str, Any]]:
        self.gold = gsm8k_gold(task["answer"])
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task["question"]}]

    def step(self, assistant_text: str, calls: list[ToolCallOutcome]) -> StepResult:
        result = super().step(assistant_text, calls)
        if not calls:
            return result
        failed = any(c.error for c in calls)
        self.tool_successes += sum(1 for c in calls if not c.error)
        return StepResult(messages=result.messages, reward=-0.1 if failed else 0.1, done=result.done)

    def score(self, final_text: str) -> EpisodeScore:
        answer, correct = numeric_answer(final_text, float(self.gold))
        return EpisodeScore(
            reward=float(correct) + FORMAT_REWARD * float(answer is not None),
            breakdown={
                "accuracy": float(correct),
                "format": float(answer is not None),
                "tool_use": float(self.tool_successes > 0),
            },
            final_answer=answer,
        )

    def scripted_turns(self, task: dict[str, Any]) -> list[str]:
        return [
            '<tool_call>{"name": "calculator", "arguments": {"expression": "48 / 2 + 48"}}</tool_call>',
            f"Answer: {gsm8k_gold(task['answer'])}",
        ]

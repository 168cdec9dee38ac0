"""Arithmetic word problems with a calculator: the demo recipe, where a 135M model visibly learns tool use.

Each problem needs one operation on numbers too large to work out in the head (`tasks.py`). The agent
calls the calculator with the tag format (`<calculator>24 * 37</calculator>`, rollout.tool_format: tags),
reads the result, and answers with a line `Answer: <number>`. The prompt shows the format once, as
worked examples in real chat turns (`examples` of them); the untrained model copies the format but not
the reading of the story: it uses the operation of the example whatever the story asks.

Reward: 1 when the final `Answer:` equals the gold number, else 0 — the task's real success and nothing
else, so no reward can be earned without solving the problem. Breakdown: `accuracy` (the reward),
`tool_use` (a calculator call succeeded) and `answered` (an `Answer:` line was given), for diagnosis.

Baseline `no-tool` (`agentrl eval --baseline no-tool`): the same problems and examples without the
calculator, answered directly; it shows the task needs the tool.
"""

from __future__ import annotations

from typing import Any

from agentrl import EpisodeScore, StepResult, ToolCallOutcome, ToolEnv
from agentrl.recipes.answers import numeric_answer
from agentrl.recipes.calculator import Calculator

SYSTEM_PROMPT = "Solve the problem. Finish with a line 'Answer: <number>'."
NO_TOOL_PROMPT = "Solve the problem in your head. Finish with a line 'Answer: <number>'."
# Worked examples, shown as real chat turns before the problem. Their phrasings are not among the
# templates of tasks.py, so no example is a training or held-out problem.
EXAMPLES = [
    ("A box holds 24 pencils. How many pencils are in 37 boxes?", "24 * 37", 888),
    ("A shelf has 315 cups. 128 more cups arrive. How many cups are there now?", "315 + 128", 443),
]


class ArithmeticEnv(ToolEnv):
    def __init__(self, examples: int = 1, baseline: str | None = None, **args: Any) -> None:
        if baseline not in (None, "no-tool"):
            raise ValueError(f"unknown baseline {baseline!r} for the arithmetic recipe; known: no-tool")
        if not 0 <= examples <= len(EXAMPLES):
            raise ValueError(f"examples must be between 0 and {len(EXAMPLES)}, got {examples}")
        super().__init__(examples=examples, baseline=baseline, **args)
        self.examples = EXAMPLES[:examples]
        self.with_tool = baseline is None
        self.tools = [Calculator()] if self.with_tool else []
        self.gold = 0.0
        self.tool_successes = 0

    def reset(self, task: dict[str, Any]) -> list[dict[str, Any]]:
        self.gold = float(task["answer"])
        messages = [{"role": "system", "content": SYSTEM_PROMPT if self.with_tool else NO_TOOL_PROMPT}]
        for question, expression, result in self.examples:
            messages.append({"role": "user", "content": question})
            if self.with_tool:
                messages += [
                    {"role": "assistant", "content": f"<calculator>{expression}</calculator>"},
                    {"role": "tool", "content": str(result)},
                ]
            messages.append({"role": "assistant", "content": f"Answer: {result}"})
        return [*messages, {"role": "user", "content": task["question"]}]

    def step(self, assistant_text: str, calls: list[ToolCallOutcome]) -> StepResult:
        self.tool_successes += sum(1 for c in calls if not c.error)
        return super().step(assistant_text, calls)

    def score(self, final_text: str) -> EpisodeScore:
        answer, correct = numeric_answer(final_text, self.gold)
        return EpisodeScore(
            reward=float(correct),
            breakdown={
                "accuracy": float(correct),
                "tool_use": float(self.tool_successes > 0),
                "answered": float(answer is not None),
            },
            final_answer=answer,
        )

    def scripted_turns(self, task: dict[str, Any]) -> list[str]:
        return ["<calculator>24 * 37</calculator>", f"Answer: {task['answer']}"]

"""The demo's arithmetic task played by a plain OpenAI-SDK agent (`arithmetic_agent_grpo.agentrl.yaml`): the same
problems, prompt, worked example and reward as the Tool/ToolEnv recipe (env.py), with the calculator a function in
the agent's own code. The trainer serves the model being trained at base_url and records every request token by
token; nothing here knows it is being trained.

The worked example is a real assistant message with `tool_calls` and the tool message that answers it, as any
OpenAI-SDK agent writes history. The endpoint writes those calls in the run's tool-call format (tags), so the model
reads the same prompt, token for token, as the ToolEnv recipe gives it (tests/test_agent_recipe.py checks it).
"""

from __future__ import annotations

import json
from typing import Any

from openai import OpenAI

from agentrl.recipes.calculator import Calculator, calculate

SYSTEM_PROMPT = "Solve the problem. Finish with a line 'Answer: <number>'."
CALCULATOR = {
    "type": "function",
    "function": {"name": "calculator", "description": Calculator.description, "parameters": Calculator.parameters},
}
EXAMPLE = [
    {"role": "user", "content": "A box holds 24 pencils. How many pencils are in 37 boxes?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_example",
                "type": "function",
                "function": {"name": "calculator", "arguments": json.dumps({"expression": "24 * 37"})},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_example", "content": "888"},
    {"role": "assistant", "content": "Answer: 888"},
]
MAX_TURNS = 2  # one calculator call and the answer, as the ToolEnv recipe's rollout.max_turns


def calculator(expression: str) -> str:
    try:
        return json.dumps(calculate(expression))
    except ValueError as err:  # the model reads its mistake, as it reads a Tool's error
        return f"Error: {err}"


def run(task: dict[str, Any], base_url: str, api_key: str) -> str | None:
    """One episode: the problem, the calculator calls the model makes, its final text (scored by agent_reward.py)."""
    client = OpenAI(base_url=base_url, api_key=api_key)
    messages: list[Any] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        *EXAMPLE,
        {"role": "user", "content": task["question"]},
    ]
    for _ in range(MAX_TURNS):
        message = (
            client.chat.completions.create(model="policy", messages=messages, tools=[CALCULATOR]).choices[0].message
        )
        if not message.tool_calls:
            return message.content
        messages.append(message)
        for call in message.tool_calls:
            arguments = json.loads(call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": calculator(**arguments)})
    return None

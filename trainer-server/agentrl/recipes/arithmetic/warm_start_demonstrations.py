"""Demonstrations for the warm start of `arithmetic_warm_grpo.agentrl.yaml` (data.sft).

`python -m agentrl.recipes.arithmetic.warm_start_demonstrations` writes `data/demonstrations.jsonl`: for each problem
of the first PROBLEMS of the config's data.train (never a held-out one; a warm start of 2 steps of 32 reads 64), the calculator called with the problem's own operation on its two
numbers, then `Answer: N`, played through the rollout's own parse, execute and interpret path
(`run_scripted_episode`) with the config's env, so the tool message is what the calculator returns. A demonstration
is kept only when it earns the reward (its answer is the gold one). Each line is one OpenAI chat transcript
(rollout/demonstrations.py): the prompt exactly as the env's reset gives it (its `prompt_length` messages: the worked
example's turns are prompt, never learned), the call, the tool message and the answer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agentrl.contract.config import RunConfig
from agentrl.recipes import demonstrations
from agentrl.recipes.demonstrations import transcript
from agentrl.rollout.scripted_episode import run_scripted_episode

RECIPE = Path(__file__).parent
CONFIG = RECIPE / "arithmetic_warm_grpo.agentrl.yaml"
DEMONSTRATIONS = RECIPE / "data" / "demonstrations.jsonl"
PROBLEMS = 256
APPLY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b}


def expression(task: dict[str, Any]) -> str | None:
    """The calculator's input that solves the task: its operation on its two numbers, in the order that gives the
    gold answer; None when no order does."""
    numbers = [int(n) for n in re.findall(r"\d+", str(task["question"]))]
    if len(numbers) != 2:
        return None
    op, (a, b) = str(task["op"]), numbers
    for left, right in ((a, b), (b, a)):
        if APPLY[op](left, right) == task["answer"]:
            return f"{left} {op} {right}"
    return None


def demonstration(task: dict[str, Any], config: RunConfig, make_env: Any) -> dict[str, Any] | None:
    """The task's demonstration, or None when it cannot be written or does not earn the reward."""
    solved = expression(task)
    if solved is None:
        return None
    turns = [f"<calculator>{solved}</calculator>", f"Answer: {task['answer']}"]
    episode = run_scripted_episode(make_env(), task, turns, config.rollout)
    if episode.status != "finished" or episode.turns[0].observation is None or episode.outcome_reward != 1.0:
        return None
    return transcript(str(task["id"]), episode)


def write_demonstrations(config_path: Path = CONFIG, out: Path = DEMONSTRATIONS) -> tuple[int, int]:
    return demonstrations.write_demonstrations(config_path, out, PROBLEMS, demonstration)


if __name__ == "__main__":
    written, problems = write_demonstrations()
    print(f"{DEMONSTRATIONS}: {written} demonstrations of {problems} training problems")

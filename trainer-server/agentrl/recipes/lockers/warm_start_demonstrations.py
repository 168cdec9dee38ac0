"""Demonstrations for the warm start of `lockers_warm_grpo.agentrl.yaml` (data.sft).

`python -m agentrl.recipes.lockers.warm_start_demonstrations` writes `data/demonstrations.jsonl`: for each of the first
PROBLEMS tasks of the config's data.train (never a held-out one), the recipient looked up until the directory answers
(it is busy at random, seeded per episode: a busy answer is followed by the same lookup again, the skill the worked
example never shows), then the parcel put in the locker the lookup revealed; played through the rollout's own
parse, execute and interpret path (`run_scripted_episode`) with the config's env, so each tool message is what the
building answered. Kept only when the parcel ends in the recipient's locker within rollout.max_turns. Each line is one
OpenAI chat transcript (rollout/demonstrations.py), its prompt (the worked example's turns) never learned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrl.contract.config import RunConfig
from agentrl.recipes import demonstrations
from agentrl.recipes.demonstrations import transcript
from agentrl.rollout.scripted_episode import run_scripted_episode

RECIPE = Path(__file__).parent
CONFIG = RECIPE / "lockers_warm_grpo.agentrl.yaml"
DEMONSTRATIONS = RECIPE / "data" / "demonstrations.jsonl"
PROBLEMS = 256


def demonstration(task: dict[str, Any], config: RunConfig, make_env: Any) -> dict[str, Any] | None:
    """The task's demonstration: as many lookups as the busy directory needs, then the put; None when the
    directory stays busy until no turn is left to put the parcel in."""
    recipient = task["recipient"]
    put = f"<put>{task['directory'][recipient]}</put>"
    for lookups in range(1, config.rollout.max_turns):
        turns = [f"<find>{recipient}</find>"] * lookups + [put]
        episode = run_scripted_episode(make_env(), task, turns, config.rollout)
        revealed = [call.error is None for call in episode.turns[lookups - 1].tool_calls] == [True]
        if revealed and episode.outcome_reward == 1.0 and len(episode.turns) == len(turns):
            return transcript(str(task["id"]), episode)
    return None


def write_demonstrations(config_path: Path = CONFIG, out: Path = DEMONSTRATIONS) -> tuple[int, int]:
    return demonstrations.write_demonstrations(config_path, out, PROBLEMS, demonstration)


if __name__ == "__main__":
    written, problems = write_demonstrations()
    print(f"{DEMONSTRATIONS}: {written} demonstrations of {problems} training tasks")

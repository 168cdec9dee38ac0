"""What the recipes' warm-start scripts share: an episode played from scripted turns written down as the chat
transcript a demonstrations file holds (rollout/demonstrations.py reads it back token-exact), and the file of a
config's training tasks written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentrl.contract.config import RunConfig, load_config, resolve_paths
from agentrl.contract.tasks import load_tasks
from agentrl.environment.loader import config_env_factory
from agentrl.rollout.episode import Episode

# A recipe's demonstration of a task (a transcript), or None when it has none: (task, config, make_env) -> ...
Demonstrate = Callable[[dict[str, Any], RunConfig, Any], "dict[str, Any] | None"]


def transcript(task_id: str, episode: Episode) -> dict[str, Any]:
    """The episode's prompt, then each turn's assistant text and the env's observation after it. `prompt_length`
    makes the whole prompt context: a worked example's assistant turns in it are never learned."""
    messages = list(episode.prompt_messages)
    for turn in episode.turns:
        messages.append({"role": "assistant", "content": turn.assistant})
        if turn.observation is not None:
            messages.append({"role": "tool", "content": turn.observation})
    return {"task_id": task_id, "prompt_length": len(episode.prompt_messages), "messages": messages}


def write_demonstrations(config_path: Path, out: Path, tasks: int | None, demonstrate: Demonstrate) -> tuple[int, int]:
    """Writes the demonstrations of the first `tasks` (None: all) of the config's data.train (never a held-out one)
    to `out`; (written, tasks read)."""
    config = resolve_paths(load_config(config_path), config_path.parent)
    make_env = config_env_factory(config)
    read = load_tasks(config.data.train, tasks)
    transcripts = [d for d in (demonstrate(task, config, make_env) for task in read) if d is not None]
    out.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in transcripts), encoding="utf-8")
    return len(transcripts), len(read)

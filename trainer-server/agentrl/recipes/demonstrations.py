"""What the recipes' warm-start scripts share: an episode played from scripted turns written down as the chat
transcript a demonstrations file holds (rollout/demonstrations.py reads it back token-exact), and the file written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentrl.rollout.episode import Episode


def transcript(task_id: str, episode: Episode) -> dict[str, Any]:
    """The episode's prompt, then each turn's assistant text and the env's observation after it. `prompt_length`
    makes the whole prompt context: a worked example's assistant turns in it are never learned."""
    messages = list(episode.prompt_messages)
    for turn in episode.turns:
        messages.append({"role": "assistant", "content": turn.assistant})
        if turn.observation is not None:
            messages.append({"role": "tool", "content": turn.observation})
    return {"task_id": task_id, "prompt_length": len(episode.prompt_messages), "messages": messages}


def write_transcripts(out: Path, transcripts: list[dict[str, Any]]) -> int:
    out.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in transcripts), encoding="utf-8")
    return len(transcripts)

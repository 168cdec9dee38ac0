"""A model-free episode: given assistant texts played through the rollout's own parse, execute and interpret path (no
tokens, no model), for `agentrl env check`, generated env tests and tests of environments."""

from __future__ import annotations

import asyncio
from typing import Any

from agentrl.contract.training_config import RolloutConfig
from agentrl.environment.env import ToolEnv
from agentrl.environment.toolcall import get_format
from agentrl.environment.toolprocess import ToolWorker
from agentrl.rollout.episode import Episode, TurnRecord
from agentrl.rollout.loop import interpret_turn, run_tools_in, score_episode, start_episode, truncate_episode


def run_scripted_episode(
    env: ToolEnv,
    task: dict[str, Any],
    assistant_turns: list[str],
    rollout_cfg: RolloutConfig,
    tool_worker: ToolWorker | None = None,
) -> Episode:
    """A model-free episode: the given assistant texts go through the same parse/execute/interpret
    path as a real rollout (no tokens). Used by `agentrl env check` (Tools in `tool_worker`) and generated
    env tests."""
    live = start_episode(env, task, 0, 0)
    isolated = run_tools_in(tool_worker, [live]) if tool_worker is not None else []
    call_format = get_format(rollout_cfg.tool_format)

    async def play() -> None:
        for index, text in enumerate(assistant_turns[: rollout_cfg.max_turns]):
            if live.finished:
                break
            live.episode.turns.append(TurnRecord(index=index, assistant=text))
            await interpret_turn(live, text, call_format, rollout_cfg)

    asyncio.run(play())
    if not live.finished:
        truncate_episode(live, "max_turns")
    score_episode(live)
    if tool_worker is not None:
        tool_worker.release(isolated)
    return live.episode

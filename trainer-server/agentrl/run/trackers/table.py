"""What every tracker module shares: the `Tracker` each one is, and the trajectory table each one writes (its
columns, and a step's records as rows)."""

from __future__ import annotations

import json
from typing import Any, Protocol

# The columns of the trajectory table every tracker writes, and the record field each comes from.
TRAJECTORY_COLUMNS = (
    "id",
    "step",
    "task_id",
    "status",
    "reward",
    "num_turns",
    "num_tool_calls",
    "num_tool_errors",
    "response_tokens",
    "transcript",
)
# A transcript cell is for reading at a glance; the replay panel has the whole episode.
TRANSCRIPT_CHARS = 2000


class Tracker(Protocol):
    name: str  # as in the run config's logging section, for warnings

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None: ...

    def log_health(self, step: int, event: dict[str, Any]) -> None: ...

    def log_trajectories(self, step: int, rows: list[list[Any]]) -> None: ...

    def close(self) -> None: ...


def transcript(record: dict[str, Any]) -> str:
    """The episode as text: the last prompt message, then each turn's assistant text, calls and observation."""
    lines = [f"[{message['role']}] {message.get('content') or ''}" for message in record["prompt"][-1:]]
    for turn in record["turns"]:
        lines.append(f"[assistant] {turn['assistant']}")
        for call in turn["tool_calls"]:
            outcome = f"error: {call['error']}" if call["error"] else json.dumps(call["result"], ensure_ascii=False)
            lines.append(f"[call {call['name']}] {outcome}")
        if turn["observation"] is not None:
            lines.append(f"[observation] {turn['observation']}")
    text = "\n".join(lines)
    return text if len(text) <= TRANSCRIPT_CHARS else text[:TRANSCRIPT_CHARS] + " ..."


def trajectory_rows(records: list[dict[str, Any]], count: int) -> list[list[Any]]:
    """`count` records spread evenly over the step's groups, as TRAJECTORY_COLUMNS rows."""
    if count == 0 or not records:
        return []
    stride = max(1, len(records) // count)
    chosen = records[::stride][:count]
    return [
        [
            record["id"],
            record["step"],
            record["task_id"],
            record["status"],
            record["reward"],
            record["stats"]["num_turns"],
            record["stats"]["num_tool_calls"],
            record["stats"]["num_tool_errors"],
            record["stats"]["response_tokens"],
            transcript(record),
        ]
        for record in chosen
    ]

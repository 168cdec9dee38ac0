"""What the search index reads of a step file (episode_search.py): each trajectory record as the index keeps it,
and each damaged line named (skipped: the rest of the file still reads). A record is checked as far as the index
reads it, its summary as a `trajectory` event's data is (the summary a search returns), its turns' text and tool
calls by type, not against trajectory.schema.json whole (about 10 ms a record: seconds a step)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, NamedTuple

from agentrl.contract.files_inside import parse_json
from agentrl.contract.schemas import check_event
from agentrl.run.runstore import TRAJECTORIES_DIR


class Episode(NamedTuple):
    """What the index keeps of one trajectory record."""

    summary: dict[str, Any]
    calls: list[tuple[str, str | None]]  # (tool name, error kind)
    assistant: str
    observation: str


def read_episode(record: Any, file: str) -> Episode:
    """What the index keeps of a trajectory record in `file`; ValueError saying what is wrong with a damaged one
    (its summary checked as a `trajectory` event's data is, its turns as far as the index reads them)."""
    if not isinstance(record, dict) or not isinstance(record.get("stats"), dict):
        raise ValueError("not a trajectory record with a stats object")
    try:
        summary = trajectory_summary(record, file)
    except KeyError as err:
        raise ValueError(f"no {err.args[0]!r}") from None
    check_event("trajectory", summary)
    turns = record.get("turns")
    if not isinstance(turns, list) or not all(_is_turn(turn) for turn in turns):
        raise ValueError("turns: not a list of turns, each with assistant text, tool calls and an observation")
    return Episode(
        summary,
        [(call["name"], call.get("error_kind")) for turn in turns for call in turn["tool_calls"]],
        "\n".join(turn["assistant"] for turn in turns),
        "\n".join(turn.get("observation") or "" for turn in turns),
    )


def _is_turn(turn: Any) -> bool:
    return (
        isinstance(turn, dict)
        and isinstance(turn.get("assistant"), str)
        and isinstance(turn.get("observation"), str | None)
        and isinstance(turn.get("tool_calls"), list)
        and all(
            isinstance(call, dict)
            and isinstance(call.get("name"), str)
            and isinstance(call.get("error_kind"), str | None)
            for call in turn["tool_calls"]
        )
    )


def read_step_file(file: Path, listed: os.stat_result) -> tuple[os.stat_result, list[Episode], list[str]]:
    """The file's state as read, its episodes, and what is wrong with each damaged line (skipped) or with the file
    (one that cannot be read, or is not a regular file: a FIFO in its place must not block the reader)."""
    name = f"{TRAJECTORIES_DIR}/{file.name}"
    try:
        descriptor = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as err:
        return listed, [], [f"unreadable ({err.strerror})"]
    episodes, damage = [], []
    with open(descriptor, "rb") as handle:
        read = os.fstat(descriptor)
        if not stat.S_ISREG(read.st_mode):
            return read, [], ["not a regular file"]
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = parse_json(line)
            except ValueError:  # UnicodeDecodeError is one, and so is nesting too deep (parse_json)
                damage.append(f"line {number}: not a JSON line")
                continue
            try:
                episodes.append(read_episode(record, name))
            except ValueError as err:
                damage.append(f"line {number}: {err}")
    return read, episodes, damage


def trajectory_summary(record: dict[str, Any], file: str) -> dict[str, Any]:
    """The `trajectory` event of a trajectory record kept in `file` (relative to the run folder): what
    trajectory/query and trajectory/search list."""
    stats = record["stats"]
    return {
        "id": record["id"],
        "step": record["step"],
        "group": record["group"],
        "sample": record["sample"],
        "task_id": record["task_id"],
        "status": record["status"],
        "reward": record["reward"],
        "advantage": record["advantage"],
        "num_turns": stats["num_turns"],
        "num_tool_calls": stats["num_tool_calls"],
        "num_tool_errors": stats["num_tool_errors"],
        "response_tokens": stats["response_tokens"],
        "file": file,
    }

"""Writes the ATIF fixtures both languages test their converters against (trainer-server/agentrl/run/atif.py and
extension/replay/atif.ts), from the files beside it and the replay's fixtures:

    .venv/bin/python protocol/examples/atif/make_fixtures.py

- episodes.trajectories.jsonl: trajectory records as the trainer writes them (../trajectories/: tool failures of
  every kind, a truncated episode, hostile text) and one made from the lookup fixture to hold what those do not: a
  prompt with a worked example (an assistant message with OpenAI tool_calls, tool messages after it, after a user
  message and after an empty system message), tools from an MCP server, a result stored cut, step returns.
- episodes.atif.jsonl: their ATIF export (agentrl export-trajectories writes the same), which reads back as them.
- harbor-style.atif.json: written by hand, not by this script: an ATIF trajectory as another tool writes one.
- harbor-style.trajectories.jsonl: how it reads as a record.
"""

from __future__ import annotations

import json
from pathlib import Path

from agentrl.run.atif import atif_to_record, record_to_atif

HERE = Path(__file__).resolve().parent
TRAJECTORIES = HERE.parent / "trajectories"
# The agent object of the export; the version is fixed so that a release does not make the fixture stale.
AGENT = {"name": "agentrl", "version": "0.1.0", "model_name": "tiny"}


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def worked_example(record: dict) -> dict:
    """The lookup fixture's first episode, with what the recorded fixtures lack."""
    record = json.loads(json.dumps(record))
    record["id"], record["group"] = "3-5-0", 5
    call = {"id": "call_example", "type": "function", "function": {"name": "lookup", "arguments": '{"key": "7"}'}}
    record["prompt"] = [
        {"role": "system", "content": "Look keys up with the lookup tool."},
        {"role": "user", "content": "key 7"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_example", "content": "seven"},
        {"role": "tool", "content": "(a second tool message)"},
        {"role": "assistant", "content": "Answer: seven"},
        {"role": "user", "content": "key 3"},
        {"role": "tool", "content": "(a tool message after a user message)"},
        {"role": "system", "content": ""},
        {"role": "tool", "content": "(a tool message after an empty system message)"},
    ]
    record["tool_servers"] = {"lookup": "keys"}
    first, second = record["turns"]
    first["tool_calls"].append(
        {
            "id": "call-0-1",
            "name": "lookup",
            "arguments": {"key": "3"},
            "raw": '<tool_call>{"name": "lookup", "arguments": {"key": "3"}}</tool_call>',
            "result": {"value": "gold", "n": 3},
            "result_cut": {"chars": 70000, "sha256": "0" * 64},
            "error": None,
            "error_kind": None,
            "latency_ms": 0.4,
        }
    )
    record["stats"]["num_tool_calls"] = 2
    first |= {"state_key": "start", "step_return": 0.08, "step_advantage": 1.25}
    second |= {"state_key": first["observation"], "step_return": 0.0, "step_advantage": None}
    return record


def main() -> None:
    episodes = [
        *read(TRAJECTORIES / "tool-errors.trajectories.jsonl"),
        *read(TRAJECTORIES / "hostile.trajectories.jsonl"),
        worked_example(read(TRAJECTORIES / "lookup.trajectories.jsonl")[0]),
    ]
    write(HERE / "episodes.trajectories.jsonl", episodes)
    write(HERE / "episodes.atif.jsonl", [record_to_atif(record, AGENT) for record in episodes])
    harbor = json.loads((HERE / "harbor-style.atif.json").read_text(encoding="utf-8"))
    write(HERE / "harbor-style.trajectories.jsonl", [atif_to_record(harbor)])


if __name__ == "__main__":
    main()

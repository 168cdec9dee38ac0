"""Our trajectory records in Harbor's Agent Trajectory Interchange Format (ATIF), and ATIF trajectories as records.

ATIF (RFC 0001, v1.7; protocol/schemas/atif.schema.json says where it is published) keeps one agent trajectory as
steps: system and user messages, and agent steps with their tool calls, the results that answer them
(`observation.results`, each naming its call by `source_call_id`) and per-step metrics (token counts, the sampled
token ids, their logprobs). One episode is one ATIF trajectory:

- the prompt's messages are system and user steps; an assistant message of the prompt (a worked example: the policy
  never sampled it) is an agent step marked `is_copied_context`, which SFT readers leave out, and a tool message is
  one more result of the step before it;
- each turn is an agent step of one LLM call: its tool calls, a result per call (the Tool's raw outcome, as text) and
  one result naming no call, the ToolEnv's observation (what the model read next); its metrics are the context it
  was sampled from (`prompt_tokens`) and the sampled tokens' ids and rollout logprobs;
- the tools offered are `agent.tool_definitions` (OpenAI's function format in both), the run is `session_id` and the
  episode `trajectory_id`.

What ATIF has no field for is kept, as the record has it, in the `extra` of the ATIF object that holds it, under the
key "agentrl" (EXTRA_KEY): the record's step, group, sample, task, status, rewards, advantage, final answer, stats
and its whole token sequence (each token's id, text, role, turn, loss mask, logprob and advantage); a turn's process
reward, done, finish reason, parse error, state key, step return and step advantage; a call's raw text, error, error
kind, latency and cut marker, and its result where that is not a string; a prompt message's keys besides role and
content. So a record converted to ATIF and back is the record it was.

A trajectory another tool wrote reads as a record of what ATIF holds: the steps before its first agent step that is
not copied context are the prompt, and each agent step from there on is a turn; a user or system step after a turn
is part of what the agent read next (that turn's observation), as are the turn's results that answer no call; a
call's result is the text of the results that answer it. Left out, having no field in the record: timestamps, model
names, reasoning content and effort, costs and cached tokens, tool calls of copied-context steps, subagent
trajectories; images show as "[image: PATH]". The record's token sequence is the exact sequence a trainer learns
from, which such a file does not have: it is empty, and ATIF has no reward, so rewards are 0.

extension/replay/atif.ts reads ATIF the same way (the replay opens ATIF files); protocol/examples/atif/ holds the
files both languages are tested against, so the two cannot drift.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from agentrl.contract.schemas import validator_for

ATIF_VERSION = "ATIF-v1.7"
# The versions this reads: any 1.x (of a later one, the fields this does not know are left aside).
ATIF_VERSION_PATTERN = re.compile(r"ATIF-v1\.\d+")
EXTRA_KEY = "agentrl"
NOTES = (
    "Exported by Agent RL Studio (agentrl): one episode. extra.agentrl keeps the fields of its trajectory record "
    "that ATIF has none for (rewards, status, the exact training token sequence, tool call errors and latencies)."
)

# The record's keys ATIF holds natively; every other key of the record goes into the trajectory's extra.
_NATIVE_RECORD_KEYS = {"schema_version", "id", "run_id", "prompt", "tools", "turns"}
_NATIVE_TURN_KEYS = {"index", "assistant", "tool_calls", "observation"}
_NATIVE_CALL_KEYS = {"id", "name", "arguments", "result"}
_NATIVE_MESSAGE_KEYS = {"role", "content"}
_SOURCE_OF_ROLE = {"system": "system", "user": "user", "assistant": "agent"}
_ROLE_OF_SOURCE = {source: role for role, source in _SOURCE_OF_ROLE.items()}
_TOKEN_FIELDS = ("ids", "text", "role", "turn", "loss_mask", "logprob", "advantage")


def is_atif(document: Any) -> bool:
    """Whether `document` declares itself an ATIF trajectory (any version)."""
    return (
        isinstance(document, dict)
        and isinstance(document.get("schema_version"), str)
        and document["schema_version"].startswith("ATIF-")
        and isinstance(document.get("steps"), list)
    )


def record_to_atif(record: dict[str, Any], agent: dict[str, Any]) -> dict[str, Any]:
    """The ATIF trajectory of one trajectory record. `agent`: ATIF's agent object ({name, version, model_name?})."""
    steps = _prompt_steps(record["prompt"])
    sampled = _sampled_positions(record["tokens"])
    steps += [_turn_step(turn, record["tokens"], sampled.get(turn["index"], [])) for turn in record["turns"]]
    metrics = [step["metrics"] for step in steps if "metrics" in step]
    return {
        "schema_version": ATIF_VERSION,
        "session_id": record["run_id"],
        "trajectory_id": record["id"],
        "agent": {**agent, "tool_definitions": record["tools"]},
        "steps": [{"step_id": number, **step} for number, step in enumerate(steps, start=1)],
        "notes": NOTES,
        "final_metrics": {
            "total_prompt_tokens": sum(m["prompt_tokens"] for m in metrics),
            "total_completion_tokens": sum(m["completion_tokens"] for m in metrics),
            "total_steps": len(steps),
        },
        **_extra(record, _NATIVE_RECORD_KEYS),
    }


def _extra(item: dict[str, Any], native: set[str], **kept: Any) -> dict[str, Any]:
    """{"extra": {"agentrl": ...}} holding `item`'s keys outside `native`, and `kept`; {} when there are none."""
    rest = {key: value for key, value in item.items() if key not in native} | kept
    return {"extra": {EXTRA_KEY: rest}} if rest else {}


def _prompt_steps(prompt: list[dict[str, Any]]) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for message in prompt:
        if message["role"] != "tool":
            source = _SOURCE_OF_ROLE[message["role"]]
            copied = {"is_copied_context": True} if source == "agent" else {}
            steps.append(
                {"source": source, "message": message["content"], **copied, **_extra(message, _NATIVE_MESSAGE_KEYS)}
            )
            continue
        # A tool message is one more result of the step before it. First, after a user step or after an empty system
        # message, it gets a system step of its own, of message "": a system step of message "" without results is
        # an empty system message, with results it only holds tool messages (so atif_to_record tells them apart).
        last = steps[-1] if steps else None
        if (
            last is None
            or last["source"] == "user"
            or (last["source"] == "system" and last["message"] == "" and "observation" not in last)
        ):
            last = {"source": "system", "message": ""}
            steps.append(last)
        result = {"content": message["content"], **_extra(message, _NATIVE_MESSAGE_KEYS)}
        last.setdefault("observation", {"results": []})["results"].append(result)
    return steps


def _sampled_positions(tokens: dict[str, list[Any]]) -> dict[int, list[int]]:
    """Turn index -> the positions of its sampled tokens (loss mask 1) in the training sequence."""
    positions: dict[int, list[int]] = {}
    for position, (turn, mask) in enumerate(zip(tokens["turn"], tokens["loss_mask"], strict=True)):
        if mask == 1:
            positions.setdefault(turn, []).append(position)
    return positions


def _turn_step(turn: dict[str, Any], tokens: dict[str, list[Any]], sampled: list[int]) -> dict[str, Any]:
    results = [_call_result(call) for call in turn["tool_calls"]]
    if turn["observation"] is not None:
        results.append({"content": turn["observation"]})
    step: dict[str, Any] = {"source": "agent", "message": turn["assistant"], "llm_call_count": 1}
    if turn["tool_calls"]:
        step["tool_calls"] = [_tool_call(call) for call in turn["tool_calls"]]
    if results:
        step["observation"] = {"results": results}
    if sampled:
        logprobs = [tokens["logprob"][k] for k in sampled]
        step["metrics"] = {
            "prompt_tokens": sampled[0],  # the context the turn was sampled from
            "completion_tokens": len(sampled),
            "completion_token_ids": [tokens["ids"][k] for k in sampled],
            # an engine that reports no logprob for a sampled token leaves it null: then ATIF gets none
            **({"logprobs": logprobs} if None not in logprobs else {}),
        }
    return step | _extra(turn, _NATIVE_TURN_KEYS)


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    # ATIF's arguments are an object; ours are null when the model's JSON did not parse (raw has what it wrote)
    unparsed = {"arguments": None} if call["arguments"] is None else {}
    return {
        "tool_call_id": call["id"],
        "function_name": call["name"],
        "arguments": call["arguments"] if call["arguments"] is not None else {},
        **_extra(call, _NATIVE_CALL_KEYS, **unparsed),
    }


def _call_result(call: dict[str, Any]) -> dict[str, Any]:
    """The result that answers `call`: its text is the Tool's result (JSON text unless a string), or its error."""
    result = call["result"]
    if isinstance(result, str):
        return {"source_call_id": call["id"], "content": result}
    text = call["error"] if result is None and call["error"] is not None else json.dumps(result, ensure_ascii=False)
    return {"source_call_id": call["id"], "content": text, "extra": {EXTRA_KEY: {"result": result}}}


def atif_to_record(trajectory: dict[str, Any], position: int = 0) -> dict[str, Any]:
    """The trajectory record of an ATIF trajectory, the `position`-th of its file (its group, and its id when the
    trajectory has no trajectory_id). ValueError for a document that is no ATIF trajectory of a version this reads."""
    if not is_atif(trajectory):
        raise ValueError("not an ATIF trajectory: no schema_version 'ATIF-v1.x' and steps list")
    if not ATIF_VERSION_PATTERN.fullmatch(trajectory["schema_version"]):
        raise ValueError(f"{trajectory['schema_version']}: this reads ATIF-v1.x")
    steps = trajectory["steps"]
    first_turn = next(
        (i for i, step in enumerate(steps) if step["source"] == "agent" and not step.get("is_copied_context")),
        len(steps),
    )
    prompt = [message for step in steps[:first_turn] for message in _prompt_messages(step)]
    # Each turn's agent step, and what the agent read after it: its results that answer no call, then the user and
    # system steps up to the next agent step.
    turn_steps: list[tuple[dict[str, Any], list[str]]] = []
    for step in steps[first_turn:]:
        if step["source"] == "agent":
            turn_steps.append((step, []))
            continue
        read = turn_steps[-1][1]
        if content_text(step["message"]):
            read.append(content_text(step["message"]))
        read += [content_text(result["content"]) for result in _results(step) if result.get("content") is not None]
    last = len(turn_steps) - 1
    turns = [_turn(step, index, read, done=index == last) for index, (step, read) in enumerate(turn_steps)]
    metrics = [step.get("metrics") or {} for step, _ in turn_steps]
    response_tokens = sum(m.get("completion_tokens") or len(m.get("completion_token_ids") or []) for m in metrics)
    record = {
        "schema_version": 1,
        "id": trajectory.get("trajectory_id") or f"atif-{position}",
        "run_id": trajectory.get("session_id") or "",
        "step": 0,
        "group": position,
        "sample": 0,
        "task_id": "",
        "status": "finished",
        "status_reason": None,
        "reward": 0,
        "outcome_reward": 0,
        "reward_breakdown": {},
        "advantage": None,
        "final_answer": None,
        "prompt": prompt,
        "tools": trajectory["agent"].get("tool_definitions") or [],
        "turns": turns,
        "stats": {
            "num_turns": len(turns),
            "num_tool_calls": sum(len(turn["tool_calls"]) for turn in turns),
            "num_tool_errors": 0,
            "response_tokens": response_tokens,
            # the largest context an agent step reports: the sequence the episode ended with
            "total_tokens": max(
                [(m.get("prompt_tokens") or 0) + (m.get("completion_tokens") or 0) for m in metrics if m]
                + [response_tokens]
            ),
        },
        "tokens": {field: [] for field in _TOKEN_FIELDS},
    }
    return record | _ours(trajectory)


def _ours(item: dict[str, Any]) -> dict[str, Any]:
    """What record_to_atif kept in `item`'s extra (EXTRA_KEY); {} for an item another tool wrote."""
    extra = item.get("extra")
    kept = extra.get(EXTRA_KEY) if isinstance(extra, dict) else None
    return kept if isinstance(kept, dict) else {}


def _results(step: dict[str, Any]) -> list[dict[str, Any]]:
    return (step.get("observation") or {}).get("results") or []


def content_text(content: Any) -> str:
    """A message or result as text: a string as it is, a list of content parts (v1.6+) a line each."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    lines = []
    for part in content:
        if part.get("type") == "text":
            lines.append(part.get("text", ""))
        elif part.get("type") == "image":
            lines.append(f"[image: {(part.get('source') or {}).get('path', '')}]")
        else:
            lines.append(f"[{part.get('type')}]")
    return "\n".join(lines)


def _prompt_messages(step: dict[str, Any]) -> list[dict[str, Any]]:
    results = _results(step)
    messages = []
    # a system step of message "" with results only carries tool messages (see _prompt_steps)
    if not (step["source"] == "system" and content_text(step["message"]) == "" and results):
        messages.append(
            {"role": _ROLE_OF_SOURCE[step["source"]], "content": content_text(step["message"]), **_ours(step)}
        )
    messages += [
        {"role": "tool", "content": content_text(result.get("content")), **_ours(result)} for result in results
    ]
    return messages


def _turn(step: dict[str, Any], index: int, read_after: list[str], *, done: bool) -> dict[str, Any]:
    calls = step.get("tool_calls") or []
    answers: dict[str, list[dict[str, Any]]] = {call["tool_call_id"]: [] for call in calls}
    read = []
    for result in _results(step):
        if result.get("source_call_id") in answers:
            answers[result["source_call_id"]].append(result)
        elif result.get("content") is not None:
            read.append(content_text(result["content"]))
    read += read_after
    turn = {
        "index": index,
        "assistant": content_text(step["message"]),
        "tool_calls": [_call(call, answers[call["tool_call_id"]]) for call in calls],
        "observation": "\n".join(read) if read else None,
        "process_reward": 0,
        "done": done,  # the last turn ended the episode
        "finish_reason": "stop",
        "parse_error": None,
    }
    return turn | _ours(step)


def _call(call: dict[str, Any], answers: list[dict[str, Any]]) -> dict[str, Any]:
    arguments = call.get("arguments")
    found = {
        "id": call["tool_call_id"],
        "name": call["function_name"],
        "arguments": arguments if isinstance(arguments, dict) else None,
        "raw": "",  # the text the model wrote is not in ATIF
        "result": "\n".join(content_text(answer.get("content")) for answer in answers) if answers else None,
        "error": None,
        "error_kind": None,
        "latency_ms": 0,
    }
    for answer in answers:
        found |= {key: value for key, value in _ours(answer).items() if key == "result"}
    return found | _ours(call)


def atif_problems(trajectory: Any) -> list[str]:
    """What makes `trajectory` no valid ATIF: its schema (protocol/schemas/atif.schema.json), then what a JSON Schema
    cannot say and Harbor's models check: step ids 1, 2, 3, ... in order, tool call ids unique within a step, every
    source_call_id one of its step's calls, embedded subagents with unique trajectory ids (each checked the same)."""
    problems = [
        f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}"
        for error in validator_for("atif.schema.json", "trajectory").iter_errors(trajectory)
    ]
    if problems:
        return problems
    for position, step in enumerate(trajectory["steps"]):
        where = f"steps/{position}"
        if step["step_id"] != position + 1:
            problems.append(f"{where}/step_id: {step['step_id']}, not {position + 1} (step ids count from 1)")
        calls = Counter(call["tool_call_id"] for call in step.get("tool_calls") or [])
        problems += [f"{where}/tool_calls: tool_call_id {c!r} is not unique" for c, n in calls.items() if n > 1]
        for number, result in enumerate(_results(step)):
            if result.get("source_call_id") is not None and result["source_call_id"] not in calls:
                problems.append(
                    f"{where}/observation/results/{number}: source_call_id {result['source_call_id']!r} "
                    "names no tool call of its step"
                )
    subagents = trajectory.get("subagent_trajectories") or []
    ids = Counter(subagent["trajectory_id"] for subagent in subagents)
    problems += [f"subagent_trajectories: trajectory_id {i!r} is not unique" for i, n in ids.items() if n > 1]
    for position, subagent in enumerate(subagents):
        problems += [f"subagent_trajectories/{position}/{problem}" for problem in atif_problems(subagent)]
    return problems

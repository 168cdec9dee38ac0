"""`tool/rerun`: a recorded tool call, run again with its Tool's code (today's, or the run's snapshot), in a child process
(`agentrl.environment.rerun`), so the server's event loop only waits on pipes and the user's code never runs here."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from agentrl.environment.rerun import ANSWER_LINE_MAX_BYTES
from agentrl.run.runstore import CONFIG_FILE
from agentrl.server import protocol as p
from agentrl.server.children import PIPES_CLOSE_S, end_group, how_it_ended, keep_tail, read_answer, start_child

# Building the env may import heavy modules or index a corpus; past this the re-run is given up.
SETUP_TIMEOUT_S = 120.0
# After the Tool's own timeout, how long the child may take to report it (its timeout is enforced in there).
REPORT_GRACE_S = 10.0


def recorded_call(record: dict[str, Any], turn: int, call: int) -> dict[str, Any]:
    """The trajectory record's call `call` of turn `turn`, which must have parsed (no arguments to run otherwise)."""
    turns = record["turns"]
    if turn >= len(turns) or call >= len(turns[turn]["tool_calls"]):
        has = f"{len(turns)} turns" + (
            f", {len(turns[turn]['tool_calls'])} calls in turn {turn}" if turn < len(turns) else ""
        )
        raise p.RpcError(p.TRAJECTORY_NOT_FOUND, f"trajectory {record['id']} has no call {call} in turn {turn} ({has})")
    found = turns[turn]["tool_calls"][call]
    if found["arguments"] is None:
        raise p.RpcError(
            p.INVALID_PARAMS,
            f"call {call} of turn {turn} did not parse ({found['error_kind']}): there are no arguments to run it with",
        )
    return found


def wire_outcome(outcome: dict[str, Any]) -> dict[str, Any]:
    """A stored outcome (snake_case, as the trajectory keeps it) as `$defs/toolOutcome`."""
    return {
        "result": outcome["result"],
        "error": outcome["error"],
        "errorKind": outcome["error_kind"],
        "latencyMs": outcome["latency_ms"],
    }


# How each `code` a re-run may ask for is said in its errors.
CODE_WORDS = {"current": "the current code", "snapshot": "the run's code"}


async def rerun_call(run_dir: Path, call: dict[str, Any], code: str) -> tuple[dict[str, Any], float | None]:
    """The outcome of `call` (`$defs/toolOutcome`) with the run's env built from its frozen config with `code`
    (`current` or `snapshot`), and the timeout it ran under."""
    config_path = run_dir / CONFIG_FILE
    if not config_path.is_file():
        raise p.RpcError(p.RUN_STATE_CONFLICT, f"run {run_dir.name} has no frozen config to build its env from")
    process = await start_child(
        "agentrl.environment.rerun",
        limit=ANSWER_LINE_MAX_BYTES,  # the default 64 KiB a line made a larger result an internal error
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    stderr_tail = bytearray()
    draining = asyncio.get_running_loop().create_task(keep_tail(process.stderr, stderr_tail))
    try:
        request = {
            "config": str(config_path),
            "snapshot": str(run_dir) if code == "snapshot" else None,
            **{key: call[key] for key in ("id", "name", "arguments", "raw")},
        }
        process.stdin.write(json.dumps(request).encode())
        await process.stdin.drain()
        process.stdin.close()
        ready = await read_answer(process, SETUP_TIMEOUT_S)
        if ready is None:
            raise p.RpcError(
                p.TOOL_RERUN_FAILED,
                await how_it_ended("re-run", "before the call started", process, draining, stderr_tail),
            )
        if "setup_error" in ready:
            raise p.RpcError(
                p.TOOL_RERUN_FAILED, f"cannot build the env with {CODE_WORDS[code]}: {ready['setup_error']}"
            )
        timeout_s = ready["ready"]["timeout_s"]
        started = time.perf_counter()
        try:
            answer = await read_answer(process, (timeout_s or 0.0) + REPORT_GRACE_S)
        except TimeoutError:  # the Tool held the whole process (e.g. native code that never releases the GIL)
            return _failed(f"{call['name']} timed out after {timeout_s:g} s", "timeout", started), timeout_s
        if answer is None:
            said = await how_it_ended("re-run", "while it ran", process, draining, stderr_tail)
            message = f"{call['name']} did not answer: {said}. A Tool returns or raises; it never ends its process"
            return _failed(message, "exception", started), timeout_s
        return wire_outcome(answer["outcome"]), timeout_s
    except TimeoutError:
        raise p.RpcError(p.TOOL_RERUN_FAILED, f"building the env took longer than {SETUP_TIMEOUT_S:g} s") from None
    finally:
        await end_group(process)  # the child, and whatever the Tool started in the background
        await process.wait()
        await asyncio.wait([draining], timeout=PIPES_CLOSE_S)
        draining.cancel()


def _failed(message: str, kind: str, started: float) -> dict[str, Any]:
    return {"result": None, "error": message, "errorKind": kind, "latencyMs": (time.perf_counter() - started) * 1000.0}

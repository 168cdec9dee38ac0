"""`python -m agentrl.environment.rerun`: one recorded tool call, run again with its Tool's code: today's, or the
code the run recorded when it started (its code snapshot, code_snapshot.py).

The server's `tool/rerun` starts this in a fresh process for every re-run, so the env's modules are imported from
disk anew (an edited Tool runs as edited; with the snapshot, from the run folder's code/) and the user's code never
runs inside the server. The env is built from the run's frozen config through the same factory as training, and the
call goes through the same `execute_call` as a rollout's (argument validation, the Tool's timeout, every failure an
error the model would read). As in a tool worker process (`rollout.tool_isolation: process`), the env is built fresh
and never reset.

Reads one JSON object on stdin: `{config, id, name, arguments, raw, snapshot}` (config: the run's frozen config.yaml;
snapshot: the run's folder, whose recorded code runs the call, or null for today's code).
Writes JSON lines on what was its stdout: `{"ready": {"timeout_s": ...}}` once the env is built, then
`{"outcome": {result, error, error_kind, latency_ms}}`; or `{"setup_error": MESSAGE}` when the env cannot be
built. The Tool's own prints go to stderr, so they cannot be mistaken for an answer. A result whose JSON is longer
than RESULT_BUDGET_CHARS comes back as that much of its JSON text and a line saying how much was cut, so a Tool that
returns megabytes still gets an answer the replay can show.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import IO, Any

from agentrl.contract.config import ConfigError, load_config
from agentrl.environment.code_snapshot import use_snapshot
from agentrl.environment.loader import EnvLoadError, config_env_factory
from agentrl.environment.mcp import McpUnavailableError
from agentrl.environment.tool import ParsedCall, cut_result, describe_exception, execute_call

# What a re-run's answer carries of a result: far more than a turn's tool output budget, far less than a frame.
RESULT_BUDGET_CHARS = 256 * 2**10
# The longest answer line: the budget's characters JSON-escaped (up to 12 bytes each, a surrogate pair) and the rest.
ANSWER_LINE_MAX_BYTES = 12 * RESULT_BUDGET_CHARS + 2**16


def within_budget(result: Any) -> Any:
    """`result`, or, when its text is longer than RESULT_BUDGET_CHARS, that text cut there with what was cut."""
    kept, cut = cut_result(result, RESULT_BUDGET_CHARS)
    if cut is None:
        return result
    return (
        f"{kept}\n[... cut: {cut['chars'] - RESULT_BUDGET_CHARS:,} more characters over the re-run's answer budget "
        f"of {RESULT_BUDGET_CHARS:,}]"
    )


def answer_channel() -> IO[str]:
    """Where a child that answers a call (this one, a re-roll's: agentrl/run/reroll.py) writes its JSON lines: what was
    its stdout. Its stdout becomes its stderr, so what the user's code prints is never taken for an answer."""
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return answers


def say(channel: IO[str], message: dict[str, Any]) -> None:
    channel.write(json.dumps(message, allow_nan=False) + "\n")
    channel.flush()


def main() -> None:
    answers = answer_channel()
    request = json.loads(sys.stdin.read())
    try:
        config = load_config(request["config"])
        if request["snapshot"] is not None:
            config = use_snapshot(config, Path(request["snapshot"]))
        if config.env is not None and config.env.class_name is None:
            raise ValueError(
                f"a tool call of env.{config.env.source} acts on its episode's environment, which a re-run on its own "
                "cannot rebuild: re-roll the episode from that turn instead"
            )
        make_env = config_env_factory(config)  # an MCP server's tool is re-run on a fresh start of its server
    except (ConfigError, EnvLoadError, ValueError) as err:  # EnvLoadError: the env's module failed to import
        say(answers, {"setup_error": str(err)})
        os._exit(0)
    try:
        tools = make_env().tool_map()
    except McpUnavailableError as err:
        say(answers, {"setup_error": str(err)})
        os._exit(0)
    except Exception as err:  # noqa: BLE001 - the user's constructor
        say(answers, {"setup_error": f"building {config.env.describe()} raised {describe_exception(err)}"})
        os._exit(0)
    tool = tools.get(request["name"])
    default_timeout_s = config.rollout.tool_timeout_s
    timeout_s = None if tool is None else (tool.timeout_s if tool.timeout_s is not None else default_timeout_s)
    say(answers, {"ready": {"timeout_s": timeout_s}})
    call = ParsedCall(id=request["id"], name=request["name"], arguments=request["arguments"], raw=request["raw"])
    outcome = asyncio.run(execute_call(call, tools, default_timeout_s))
    say(
        answers,
        {
            "outcome": {
                "result": within_budget(outcome.result),
                "error": outcome.error,
                "error_kind": outcome.error_kind,
                "latency_ms": outcome.latency_ms,
            }
        },
    )
    make_env.close()  # stops the MCP servers it started, if any
    # Not a normal exit: a call past its timeout still holds its thread, and the user's code may have registered
    # exit handlers that wait for threads of its own (a ThreadPoolExecutor does); the answer is already out.
    os._exit(0)


if __name__ == "__main__":
    main()

"""Tool: an executor. It runs one action and reports the raw outcome ("what happened").

A Tool never decides what the outcome means for the episode; that is the ToolEnv's job.
Every way a call can fail (unknown tool, bad JSON, schema violation, exception, timeout,
a result that is not JSON) becomes a `ToolCallOutcome` with an error the model can read,
never an exception that ends the run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import inspect
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, NoReturn

import jsonschema


@dataclass
class ToolCallRecord:
    """One executed tool call, as the trajectory stores it."""

    id: str
    name: str
    arguments: dict[str, Any] | None  # None when the call's JSON could not be parsed
    raw: str  # the call as the model wrote it
    result: Any = None  # the Tool's raw outcome: "what happened"
    error: str | None = None  # unknown tool, bad JSON, schema violation, exception, timeout, bad result
    error_kind: Literal["unknown_tool", "bad_json", "schema", "exception", "timeout", "bad_result"] | None = None
    latency_ms: float = 0.0


# What a ToolEnv receives for each executed call: the same record the trajectory stores.
ToolCallOutcome = ToolCallRecord


class Tool:
    """Subclass and set `name`, `description`, `parameters` (a JSON Schema object, OpenAI function
    format); implement `execute(**arguments)`, sync or `async`. Return any JSON-serialisable value."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    timeout_s: ClassVar[float | None] = None  # None: the run's rollout.tool_timeout_s

    def execute(self, **arguments: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.execute is not implemented")

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.parameters:
            # A broken schema is the Tool author's bug: say so when the class is defined, not mid-run.
            jsonschema.Draft202012Validator.check_schema(cls.parameters)


@dataclass
class ParsedCall:
    """One tool call as the parser read it from the model's text."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw: str
    error: str | None = None  # set when the call could not be parsed (bad JSON, missing name)


# Calls that ran past their timeout keep their thread (Python cannot kill one); past this many per tool
# still running, the tool gets no new thread until one of them returns, so hung calls cannot pile up.
MAX_ABANDONED_CALLS = 4
_abandoned: Counter[str] = Counter()  # per tool
_abandoned_calls: set[int] = set()  # the ids of those calls' futures
_abandoned_lock = threading.Lock()


def _abandon(running: concurrent.futures.Future[Any], name: str) -> None:
    with _abandoned_lock:
        if not running.done():
            _abandoned_calls.add(id(running))
            _abandoned[name] += 1


def _finished(running: concurrent.futures.Future[Any], name: str) -> None:
    with _abandoned_lock:
        if id(running) in _abandoned_calls:
            _abandoned_calls.discard(id(running))
            _abandoned[name] -= 1


class ToolFailure(Exception):
    """A call that failed in a way the model reads as that Tool's error; the message is the whole text."""


# How a call is started: returns a future the caller may stop waiting for (a timeout), which the call then settles
# unobserved. `run_in_thread` is the default; `toolprocess.ToolWorker.runner` runs calls in a worker process.
ToolRunner = Callable[[Tool, dict[str, Any]], concurrent.futures.Future[Any]]


def call_sync_or_async(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the user's function on the calling thread; an async one gets its own event loop here."""
    if inspect.iscoroutinefunction(function):
        return asyncio.run(function(*args, **kwargs))
    return function(*args, **kwargs)


def invoke_tool(tool: Tool, arguments: dict[str, Any]) -> Any:
    """One call on the calling thread; an async Tool gets its own event loop here."""
    try:
        return call_sync_or_async(tool.execute, **arguments)
    except (SystemExit, KeyboardInterrupt) as err:
        hint = (
            " (a Tool that must end its process runs with rollout.tool_isolation: process)"
            if isinstance(err, ExitRefused)
            else ""
        )
        raise ToolFailure(
            f"{tool.name} tried to end the process ({describe_exception(err)}); a Tool returns or raises{hint}"
        ) from None


class ExitRefused(SystemExit):
    """`os._exit` called by user code (a Tool, an agent, a reward function) on one of the trainer's daemon threads:
    raised there instead, so the call fails, named, and the run goes on (the handlers of SystemExit say so)."""


_user_code = threading.local()  # `name`: set on the daemon threads that run user code
_exit_guard: dict[str, Any] = {}  # the real os._exit and the pid of the process it guards, once installed


def _guarded_exit(code: int) -> NoReturn:
    if getattr(_user_code, "name", None) is None or os.getpid() != _exit_guard["pid"]:
        _exit_guard["exit"](code)  # the trainer's own code, or a child forked from a Tool: ends as asked
    raise ExitRefused(f"os._exit({code}) in {_user_code.name}")


def _guard_exit() -> None:
    """Makes os._exit from user code on a daemon thread an exception (ExitRefused) rather than the end of the
    trainer's process; anywhere else, and in children forked from user code, os._exit is unchanged. A crash in
    native code still ends the process: rollout.tool_isolation: process keeps those to a worker."""
    if _exit_guard.get("pid") != os.getpid():
        _exit_guard.setdefault("exit", os._exit)
        _exit_guard["pid"] = os.getpid()
        os._exit = _guarded_exit


def run_in_thread(tool: Tool, arguments: dict[str, Any]) -> concurrent.futures.Future[Any]:
    """Every Tool runs in a daemon thread: a blocking call, in sync or async code, then delays only its own
    thread, so the rollout's timeout holds for every kind of Tool, and a Tool that never returns neither blocks
    the rollout nor keeps the process alive at exit."""
    return in_daemon_thread(f"tool-{tool.name}", lambda: invoke_tool(tool, arguments))


def in_daemon_thread(name: str, call: Callable[[], Any]) -> concurrent.futures.Future[Any]:
    """`call()` in a new daemon thread; its value or whatever it raised (SystemExit included, and os._exit made
    ExitRefused) settles the future. `name` names the user code the thread runs (thread name, ExitRefused)."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    future.set_running_or_notify_cancel()  # started: a caller that stops waiting cannot cancel it any more
    _guard_exit()

    def target() -> None:
        _user_code.name = name
        try:
            future.set_result(call())
        except BaseException as err:  # noqa: BLE001 - any failure of user code is reported to its caller
            future.set_exception(err)

    threading.Thread(target=target, name=name, daemon=True).start()
    return future


def cut_result(result: Any, budget_chars: int) -> tuple[Any, dict[str, Any] | None]:
    """(result, None) when its text (the string itself, or its JSON) is at most `budget_chars` characters; else the
    first `budget_chars` characters of that text and {chars, sha256} of the whole text: what a trajectory stores of a
    huge result, and what a re-run answers."""
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    if len(text) <= budget_chars:
        return result, None
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return text[:budget_chars], {"chars": len(text), "sha256": digest}


def describe_exception(err: BaseException) -> str:
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


async def execute_call(
    call: ParsedCall, tools: dict[str, Tool], default_timeout_s: float, run: ToolRunner = run_in_thread
) -> ToolCallOutcome:
    outcome = ToolCallOutcome(id=call.id, name=call.name, arguments=call.arguments, raw=call.raw)
    if call.error is not None:
        outcome.error, outcome.error_kind = call.error, "bad_json"
        return outcome
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        outcome.error, outcome.error_kind = f"unknown tool {call.name!r}; available tools: {known}", "unknown_tool"
        return outcome
    arguments = call.arguments or {}
    try:
        jsonschema.validate(arguments, tool.parameters)
    except jsonschema.ValidationError as err:
        where = "/".join(str(p) for p in err.absolute_path) or "arguments"
        outcome.error, outcome.error_kind = f"invalid arguments for {tool.name}: {where}: {err.message}", "schema"
        return outcome
    timeout_s = tool.timeout_s if tool.timeout_s is not None else default_timeout_s
    with _abandoned_lock:
        still_running = _abandoned[tool.name]
    if still_running >= MAX_ABANDONED_CALLS:
        outcome.error, outcome.error_kind = (
            (
                f"{tool.name} not called: {still_running} earlier calls are still "
                f"running past their {timeout_s:g} s timeout"
            ),
            "timeout",
        )
        return outcome
    started = time.perf_counter()
    running = run(tool, arguments)
    running.add_done_callback(functools.partial(_finished, name=tool.name))
    try:
        result = await asyncio.wait_for(asyncio.wrap_future(running), timeout_s)
    except TimeoutError:
        _abandon(running, tool.name)
        outcome.error, outcome.error_kind = f"{tool.name} timed out after {timeout_s:g} s", "timeout"
    except ToolFailure as err:
        outcome.error, outcome.error_kind = str(err), "exception"
    except Exception as err:  # noqa: BLE001 - the model sees the error and may recover
        outcome.error, outcome.error_kind = f"{tool.name} raised {describe_exception(err)}", "exception"
    else:
        try:
            json.dumps(result, allow_nan=False)  # NaN and infinity are not JSON: the trajectory could not be stored
            outcome.result = result
        except (TypeError, ValueError) as err:
            outcome.result = repr(result)
            why = "it holds NaN or infinity" if "Out of range float" in str(err) else str(err)
            outcome.error = f"{tool.name} returned a value that is not JSON: {why}"
            outcome.error_kind = "bad_result"
    outcome.latency_ms = (time.perf_counter() - started) * 1000.0
    return outcome


async def execute_calls(
    calls: list[ParsedCall], tools: dict[str, Tool], default_timeout_s: float, run: ToolRunner = run_in_thread
) -> list[ToolCallOutcome]:
    """All calls of one turn run concurrently; results keep the calls' order."""
    return list(await asyncio.gather(*(execute_call(c, tools, default_timeout_s, run) for c in calls)))

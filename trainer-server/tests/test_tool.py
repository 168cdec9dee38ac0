import asyncio
import subprocess
import sys
import threading
import time

import jsonschema
import pytest
from agentrl import Tool
from agentrl.environment.loader import env_factory
from agentrl.environment.tool import MAX_ABANDONED_CALLS, ParsedCall, execute_calls, run_in_thread
from agentrl.environment.toolprocess import ToolWorker
from failing_tools import AsyncBlocks, AsyncInterrupts, Boom, Exits, FailingToolsEnv, Garbage, Hang, NotANumber


class Add(Tool):
    name = "add"
    description = "add two integers"
    parameters = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }

    def execute(self, a, b):
        return a + b


class AsyncHang(Tool):
    name = "ahang"
    timeout_s = 0.2

    async def execute(self):
        await asyncio.sleep(30)


TOOLS = {
    t.name: t
    for t in (Add(), Boom(), Hang(), AsyncHang(), Garbage(), NotANumber(), Exits(), AsyncInterrupts(), AsyncBlocks())
}


def run(*calls, runner=run_in_thread):
    return asyncio.run(execute_calls(list(calls), TOOLS, default_timeout_s=5.0, run=runner))


@pytest.fixture(scope="module")
def tool_worker():
    worker = ToolWorker(env_factory(FailingToolsEnv, {}, []))
    yield worker
    worker.close()


@pytest.fixture(params=["thread", "process"])
def runner(request, tool_worker):
    """Where the Tool runs: each test of a failure below holds for both rollout.tool_isolation settings."""
    return run_in_thread if request.param == "thread" else tool_worker.runner(tool_worker.new_episode())


def test_success_result_and_latency():
    [out] = run(ParsedCall("c0", "add", {"a": 2, "b": 3}, "raw"))
    assert (out.result, out.error, out.error_kind) == (5, None, None)
    assert out.latency_ms >= 0


@pytest.mark.parametrize(
    "call, kind, text",
    [
        (
            ParsedCall("c", "nope", {}, "raw"),
            "unknown_tool",
            "unknown tool 'nope'; available tools: ablocks, add, ahang",
        ),
        (ParsedCall("c", "", None, "raw", error="tool call is not valid JSON"), "bad_json", "not valid JSON"),
        (
            ParsedCall("c", "add", {"a": "x", "b": 1}, "raw"),
            "schema",
            "invalid arguments for add: a: 'x' is not of type",
        ),
        (ParsedCall("c", "add", {"a": 1}, "raw"), "schema", "'b' is a required property"),
    ],
)
def test_every_bad_call_is_an_outcome(call, kind, text):
    [out] = run(call)
    assert out.error_kind == kind
    assert text in out.error


@pytest.mark.parametrize(
    "name, kind, text",
    [
        ("boom", "exception", "boom raised RuntimeError: kaput"),
        ("garbage", "bad_result", "garbage returned a value that is not JSON"),
        ("nan", "bad_result", "nan returned a value that is not JSON: it holds NaN or infinity"),
        ("exits", "exception", "exits tried to end the process (SystemExit: 7)"),
        ("ainterrupts", "exception", "ainterrupts tried to end the process (KeyboardInterrupt)"),
    ],
)
def test_every_tool_failure_is_an_outcome(runner, name, kind, text):
    [out] = run(ParsedCall("c", name, {}, "raw"), runner=runner)
    assert out.error_kind == kind
    assert text in out.error


@pytest.mark.parametrize("name", ["hang", "ablocks"])
def test_hung_tool_times_out_without_blocking(runner, name):
    started = time.perf_counter()
    [out] = run(ParsedCall("c", name, {}, "raw"), runner=runner)
    assert out.error_kind == "timeout" and "timed out after 0.2 s" in out.error
    assert time.perf_counter() - started < 2.0


def test_hung_async_tool_times_out():
    [out] = run(ParsedCall("c", "ahang", {}, "raw"))
    assert out.error_kind == "timeout" and "timed out after 0.2 s" in out.error


def test_a_tool_that_ends_the_worker_process_fails_only_its_call(tool_worker):
    """os._exit cannot be caught in the process it ends: under process isolation it ends the worker, the call
    is that Tool's error, and the next call gets a new worker."""
    tools = FailingToolsEnv().tool_map()
    episode = tool_worker.runner(tool_worker.new_episode())
    died = asyncio.run(execute_calls([ParsedCall("a", "ends_process", {}, "r")], tools, 5.0, episode))[0]
    assert died.error_kind == "exception"
    assert died.error.startswith("ends_process did not answer: the tool worker process ended (exit code 3)")
    again = asyncio.run(execute_calls([ParsedCall("b", "counter", {}, "r")], tools, 5.0, episode))[0]
    assert (again.error, again.result) == (None, 1)


class ForksAChild(Tool):
    """Starts a forked child that ends the way multiprocessing ends every child: with os._exit."""

    name = "forks"

    def execute(self):
        import multiprocessing

        child = multiprocessing.get_context("fork").Process(target=lambda: None)
        child.start()
        child.join(10)
        return child.exitcode


def test_os_exit_in_a_thread_isolated_tool_fails_its_call_named_and_the_process_goes_on():
    """Under the default thread isolation, os._exit from a Tool's call ended the run with only its exit code; now
    the call fails naming the Tool and where such a Tool runs, and os._exit anywhere else still exits."""
    tools = {**FailingToolsEnv().tool_map(), "forks": ForksAChild()}
    [died] = asyncio.run(execute_calls([ParsedCall("a", "ends_process", {}, "r")], tools, 5.0, run_in_thread))
    assert died.error_kind == "exception"
    assert died.error.startswith(
        "ends_process tried to end the process (ExitRefused: os._exit(3) in tool-ends_process)"
    )
    assert died.error.endswith("(a Tool that must end its process runs with rollout.tool_isolation: process)")
    [forked] = asyncio.run(execute_calls([ParsedCall("b", "forks", {}, "r")], tools, 5.0, run_in_thread))
    assert (forked.error, forked.result) == (None, 0)  # the forked child's os._exit ended the child, as asked
    ended = subprocess.run(
        [sys.executable, "-c", "import os; from agentrl.environment import tool; tool._guard_exit(); os._exit(5)"],
        timeout=60,
    )
    assert ended.returncode == 5  # the trainer's own os._exit, outside user code, is unchanged


def test_each_episode_keeps_its_own_tool_state_in_the_worker(tool_worker):
    tools = FailingToolsEnv().tool_map()
    first, second = tool_worker.new_episode(), tool_worker.new_episode()

    def count(episode):
        call = ParsedCall("c", "counter", {}, "r")
        return asyncio.run(execute_calls([call], tools, 5.0, tool_worker.runner(episode)))[0].result

    assert [count(first), count(first), count(second)] == [1, 2, 1]
    tool_worker.release([first])
    assert count(first) == 1  # a released episode's env is gone; its id is never reused in practice


def test_calls_of_one_turn_run_concurrently_and_keep_order():
    started = time.perf_counter()
    outs = run(
        ParsedCall("a", "hang", {}, "r"),
        ParsedCall("b", "ahang", {}, "r"),
        ParsedCall("c", "add", {"a": 1, "b": 1}, "r"),
    )
    assert [o.id for o in outs] == ["a", "b", "c"]
    assert time.perf_counter() - started < 1.0  # two 0.2 s timeouts overlapped
    assert outs[2].result == 2


def test_invalid_parameter_schema_fails_at_class_definition():
    with pytest.raises(jsonschema.SchemaError):

        class Broken(Tool):  # noqa: F841
            name = "broken"
            parameters = {"type": "not-a-type"}


def test_schema_is_openai_function_format():
    assert Add().schema() == {
        "type": "function",
        "function": {"name": "add", "description": "add two integers", "parameters": Add.parameters},
    }


def test_hung_calls_do_not_pile_up_threads():
    class Stuck(Tool):
        name = "stuck"
        timeout_s = 0.05

        def execute(self):
            time.sleep(3)

    before = threading.active_count()
    outcomes = [
        asyncio.run(execute_calls([ParsedCall(str(i), "stuck", {}, "r")], {"stuck": Stuck()}, 5.0))[0]
        for i in range(12)
    ]
    assert threading.active_count() - before <= MAX_ABANDONED_CALLS
    assert all(o.error_kind == "timeout" for o in outcomes)
    refused = [o for o in outcomes if "not called" in o.error]
    assert len(refused) == 12 - MAX_ABANDONED_CALLS
    assert f"{MAX_ABANDONED_CALLS} earlier calls are still running past their 0.05 s timeout" in refused[0].error

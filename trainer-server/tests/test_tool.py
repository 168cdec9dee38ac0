import asyncio
import threading
import time

import jsonschema
import pytest

from agentrl import Tool
from agentrl.tool import MAX_ABANDONED_CALLS, ParsedCall, execute_calls

from failing_tools import AsyncBlocks, AsyncInterrupts, Boom, Exits, Garbage, Hang, NotANumber


class Add(Tool):
    name = "add"
    description = "add two integers"
    parameters = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                  "required": ["a", "b"]}

    def execute(self, a, b):
        return a + b


class AsyncHang(Tool):
    name = "ahang"
    timeout_s = 0.2

    async def execute(self):
        await asyncio.sleep(30)


TOOLS = {t.name: t for t in (Add(), Boom(), Hang(), AsyncHang(), Garbage(), NotANumber(), Exits(), AsyncInterrupts(),
                             AsyncBlocks())}


def run(*calls):
    return asyncio.run(execute_calls(list(calls), TOOLS, default_timeout_s=5.0))


def test_success_result_and_latency():
    [out] = run(ParsedCall("c0", "add", {"a": 2, "b": 3}, "raw"))
    assert (out.result, out.error, out.error_kind) == (5, None, None)
    assert out.latency_ms >= 0


@pytest.mark.parametrize("call, kind, text", [
    (ParsedCall("c", "nope", {}, "raw"), "unknown_tool", "unknown tool 'nope'; available tools: ablocks, add, ahang"),
    (ParsedCall("c", "", None, "raw", error="tool call is not valid JSON"), "bad_json", "not valid JSON"),
    (ParsedCall("c", "add", {"a": "x", "b": 1}, "raw"), "schema", "invalid arguments for add: a: 'x' is not of type"),
    (ParsedCall("c", "add", {"a": 1}, "raw"), "schema", "'b' is a required property"),
    (ParsedCall("c", "boom", {}, "raw"), "exception", "boom raised RuntimeError: kaput"),
    (ParsedCall("c", "garbage", {}, "raw"), "bad_result", "garbage returned a value that is not JSON"),
    (ParsedCall("c", "nan", {}, "raw"), "bad_result", "nan returned a value that is not JSON: it holds NaN or infinity"),
    (ParsedCall("c", "exits", {}, "raw"), "exception", "exits tried to end the process (SystemExit: 7)"),
    (ParsedCall("c", "ainterrupts", {}, "raw"), "exception", "ainterrupts tried to end the process (KeyboardInterrupt)"),
])
def test_every_failure_is_an_outcome(call, kind, text):
    [out] = run(call)
    assert out.error_kind == kind
    assert text in out.error


@pytest.mark.parametrize("name", ["hang", "ahang", "ablocks"])
def test_hung_tool_times_out_without_blocking(name):
    started = time.perf_counter()
    [out] = run(ParsedCall("c", name, {}, "raw"))
    assert out.error_kind == "timeout" and "timed out after 0.2 s" in out.error
    assert time.perf_counter() - started < 2.0


def test_calls_of_one_turn_run_concurrently_and_keep_order():
    started = time.perf_counter()
    outs = run(ParsedCall("a", "hang", {}, "r"), ParsedCall("b", "ahang", {}, "r"), ParsedCall("c", "add", {"a": 1, "b": 1}, "r"))
    assert [o.id for o in outs] == ["a", "b", "c"]
    assert time.perf_counter() - started < 1.0  # two 0.2 s timeouts overlapped
    assert outs[2].result == 2


def test_invalid_parameter_schema_fails_at_class_definition():
    with pytest.raises(jsonschema.SchemaError):
        class Broken(Tool):  # noqa: F841
            name = "broken"
            parameters = {"type": "not-a-type"}


def test_schema_is_openai_function_format():
    assert Add().schema() == {"type": "function", "function": {
        "name": "add", "description": "add two integers", "parameters": Add.parameters}}


def test_hung_calls_do_not_pile_up_threads():
    class Stuck(Tool):
        name = "stuck"
        timeout_s = 0.05

        def execute(self):
            time.sleep(3)

    before = threading.active_count()
    outcomes = [asyncio.run(execute_calls([ParsedCall(str(i), "stuck", {}, "r")], {"stuck": Stuck()}, 5.0))[0]
                for i in range(12)]
    assert threading.active_count() - before <= MAX_ABANDONED_CALLS
    assert all(o.error_kind == "timeout" for o in outcomes)
    refused = [o for o in outcomes if "not called" in o.error]
    assert len(refused) == 12 - MAX_ABANDONED_CALLS
    assert f"{MAX_ABANDONED_CALLS} earlier calls are still running past their 0.05 s timeout" in refused[0].error

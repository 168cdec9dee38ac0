"""`tool/rerun` against a live server: a recorded call runs again with the current code of its Tool (edited on disk
after the run), with the Tool's timeout, in a child process that never blocks the server; refused off loopback
unless the server was started with --allow-code, as every method that runs code is; bad params get documented
errors."""

import json
import shutil
import threading
import time

import pytest
from agentrl.contract.config import load_config
from agentrl.rollout.scripted import ScriptedPolicy
from agentrl.run.trainer import train
from agentrl.server import protocol as p
from server_harness import ServerProcess, command_lines_with, example_config

ENV_SOURCE = """
import os
import time

from agentrl import Tool
from agentrl.examples.lookup.env import LookupEnv as ShippedLookupEnv

TABLE = {"3": "gold"}


class Lookup(Tool):
    name = "lookup"
    description = "Return the value stored under a key."
    parameters = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}
    timeout_s = 1.5

    def execute(self, key):
        print("a Tool that prints must not confuse the re-run")
        BODY


class LookupEnv(ShippedLookupEnv):
    \"\"\"agentrl's lookup example with this folder's Lookup, whose body the tests edit.\"\"\"

    def __init__(self, **args):
        super().__init__(**args)
        self.tools = [Lookup()]
"""
RECORDED_BODY = "return TABLE[key]"
CALL = '<tool_call>{"name": "lookup", "arguments": {"key": "3"}}</tool_call>'
UNPARSED = "<tool_call>{not json</tool_call>"


def write_env(folder, body):
    (folder / "env.py").write_text(ENV_SOURCE.replace("BODY", body))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A Try run whose episodes call lookup("3") once, then write a call that does not parse."""
    folder = tmp_path_factory.mktemp("env")
    write_env(folder, RECORDED_BODY)
    (folder / "tasks.jsonl").write_text(json.dumps({"key": "3"}) + "\n")
    (folder / "rerun.agentrl.yaml").write_text(
        "name: rerun\nmodel: {path: tiny}\nenv: {module: env.py, class_name: LookupEnv}\n"
        "data: {train: tasks.jsonl}\nrollout: {group_size: 1, max_turns: 3, max_new_tokens: 24, tool_timeout_s: 5}\n"
    )
    runs_dir = folder / "runs"
    run_dir = train(
        load_config(folder / "rerun.agentrl.yaml"),
        runs_dir=runs_dir,
        rollout_only_episodes=1,
        config_base_dir=folder,
        policy=ScriptedPolicy([CALL, UNPARSED, "done"]),
    )
    record = json.loads(next((run_dir / "trajectories").glob("*.jsonl")).read_text().splitlines()[0])
    assert record["turns"][0]["tool_calls"][0]["result"] == "gold"
    yield folder, runs_dir, run_dir.name, record["id"]
    write_env(folder, RECORDED_BODY)


@pytest.fixture(scope="module")
def server(recorded):
    running = ServerProcess(recorded[1])
    yield running
    running.stop()


@pytest.fixture
def client(server, recorded):
    connected = server.client()
    yield connected
    connected.close()
    write_env(recorded[0], RECORDED_BODY)


def rerun(client, recorded, turn=0, call=0, **extra):
    _, _, run_id, trajectory_id = recorded
    return client.call(
        "tool/rerun", {"runId": run_id, "trajectoryId": trajectory_id, "turn": turn, "call": call, **extra}, timeout=60
    )


def test_rerun_gives_the_recorded_result_then_an_edited_tools_new_one(server, recorded, client):
    assert client.request("initialize", {"protocolVersion": p.PROTOCOL_VERSION})["capabilities"]["runsCode"] is True
    same = rerun(client, recorded)["result"]
    assert same["name"] == "lookup" and same["arguments"] == {"key": "3"} and same["timeoutS"] == 1.5
    assert same["recorded"]["result"] == same["rerun"]["result"] == "gold"
    assert same["rerun"]["error"] is None and same["rerun"]["latencyMs"] >= 0

    write_env(recorded[0], "return TABLE[key].upper() + '!'")  # the Tool edited after the run
    edited = rerun(client, recorded)["result"]
    assert edited["rerun"] == {
        "result": "GOLD!",
        "error": None,
        "errorKind": None,
        "latencyMs": edited["rerun"]["latencyMs"],
    }
    assert edited["recorded"] == same["recorded"], "the recorded outcome is the trajectory's, untouched"

    write_env(recorded[0], "raise ValueError('the store is down')")
    failed = rerun(client, recorded)["result"]["rerun"]
    assert failed["errorKind"] == "exception" and failed["error"] == "lookup raised ValueError: the store is down"


def test_rerun_with_the_runs_code_gives_the_recorded_result_and_with_the_current_code_the_edited_one(
    server, recorded, client
):
    folder, _, run_id, _ = recorded
    write_env(folder, "return TABLE[key].upper() + '!'")  # the Tool edited after the run
    snapshot = rerun(client, recorded, code="snapshot")["result"]
    assert snapshot["code"] == "snapshot" and snapshot["rerun"]["result"] == "gold", "the run's code, as recorded"
    current = rerun(client, recorded, code="current")["result"]
    assert current["code"] == "current" and current["rerun"]["result"] == "GOLD!"
    assert rerun(client, recorded)["result"]["code"] == "current", "today's code unless asked"

    (folder / "env.py").unlink()  # the env folder's code gone: the snapshot still runs
    assert rerun(client, recorded, code="snapshot")["result"]["rerun"]["result"] == "gold"
    gone = rerun(client, recorded)["error"]
    assert gone["code"] == p.TOOL_RERUN_FAILED and "cannot build the env with the current code" in gone["message"]

    manifest = server.runs_dir / run_id / "code.json"
    manifest.rename(manifest.with_suffix(".kept"))  # a run from before runs recorded their code
    try:
        older = rerun(client, recorded, code="snapshot")["error"]
    finally:
        manifest.with_suffix(".kept").rename(manifest)
    assert older["code"] == p.TOOL_RERUN_FAILED and "recorded no code snapshot" in older["message"]
    assert "cannot build the env with the run's code" in older["message"]


def test_rerun_times_out_with_the_tools_timeout_and_never_blocks_the_server(server, recorded, client):
    write_env(recorded[0], "time.sleep(60)")
    answered: dict = {}
    thread = threading.Thread(target=lambda: answered.update(rerun(client, recorded)))
    started = time.perf_counter()
    thread.start()
    time.sleep(0.5)
    other = server.client()
    ping_started = time.perf_counter()
    other.request("server/ping")
    assert time.perf_counter() - ping_started < 1.0, "the re-run must not hold the server's event loop"
    other.close()
    thread.join(timeout=30)
    outcome = answered["result"]["rerun"]
    assert outcome["errorKind"] == "timeout" and outcome["error"] == "lookup timed out after 1.5 s"
    assert 1500 <= outcome["latencyMs"] < 5000 and time.perf_counter() - started < 15


def test_a_tool_that_ends_the_process_or_an_env_that_no_longer_imports(server, recorded, client):
    write_env(recorded[0], "os._exit(3)")  # as in a run under rollout.tool_isolation: thread, the call fails, named
    refused = rerun(client, recorded)["result"]["rerun"]
    assert refused["errorKind"] == "exception"
    assert refused["error"].startswith("lookup tried to end the process (ExitRefused: os._exit(3) in tool-lookup)")

    write_env(recorded[0], "import threading; threading.Thread(target=os._exit, args=(3,)).start(); time.sleep(5)")
    ended = rerun(client, recorded)["result"]["rerun"]  # from a thread of the Tool's own, it still ends the process
    assert ended["errorKind"] == "exception"
    assert "the re-run process ended (exit code 3) while it ran" in ended["error"]

    write_env(recorded[0], "return (")  # a syntax error: the env cannot be built now
    broken = rerun(client, recorded)["error"]
    assert broken["code"] == p.TOOL_RERUN_FAILED
    assert "cannot build the env with the current code" in broken["message"] and "SyntaxError" in broken["message"]


def test_bad_params_get_documented_errors(server, recorded, client):
    _, _, run_id, trajectory_id = recorded
    no_call = rerun(client, recorded, turn=0, call=5)["error"]
    assert no_call["code"] == p.TRAJECTORY_NOT_FOUND and "has no call 5 in turn 0" in no_call["message"]
    assert rerun(client, recorded, turn=40)["error"]["code"] == p.TRAJECTORY_NOT_FOUND
    unparsed = rerun(client, recorded, turn=1)["error"]
    assert unparsed["code"] == p.INVALID_PARAMS and "did not parse (bad_json)" in unparsed["message"]
    spoofed = rerun(client, recorded, arguments={"key": "4"})["error"]
    assert spoofed["code"] == p.INVALID_PARAMS, "arguments come from the trajectory, never from the client"
    params = {"turn": 0, "call": 0}
    assert client.call("tool/rerun", {"runId": "nope", "trajectoryId": trajectory_id, **params})["error"]["code"] == (
        p.RUN_NOT_FOUND
    )
    missing = client.call("tool/rerun", {"runId": run_id, "trajectoryId": "9-9-9", **params})["error"]
    assert missing["code"] == p.TRAJECTORY_NOT_FOUND


@pytest.mark.parametrize("allowed", [False, True])
def test_off_loopback_every_method_that_runs_code_is_refused_unless_the_server_allows_it(recorded, tmp_path, allowed):
    """A remote server without the former --allow-tool-rerun refused tool/rerun but ran a client's command line through
    mcp/listTools and bundle code through env/check: one gate now decides every method that runs code."""
    token_file = tmp_path / "token"
    token_file.write_text("a-token-of-more-than-16-characters\n")
    token_file.chmod(0o600)  # a token file others may read is refused off loopback
    extra = ["--host", "0.0.0.0", "--token-file", str(token_file), "--allow-cleartext"]  # no TLS: not what is tested
    extra += ["--allow-code"] if allowed else []
    runs = tmp_path / "runs"  # a copy: the module's loopback server holds the recorded runs folder (one server each)
    shutil.copytree(recorded[1], runs, ignore=shutil.ignore_patterns(".serve-*"))
    remote = ServerProcess(runs, *extra)
    remote.token = token_file.read_text().strip()
    client = remote.client(initialize=False)
    marker = tmp_path / "listed"  # what the MCP "server" command writes if it is ever run
    code_running = {
        "run/start": {"config": example_config()},
        "run/resume": {"runId": recorded[2]},
        "env/check": {"bundleId": "0" * 64},
        "tool/rerun": {"runId": recorded[2], "trajectoryId": recorded[3], "turn": 0, "call": 0},
        "episode/reroll": {
            "runId": recorded[2],
            "trajectoryId": recorded[3],
            **{"turn": 0, "edit": "observation", "text": "x", "policy": "base", "samples": 1, "temperature": 0},
        },
        "mcp/listTools": {"server": {"name": "m", "command": "sh", "args": ["-c", f"touch {marker}"]}},
    }
    assert set(code_running) == p.CODE_RUNNING_METHODS
    try:
        capabilities = client.request("initialize", {"protocolVersion": p.PROTOCOL_VERSION})["capabilities"]
        assert capabilities["runsCode"] is allowed
        assert client.request("run/list")["runs"]  # what runs no code is answered either way
        if allowed:
            assert rerun(client, recorded)["result"]["rerun"]["result"] == "gold"
            assert client.call("mcp/listTools", code_running["mcp/listTools"], timeout=60)["error"]["code"] == (
                p.MCP_SERVER_UNAVAILABLE  # it ran, and is no MCP server
            )
            assert marker.exists()
        else:
            for method, params in code_running.items():
                answer = client.call(method, params, timeout=60)
                assert answer["error"]["code"] == p.CODE_NOT_ALLOWED, method
                assert "--allow-code" in answer["error"]["message"] and "0.0.0.0" in answer["error"]["message"]
            assert not marker.exists()
    finally:
        client.close()
        remote.stop()


@pytest.mark.parametrize("size", [70_000, 20_000_000])
def test_a_tool_returning_megabytes_gets_an_answer_cut_to_the_budget_and_said_so(server, recorded, client, size):
    """A result over ~65,500 characters answered -32603 (the answer line overran the pipe reader's 64 KiB): any size
    gets an answer, the whole of one within the budget, a larger one cut with what was cut."""
    from agentrl.environment.rerun import RESULT_BUDGET_CHARS

    write_env(recorded[0], f"return 'é' * {size}")
    rerun_result = rerun(client, recorded)["result"]["rerun"]
    assert rerun_result["error"] is None
    text = "é" * size  # a string is cut as itself; any other value as its JSON
    if len(text) <= RESULT_BUDGET_CHARS:
        assert rerun_result["result"] == "é" * size
    else:
        cut = len(text) - RESULT_BUDGET_CHARS
        assert rerun_result["result"].startswith(text[:1000])
        assert rerun_result["result"].endswith(
            f"[... cut: {cut:,} more characters over the re-run's answer budget of 262,144]"
        )


def test_a_tool_that_starts_a_background_process_does_not_hold_the_rerun_open(server, recorded, client):
    """A Tool that started `sleep 300` made the re-run take 300 s: the re-run waited for the pipes the sleep kept.
    The child runs in a process group of its own, ended with the call: the answer comes at once, the sleep is gone."""
    marker = "agentrl-rerun-background-7f3a"
    sleeper = (
        f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '{marker}'])"
    )
    write_env(recorded[0], f"{sleeper}; return TABLE[key]")
    started = time.perf_counter()
    outcome = rerun(client, recorded)["result"]["rerun"]
    assert outcome["result"] == "gold" and time.perf_counter() - started < 30
    time.sleep(0.5)
    left = command_lines_with(marker)
    assert not left, f"the Tool's background process outlived the re-run: {left}"

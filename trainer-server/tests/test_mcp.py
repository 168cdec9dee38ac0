"""MCP servers as Tools (env.mcp_servers): a real server written with the SDK (mcp_server.py), over stdio and
streamable HTTP, in a Try run and in training, crashed mid-run, hung, and missing."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agentrl.contract.config import ConfigError, load_config
from agentrl.contract.env_sources import McpServerConfig
from agentrl.environment.mcp import McpServers, McpUnavailableError
from agentrl.environment.tool import ToolFailure
from agentrl.rollout.check import check_env
from agentrl.rollout.scripted import ScriptedPolicy
from agentrl.run.runstore import latest_status, read_events
from agentrl.run.trainer import train
from agentrl.server import protocol as p
from conftest import free_port
from server_harness import ServerProcess

SERVER = Path(__file__).with_name("mcp_server.py")

MCP_ENV = """
from agentrl import EpisodeScore, Tool, ToolEnv


class Add(Tool):
    name = "add"
    description = "the env's own add, which keeps its name"
    parameters = {"type": "object", "properties": {}}

    def execute(self):
        return "own"


class McpEnv(ToolEnv):
    def __init__(self, **args):
        self.tools = [Add()]

    def reset(self, task):
        return [{"role": "user", "content": task["q"]}]

    def score(self, final_text):
        return EpisodeScore(reward=float("ok" in final_text))
"""


def call(name, **arguments):
    return f'<tool_call>{{"name": "{name}", "arguments": {json.dumps(arguments)}}}</tool_call>'


def write_env(folder, steps=1, timeout_s=20, server=None):
    (folder / "env.py").write_text(MCP_ENV)
    (folder / "tasks.jsonl").write_text(json.dumps({"q": "go"}) + "\n")
    server = server or f"{{name: math, command: {sys.executable}, args: [{SERVER}], timeout_s: {timeout_s}}}"
    (folder / "f.agentrl.yaml").write_text(
        f"env: {{module: env.py, class_name: McpEnv, mcp_servers: [{server}]}}\ndata: {{train: tasks.jsonl}}\n"
        "rollout: {group_size: 2, max_turns: 3, max_new_tokens: 200, max_context: 8000}\n"
        f"train: {{steps: {steps}, batch_size: 2}}\n"
    )
    return folder / "f.agentrl.yaml"


def records_of(run_dir):
    return [
        json.loads(line)
        for path in sorted((Path(run_dir) / "trajectories").glob("*.trajectories.jsonl"))
        for line in path.read_text().splitlines()
    ]


def metrics_by_step(run_dir):
    return {e["data"]["step"]: e["data"]["metrics"] for e in read_events(run_dir) if e["type"] == "metrics"}


def stdio(timeout_s=20.0, name="math"):
    return McpServerConfig(name=name, command=sys.executable, args=[str(SERVER)], timeout_s=timeout_s)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"name": "a"}, "give either command"),
        ({"name": "a", "command": "x", "url": "http://127.0.0.1:1/mcp"}, "give either command"),
        ({"name": "a", "command": "x", "headers": {"k": "v"}}, "headers are for streamable HTTP"),
        ({"name": "a", "url": "http://127.0.0.1:1/mcp", "args": ["x"]}, "args, env and cwd are for stdio"),
        ({"name": "a", "url": "ftp://x"}, "url"),
        ({"name": "a b", "command": "x"}, "name"),
        ({"name": "a", "command": "x", "timeout_s": 0}, "timeout_s"),
    ],
)
def test_a_bad_mcp_server_entry_is_a_config_error_naming_it(tmp_path, entry, says):
    path = tmp_path / "f.agentrl.yaml"
    path.write_text(
        json.dumps({"env": {"module": "m", "class_name": "C", "mcp_servers": [entry]}, "data": {"train": "t"}})
    )
    with pytest.raises(ConfigError, match=says):
        load_config(path)


def test_two_servers_with_one_name_are_a_config_error(tmp_path):
    path = tmp_path / "f.agentrl.yaml"
    entry = {"name": "a", "command": "x"}
    path.write_text(
        json.dumps({"env": {"module": "m", "class_name": "C", "mcp_servers": [entry, entry]}, "data": {"train": "t"}})
    )
    with pytest.raises(ConfigError, match="each server needs its own name"):
        load_config(path)


def test_a_server_lists_answers_fails_hangs_and_crashes_and_is_restarted_for_the_next_episode():
    servers = McpServers([stdio(timeout_s=2)])
    try:
        tools = {tool.name: tool for tool in servers.tools(taken=["add"])}
        # The env's own "add" keeps its name; the server's is namespaced; the others keep theirs.
        assert sorted(tools) == ["crash", "divide", "hang", "math__add", "pid", "shout"]
        assert tools["math__add"].parameters["required"] == ["a", "b"]
        assert tools["shout"].description == "The text in capitals."
        assert tools["math__add"].execute(a=2, b=3) == {"result": 5}
        with pytest.raises(ToolFailure, match='divide failed on MCP server "math"'):
            tools["divide"].execute(a=1, b=0)  # the tool failed; the server lives on
        first_pid = tools["pid"].execute()["result"]
        started = time.perf_counter()
        with pytest.raises(ToolFailure, match=r'hang timed out after 2 s: MCP server "math" is restarted'):
            tools["hang"].execute()
        assert time.perf_counter() - started < 10
        with pytest.raises(ToolFailure, match=r"pid not called: MCP server \"math\" is down \(it did not answer"):
            tools["pid"].execute()
        assert servers.take_restarts() == 0  # restarts happen when an episode starts, not mid-episode

        tools = {tool.name: tool for tool in servers.tools()}
        assert servers.take_restarts() == 1 and servers.take_restarts() == 0
        second_pid = tools["pid"].execute()["result"]
        assert second_pid != first_pid
        with pytest.raises(ToolFailure, match='crash failed: MCP server "math" stopped answering'):
            tools["crash"].execute()
        tools = {tool.name: tool for tool in servers.tools()}
        assert servers.take_restarts() == 1
        assert tools["pid"].execute()["result"] not in (first_pid, second_pid)
    finally:
        servers.close()


def test_a_server_that_cannot_start_says_so_and_the_sdk_missing_says_what_to_install(monkeypatch):
    servers = McpServers([McpServerConfig(name="gone", command="/nonexistent/mcp-server")])
    with pytest.raises(McpUnavailableError, match='server "gone" could not start'):
        servers.tools()
    servers.close()
    monkeypatch.setitem(sys.modules, "mcp", None)
    servers = McpServers([stdio()])
    with pytest.raises(McpUnavailableError, match=r"pip install 'agentrl\[mcp\]'"):
        servers.tools()
    servers.close()


def test_a_try_run_offers_the_servers_tools_and_their_results_reach_the_observation(tmp_path, trajectory_validator):
    config = write_env(tmp_path)
    policy = ScriptedPolicy([call("math__add", a=2, b=3) + call("shout", text="hi"), call("pid"), "ok"])
    run_dir = train(
        load_config(config),
        runs_dir=tmp_path / "runs",
        config_base_dir=tmp_path,
        policy=policy,
        rollout_only_episodes=2,
    )
    assert latest_status(read_events(run_dir))["status"] == "completed"
    records = records_of(run_dir)
    assert len(records) == 2
    for record in records:
        trajectory_validator.validate(record)
        offered = [tool["function"]["name"] for tool in record["tools"]]
        assert offered == ["add", "math__add", "shout", "divide", "crash", "hang", "pid"]
        assert record["tool_servers"] == {name: "math" for name in offered if name != "add"}
        first = record["turns"][0]
        assert [c["result"] for c in first["tool_calls"]] == [{"result": 5}, {"result": "HI"}]
        assert '{"result": 5}' in first["observation"] and "HI" in first["observation"]
        assert record["reward"] == 1.0
    # The episodes shared one server process, and the run's end stopped it.
    [server_pid] = {record["turns"][1]["tool_calls"][0]["result"]["result"] for record in records}
    with pytest.raises(ProcessLookupError):
        for _ in range(50):
            os.kill(server_pid, 0)
            time.sleep(0.1)
    assert "shouting 'hi'" in (run_dir / "mcp-math.log").read_text()  # the server's stderr, kept with the run


def test_a_server_that_crashes_mid_run_is_an_error_observation_and_is_restarted_and_counted(tmp_path):
    config = write_env(tmp_path, steps=2)
    policy = ScriptedPolicy([call("crash"), call("pid"), "ok"])
    run_dir = train(load_config(config), runs_dir=tmp_path / "runs", config_base_dir=tmp_path, policy=policy)
    assert latest_status(read_events(run_dir))["status"] == "completed"
    metrics = metrics_by_step(run_dir)
    assert [metrics[step]["tools/mcp_restarts"] for step in (1, 2)] == [0.0, 1.0]
    for record in records_of(run_dir):
        crashed, after = (turn["tool_calls"][0] for turn in record["turns"][:2])
        # The episode whose call crashed the server, or the one whose call was in flight then, reads that it
        # stopped answering; a call made after it went down is refused with the same cause.
        assert crashed["error_kind"] == "exception" and 'MCP server "math"' in crashed["error"]
        assert "restarted for the next episode" in after["error"]
        assert "is down" in after["error"]
        assert record["status"] == "finished" and record["reward"] == 1.0


def test_a_hung_server_times_out_into_an_error_observation(tmp_path):
    config = write_env(tmp_path, timeout_s=1)
    policy = ScriptedPolicy([call("hang"), "ok"])
    started = time.perf_counter()
    run_dir = train(
        load_config(config),
        runs_dir=tmp_path / "runs",
        config_base_dir=tmp_path,
        policy=policy,
        rollout_only_episodes=2,
    )
    assert time.perf_counter() - started < 60
    for record in records_of(run_dir):
        hung = record["turns"][0]["tool_calls"][0]
        assert hung["error"] == 'hang timed out after 1 s: MCP server "math" is restarted for the next episode'
        assert "hang timed out" in record["turns"][0]["observation"]
        assert record["turns"][1]["assistant"] == "ok"


def test_env_check_lists_each_servers_tools_and_reports_one_that_cannot_start(tmp_path):
    config = write_env(tmp_path)
    found = check_env(config)
    assert not [d for d in found if d["severity"] == "error"], found
    [listing] = [d["message"] for d in found if d["message"].startswith("MCP server")]
    assert listing == 'MCP server "math": 6 tool(s): math__add, shout, divide, crash, hang, pid'

    broken = write_env(tmp_path, server="{name: gone, command: /nonexistent/mcp-server}")
    [error] = [d for d in check_env(broken) if d["severity"] == "error"]
    assert error["message"].startswith('env.mcp_servers: server "gone" could not start')
    assert error["file"] == str(broken)


def test_a_streamable_http_server_is_reached_by_url(tmp_path):
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        servers = McpServers(
            [McpServerConfig(name="web", url=f"http://127.0.0.1:{port}/mcp", headers={"X-Test": "1"}, timeout_s=10)]
        )
        try:
            tools = {tool.name: tool for tool in servers.tools()}
            assert tools["add"].execute(a=40, b=2) == {"result": 42}
            assert tools["pid"].execute()["result"] == server.pid
        finally:
            servers.close()
    finally:
        server.kill()
        server.wait()


def test_the_server_lists_an_mcp_servers_tools_for_the_editor_and_says_why_one_cannot_start(tmp_path):
    server = ServerProcess(tmp_path / "runs")
    client = server.client()
    try:
        entry = {"name": "math", "command": sys.executable, "args": [str(SERVER)], "timeout_s": 20}
        listed = client.request("mcp/listTools", {"server": entry}, timeout=60)
        assert listed["server"] == "math"
        assert [tool["name"] for tool in listed["tools"]] == ["add", "shout", "divide", "crash", "hang", "pid"]
        assert listed["tools"][0]["parameters"]["required"] == ["a", "b"]

        gone = client.call("mcp/listTools", {"server": {"name": "gone", "command": "/nonexistent/mcp-server"}})
        assert gone["error"]["code"] == p.MCP_SERVER_UNAVAILABLE
        assert gone["error"]["message"].startswith('env.mcp_servers: server "gone" could not start')
        both = client.call("mcp/listTools", {"server": {"name": "x", "command": "a", "url": "http://127.0.0.1:1/mcp"}})
        assert both["error"]["code"] == p.INVALID_PARAMS and "give either command" in both["error"]["message"]
        unnamed = client.call("mcp/listTools", {"server": {"command": "a"}})
        assert unnamed["error"] == {"code": p.INVALID_PARAMS, "message": "server.name: Field required"}
    finally:
        client.close()
        server.stop()


def test_a_recorded_mcp_tool_call_is_re_run_on_a_fresh_start_of_its_server(tmp_path):
    config = write_env(tmp_path)
    run_dir = train(
        load_config(config),
        runs_dir=tmp_path / "runs",
        config_base_dir=tmp_path,
        policy=ScriptedPolicy([call("pid"), "ok"]),
        rollout_only_episodes=1,
    )
    [record] = records_of(run_dir)
    server = ServerProcess(tmp_path / "runs")
    client = server.client()
    try:
        answer = client.request(
            "tool/rerun", {"runId": run_dir.name, "trajectoryId": record["id"], "turn": 0, "call": 0}, timeout=90
        )
    finally:
        client.close()
        server.stop()
    recorded_pid = record["turns"][0]["tool_calls"][0]["result"]["result"]
    assert answer["name"] == "pid" and answer["recorded"]["result"] == {"result": recorded_pid}
    assert answer["rerun"]["error"] is None
    assert isinstance(answer["rerun"]["result"]["result"], int) and answer["rerun"]["result"]["result"] != recorded_pid
    assert answer["timeoutS"] == 25  # the server's timeout_s (20) and the grace the rollout adds


def test_a_command_that_is_not_an_mcp_server_says_what_it_wrote(tmp_path):
    """It used to answer "ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)"."""
    server = ServerProcess(tmp_path / "runs")
    client = server.client()
    try:
        script = "import sys; print('usage: this is not an MCP server', file=sys.stderr); sys.exit(2)"
        failed = client.call(
            "mcp/listTools", {"server": {"name": "fake", "command": sys.executable, "args": ["-c", script]}}, timeout=90
        )
        message = failed["error"]["message"]
        assert failed["error"]["code"] == p.MCP_SERVER_UNAVAILABLE
        assert "usage: this is not an MCP server" in message and "TaskGroup" not in message, message
    finally:
        client.close()
        server.stop()


def test_a_hanging_listing_is_ended_with_what_its_server_started():
    """A listing that never ends is ended at its timeout with its whole process tree (a timed-out MCP server kept
    running), and one that writes without end is cut at its bound."""
    import asyncio

    from agentrl.server.children import run_child

    marker = "agentrl-mcp-hang-4c1d"
    sleeper = f"[sys.executable, '-c', 'import time; time.sleep(300)', '{marker}']"
    hang = f"import subprocess, sys, time; subprocess.Popen({sleeper}); time.sleep(300)"
    entry = {"name": "hang", "command": sys.executable, "args": ["-c", hang]}
    started = time.perf_counter()
    listed = asyncio.run(run_child("agentrl.cli", "env", "mcp-tools", stdin=json.dumps(entry).encode(), timeout_s=8))
    assert listed.timed_out and listed.returncode is None and time.perf_counter() - started < 8 + 12
    time.sleep(0.5)
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker in open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace"):
                alive.append(pid)
        except OSError:
            pass
    assert not alive, "the MCP server's own child outlived the listing"
    schema = asyncio.run(run_child("agentrl.cli", "schema", timeout_s=60, max_stdout=1000))  # it prints ~50 KB
    assert schema.too_large and schema.returncode is None and 1000 < len(schema.stdout) <= 1000 + (1 << 16)

import json

from agentrl.rollout.check import check_env

ENV = """
from failing_tools import FailingToolsEnv  # the tests' folder is on sys.path


class EndsProcessOnCheck(FailingToolsEnv):
    def scripted_turns(self, task):
        return ['<tool_call>{"name": "ends_process", "arguments": {}}</tool_call>',
                '<tool_call>{"name": "counter", "arguments": {}}</tool_call>', "ok"]
"""


def test_env_check_reports_a_tool_that_ends_its_process_and_finishes_the_episode(tmp_path):
    """`agentrl env check` always runs Tools in a worker process: os._exit in one is that Tool's failure, named,
    and the scripted episode goes on (this test's own process would have ended otherwise)."""
    (tmp_path / "env.py").write_text(ENV)
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"q": "go"}) + "\n")
    (tmp_path / "e.agentrl.yaml").write_text(
        "env: {module: env.py, class_name: EndsProcessOnCheck}\ndata: {train: tasks.jsonl}\nrollout: {max_turns: 3}\n"
    )
    diagnostics = check_env(tmp_path)
    [warning] = [d for d in diagnostics if d["message"].startswith("turn ")]
    assert warning["message"].startswith(
        "turn 0: tool call failed: ends_process did not answer: the tool worker process ended (exit code 3)"
    )
    assert warning["file"].endswith("failing_tools.py")  # the failing Tool's definition
    assert diagnostics[-1]["message"].startswith("scripted episode: 3 turn(s), status finished, reward 1")


def test_an_env_module_that_is_not_python_is_named_not_an_empty_assertion(tmp_path):
    """`env.module: /etc/passwd` failed with an empty AssertionError: importlib finds no loader for such a file."""
    (tmp_path / "notes.txt").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"q": "go"}) + "\n")
    (tmp_path / "e.agentrl.yaml").write_text("env: {module: ./notes.txt, class_name: E}\ndata: {train: tasks.jsonl}\n")
    [error] = check_env(tmp_path)
    assert error["severity"] == "error"
    assert (
        error["message"]
        == f"env.module: {tmp_path / 'notes.txt'} is not a Python source file (its name must end in .py)"
    )


def test_an_agent_config_is_checked_for_what_loads_without_a_model(tmp_path):
    """An agent of the user's own plays only against a model: the check loads its function and its reward function
    (the editor's Try checks first, and an agent config was refused as "no ToolEnv"), and names one that is missing."""
    (tmp_path / "agent.py").write_text("def run(task, base_url, api_key):\n    return 'ok'\n")
    (tmp_path / "reward.py").write_text("def score(task, result):\n    return 1.0\n")
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"q": "go"}) + "\n")
    config = tmp_path / "a.agentrl.yaml"
    config.write_text("agent: {module: agent.py, function: run, reward: reward.py:score}\ndata: {train: tasks.jsonl}\n")
    [info] = check_env(tmp_path)
    assert info["severity"] == "info" and info["message"].startswith("agent agent.py:run and its reward function load")
    config.write_text(config.read_text().replace("reward.py:score", "reward.py:grade"))
    [error] = check_env(tmp_path)
    assert error["severity"] == "error" and "defines no function 'grade'" in error["message"]


def test_a_tool_that_starts_a_background_process_does_not_hold_the_servers_env_check(tmp_path):
    """A Tool that started `sleep 60` made env/check take 45.6 s: asyncio's wait() for the child also waited for the
    pipes the sleep kept open. The check's answer comes as its process exits, and the sleep ends with it."""
    import asyncio
    import time

    from agentrl.server.children import run_child
    from conftest import EXAMPLE_CONFIG
    from server_harness import command_lines_with

    marker = "agentrl-check-background-5e1b"
    (tmp_path / "env.py").write_text(
        f"""import subprocess, sys

from agentrl.examples.lookup.env import LookupEnv


class StartsASleep(LookupEnv):
    def scripted_turns(self, task):
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "{marker}"])
        return super().scripted_turns(task)
"""
    )
    (tmp_path / "tasks.jsonl").write_text((EXAMPLE_CONFIG.parent / "tasks.jsonl").read_text())
    (tmp_path / "e.agentrl.yaml").write_text(
        "env: {module: env.py, class_name: StartsASleep}\ndata: {train: tasks.jsonl}\n"
    )
    started = time.perf_counter()
    checked = asyncio.run(run_child("agentrl.cli", "env", "check", str(tmp_path), "--json", timeout_s=120))
    took = time.perf_counter() - started
    assert checked.returncode == 0 and "scripted episode" in checked.stdout.decode()
    assert took < 30, f"the check waited {took:.1f} s for the Tool's background process"
    time.sleep(0.5)
    assert not command_lines_with(marker), "the background process outlived the check"

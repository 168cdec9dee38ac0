"""The docs' code runs: every Python block in docs/ executes as it stands, and the examples do what the text around
them says (the Tool and ToolEnv pass `agentrl env check` and score their scripted episode; `@tool` derives the
schema from the hints and the docstring; the OpenAI-SDK agent plays an episode against an endpoint and its reward
function scores it; the environments of docs/external-environments.md, each with its run config as the page gives
it, pass `agentrl env check` and play the episodes the page describes (the OpenEnv server started by its command));
every YAML block is a valid run-config fragment; every `agentrl` command line in a bash block
is one the command line accepts, and every `make` target they name is one the Makefile has."""

from __future__ import annotations

import json
import re
import shlex
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from agentrl.cli.main import build_parser
from agentrl.contract.config import RunConfig, load_config, resolve_paths
from agentrl.environment.loader import config_env_factory
from agentrl.rollout.check import check_env
from agentrl.rollout.scripted_episode import run_scripted_episode

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def _blocks(language: str) -> list[tuple[str, str]]:
    """(page and line, code) of every fenced block of `language` in docs/ and the README."""
    found = []
    for page in [*sorted(DOCS.rglob("*.md")), REPO / "README.md"]:
        text = page.read_text()
        for match in re.finditer(rf"^```{language}\n(.*?)^```$", text, flags=re.S | re.M):
            found.append((f"{page.name}:{text[: match.start()].count(chr(10)) + 1}", match.group(1)))
    return found


def _python_block(defining: str) -> str:
    [code] = [code for _, code in _blocks("python") if defining in code]
    return code


def _yaml_block(defining: str) -> str:
    [code] = [code for _, code in _blocks("yaml") if defining in code]
    return code


# Packages a docs example needs that agentrl does not depend on: its blocks run where they are installed.
OPTIONAL_PACKAGES = {"from openenv": "openenv.core"}


@pytest.mark.parametrize(("where", "code"), _blocks("python"), ids=[where for where, _ in _blocks("python")])
def test_every_python_block_runs(where, code, tmp_path, monkeypatch):
    for marker, package in OPTIONAL_PACKAGES.items():
        if marker in code:
            pytest.importorskip(package)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, where, "exec"), {"__name__": "docs_block"})


def test_the_tool_and_toolenv_example_passes_env_check_and_scores_its_scripted_episode(tmp_path):
    (tmp_path / "env.py").write_text(_python_block("class LookupEnv(ToolEnv)"))
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"key": "7"}) + "\n")
    (tmp_path / "lookup.agentrl.yaml").write_text(
        "env: {module: env.py, class_name: LookupEnv}\ndata: {train: tasks.jsonl}\n"
    )
    diagnostics = check_env(tmp_path)
    assert [d for d in diagnostics if d["severity"] != "info"] == []
    assert diagnostics[-1]["message"].startswith("scripted episode: 2 turn(s), status finished, reward 1.1 ")


def test_the_tool_decorator_example_is_a_tool_with_the_schema_its_hints_and_docstring_give():
    namespace: dict[str, Any] = {}
    exec(_python_block("@tool"), namespace)
    lookup = namespace["lookup"]
    assert (lookup.name, lookup.description) == ("lookup", "Return the value stored under a key.")
    assert lookup.parameters["properties"]["key"] == {"type": "string", "description": "The key, as the task gives it."}
    assert lookup("3") == "gold"


class _CannedPolicy(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that calls `lookup` once, then answers with what the tool returned."""

    requests: list[dict[str, Any]] = []
    keys: set[str] = set()  # the Authorization headers the requests carried

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append(request)
        self.keys.add(self.headers.get("Authorization", ""))
        last = request["messages"][-1]
        if last["role"] == "tool":
            message = {"role": "assistant", "content": f"The value is {last['content']}."}
        else:
            call = {"name": "lookup", "arguments": json.dumps({"key": "7"})}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c0", "type": "function", "function": call}],
            }
        body = json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "policy",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_the_openai_agent_example_plays_an_episode_against_an_endpoint_and_its_reward_scores_it():
    namespace: dict[str, Any] = {}
    exec(_python_block("def run(task, base_url, api_key)"), namespace)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CannedPolicy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        task = {"question": "What is stored under 7?", "answer": "teal"}
        result = namespace["run"](task, f"http://127.0.0.1:{server.server_port}/v1", "agentrl-key")
    finally:
        server.shutdown()
    assert result == "The value is teal."
    assert [m["role"] for m in _CannedPolicy.requests[-1]["messages"]] == ["user", "assistant", "tool"]
    assert _CannedPolicy.keys == {"Bearer agentrl-key"}  # the example passes the episode's key to its client
    assert namespace["score"](task, result) == 1.0


def _external_env(tmp_path: Path, module: str, defining: str, config: str, tasks: list[dict]) -> Path:
    """An example of docs/external-environments.md in a folder: its Python module, its run config as the page gives
    it, and these task records; returns the config's path."""
    (tmp_path / module).write_text(_python_block(defining))
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(task) + "\n" for task in tasks))
    path = tmp_path / f"{Path(module).stem}.agentrl.yaml"
    path.write_text(config)
    return path


def _played(path: Path, task: dict, turns: list[str]):
    """The scripted episode of these assistant turns in the env the config builds, as training builds it."""
    config = resolve_paths(load_config(path), path.parent)
    make_env = config_env_factory(config)
    try:
        return run_scripted_episode(make_env(), task, turns, config.rollout)
    finally:
        make_env.close()


def test_the_gym_example_passes_env_check_and_reads_text_actions_valid_actions_state_and_score(tmp_path):
    path = _external_env(
        tmp_path, "corridor.py", "class Corridor", _yaml_block("corridor.py:Corridor"), [{"id": "a", "seed": 1}]
    )
    diagnostics = check_env(path)
    assert [d for d in diagnostics if d["severity"] != "info"] == []
    assert diagnostics[-1]["message"].startswith("scripted episode: 1 turn(s), status truncated, reward 0 ")
    episode = _played(path, {"id": "a", "seed": 1}, ["Go east.", "> go east", "go east to the light"])
    assert [turn.valid_actions for turn in episode.turns] == [
        ["go east", "wait"],
        ["go east", "wait", "go west"],
        ["go east", "wait", "go west"],
    ]
    assert [turn.state_key for turn in episode.turns] == ["0", "1", "2"]  # state_key: room
    assert [turn.process_reward for turn in episode.turns] == [0.0, 0.0, 1.0]  # rewards: step
    assert "go west" in episode.turns[0].observation  # the valid actions, shown under the observation
    assert episode.turns[-1].done and episode.status == "finished"
    assert episode.reward_breakdown["won"] == 1.0 and episode.reward_breakdown["env_return"] == 1.0
    assert "west end of a dark corridor" in episode.prompt_messages[-1]["content"]
    assert episode.prompt_messages[0]["role"] == "system"


def test_the_methods_example_offers_its_methods_as_tools_and_its_reward_reads_what_they_did(tmp_path):
    task = {"prompt": "Set the greenhouse to 21 degrees.", "target": 21}
    path = _external_env(tmp_path, "greenhouse.py", "class Greenhouse", _yaml_block("greenhouse.py:Greenhouse"), [task])
    assert [d for d in check_env(path) if d["severity"] != "info"] == []

    def call(degrees: int) -> str:
        return f"<tool_call>{json.dumps({'name': 'set_thermostat', 'arguments': {'degrees': degrees}})}</tool_call>"

    episode = _played(path, task, [call(21), "I set the thermostat to 21 degrees."])
    assert {schema["function"]["name"] for schema in episode.tool_schemas} == {"set_thermostat", "read_thermostat"}
    assert episode.prompt_messages[-1]["content"] == (
        "Set the greenhouse to 21 degrees.\n\nThe thermostat reads 15 degrees."  # reset's text follows the prompt
    )
    assert episode.turns[0].tool_calls[0].result == "The thermostat now holds 21 degrees."
    assert episode.outcome_reward == 1.0 and episode.status == "finished"
    assert _played(path, task, [call(25), "Done."]).outcome_reward == 0.0


def test_the_openenv_example_serves_its_env_and_plays_an_episode_in_one_session(tmp_path):
    pytest.importorskip("openenv.core")
    pytest.importorskip("uvicorn")
    config = yaml.safe_load(_yaml_block("guess_server:app"))
    assert config["env"]["openenv"]["command"][0] == "python"
    config["env"]["openenv"]["command"][0] = sys.executable  # the docs' python: the trainer's own
    path = _external_env(
        tmp_path, "guess_server.py", "class GuessEnvironment", yaml.safe_dump(config), [{"id": "a", "seed": 7}]
    )
    assert [d for d in check_env(path) if d["severity"] != "info"] == []  # the server started, and ended with it
    episode = _played(path, {"id": "a", "seed": 7}, ["5", "8", "7"])
    assert episode.status == "finished", episode.status_reason
    assert [turn.observation for turn in episode.turns] == ["Higher.", "Lower.", "Right!"]
    assert [turn.process_reward for turn in episode.turns] == [0.0, 0.0, 1.0]
    assert episode.reward_breakdown["solved"] == 1.0
    assert "I picked a digit" in episode.prompt_messages[-1]["content"]


@pytest.mark.parametrize(("where", "code"), _blocks("yaml"), ids=[where for where, _ in _blocks("yaml")])
def test_every_yaml_block_is_a_valid_run_config_fragment(where, code):
    fragment = yaml.safe_load(code)
    if "apiVersion" in fragment:  # a Kubernetes manifest, not a run config: docs/ray.md's KubeRay cluster, whose head
        # keeps no CPUs for workers and serves Ray Client, as the page's bare-machine commands do
        assert fragment["kind"] == "RayCluster"
        assert fragment["spec"]["headGroupSpec"]["rayStartParams"] == {
            "num-cpus": "0",
            "ray-client-server-port": "10001",
        }
        return
    config = {"data": {"train": "tasks.jsonl"}, **fragment}
    if "env" not in config and "agent" not in config:
        config["env"] = {"module": "env.py", "class_name": "Env"}
    RunConfig.model_validate(config)


def _agentrl_lines() -> list[tuple[str, str]]:
    return [
        (where, line)
        for where, code in _blocks("bash")
        for line in code.splitlines()
        if line.strip().startswith("agentrl ")
    ]


@pytest.mark.parametrize(
    ("where", "line"), _agentrl_lines(), ids=[line.split("#")[0].strip() for _, line in _agentrl_lines()]
)
def test_every_agentrl_command_line_in_the_docs_is_accepted(where, line):
    """A synopsis's optional parts ([--flag VALUE]) and repeats (...) are read as given once; N stands for a number."""
    words = shlex.split(line.replace("[", " ").replace("]", " ").replace("...", " "), comments=True)
    words = ["1" if word == "N" else word for word in words]
    try:
        build_parser().parse_args(words[1:])
    except SystemExit:
        pytest.fail(f"{where}: `{line.strip()}` is not a command line agentrl accepts")


def test_every_make_target_the_docs_name_is_in_the_makefile():
    targets = set(re.findall(r"^([a-z][a-z-]*):", (REPO / "Makefile").read_text(), flags=re.M))
    named = {
        (where, word)
        for where, code in _blocks("bash")
        for line in code.splitlines()
        for word in shlex.split(line, comments=True)[1:2]
        if line.startswith("make ")
    }
    assert named and all(target in targets for _, target in named), named

"""Every method of rpc.schema.json against run folders damaged on the server's side (issue #44), a seeded exhaustive
fuzz: one real run copied into folders each damaged one way, and every request a client may validly send asked
about each. Every file a reader of a run folder reaches is damaged in every way a file can be (torn, truncated, a
link out of the folder, a FIFO, huge, JSON nested past any parser), every folder is linked out, and a few contents
no parser expects are planted (an alias bomb, garbage log lines, a garbage index). The server's damage is never the
client's fault nor an internal error: no answer is -32603, and none is -32602, since every request sent is valid
(each is checked against its params schema before it is sent); the server stays responsive and logs no traceback.

The methods that answer from a child process loading the model or the env (CHILD_METHODS: seconds each) are asked
about CHILD_SAMPLE damaged folders each, drawn with a seed that changes from one test run to the next
(AGENTRL_FUZZ_SEED repeats one, and a failure names it): CI covers every pair over its runs, each in about 2
minutes of 2 cores. Every other method is asked about every damaged folder, every time."""

import base64
import io
import json
import os
import random
import shutil
import time
import zipfile
from pathlib import Path

import pytest
from agentrl.run.trainer import train
from agentrl.server import protocol as p
from conftest import EXAMPLE_CONFIG
from server_harness import ServerProcess, example_config
from test_train import example

REROLL_ID = "20260101-000000-abcdef"
# What a planted link points at: a file of the test's own outside the runs folder, so that a write through a link
# shows (it must stay as it is) and harms nothing.
SECRET = "root:x:0:0:root:/root:/bin/bash\n"
HUGE_BYTES = 300 * 2**20  # sparse: over every reader's cap, and only a few blocks of the test's disk
NESTING = 100_000  # JSON nested deeper than any parser recurses
# The files of a run folder that its readers reach, by what they hold. A re-roll is not in a fresh run: its file is
# planted, damaged.
FILES = {
    "events": "events.jsonl",
    "run-record": "run.json",
    "config": "config.yaml",
    "code-manifest": "code.json",
    "code-file": "code/env.py",
    "step-file": "trajectories/step-000001.trajectories.jsonl",
    "search-index": "search.sqlite",
    "trajectory-index": "trajectory-index.bin",
    "reroll": f"rerolls/{REROLL_ID}.json",
    "weights": "checkpoints/step-000001/policy/model.safetensors",
    "model-config": "checkpoints/step-000001/policy/config.json",
    "checkpoint-state": "checkpoints/step-000001/state.json",
}
FILE_DAMAGE = ("torn", "truncated", "linked-out", "fifo", "huge", "nested")
FOLDERS = ("code", "trajectories", "rerolls", "exports", "checkpoints", "checkpoints/step-000001/policy")
ALIAS_BOMB = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n" for i in range(12)
)
GARBAGE_EVENTS = '{"seq": "x"}\nnot json\n' + "[" * NESTING + "\n" + '{"seq": 99999, "type": "status"}\n'
# Contents a reader's parser meets inside a file that is otherwise whole.
PLANTED = {
    "alias-bomb:config": ("config.yaml", "w", ALIAS_BOMB),
    "garbage-lines:events": ("events.jsonl", "a", GARBAGE_EVENTS),
    "nested-line:step-file": (FILES["step-file"], "a", '{"id": ' + "[" * NESTING + "\n"),
    "garbage:search-index": ("search.sqlite", "wb", b"SQLite format 3\x00" + os.urandom(8192)),
}
DAMAGE = (
    [f"{how}:{name}" for name in FILES for how in FILE_DAMAGE]
    + [f"linked-out:{folder}/" for folder in FOLDERS]
    + list(PLANTED)
)
# Answered from a child process (a model or an env loaded: seconds each), so sampled; see the module's docstring.
CHILD_METHODS = ("run/export", "episode/reroll", "tool/rerun")
CHILD_SAMPLE = 1
PARSED_CALL = {"name": "lookup", "arguments": {"key": "a"}, "raw": '{"name": "lookup", "arguments": {"key": "a"}}',
               "result": "1", "error": None, "error_kind": None, "latency_ms": 1.0}  # fmt: skip
# Methods that name no run: each asked once, with every damaged run in the runs folder (server/shutdown last).
RUN_FREE_METHODS = (
    "initialize", "server/ping", "run/list", "env/upload", "env/check", "config/memoryPlan", "mcp/listTools",
    "run/start", "server/shutdown",
)  # fmt: skip


def _damage_file(path: Path, how: str, secret: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    whole = path.read_bytes() if path.is_file() else json.dumps({"reroll_id": REROLL_ID}).encode()
    path.unlink(missing_ok=True)
    if how == "torn":
        path.write_bytes(whole[: len(whole) // 2])
    elif how == "truncated":
        path.write_bytes(b"")
    elif how == "linked-out":
        path.symlink_to(secret)
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "huge":
        with path.open("wb") as sparse:
            sparse.truncate(HUGE_BYTES)
    elif how == "nested":
        path.write_text('{"id": ' + "[" * NESTING + "]" * NESTING + "}\n")
    else:
        raise ValueError(how)


def damage(run_dir: Path, damage_kind: str, outside: Path) -> None:
    """`damage_kind` is HOW:FILE (FILES), linked-out:FOLDER/ (a copy of the folder outside the run, linked to), or
    one of PLANTED."""
    how, _, target = damage_kind.partition(":")
    if damage_kind in PLANTED:
        relative, mode, content = PLANTED[damage_kind]
        with (run_dir / relative).open(mode) as file:
            file.write(content)
    elif target.endswith("/"):
        folder = run_dir / target.rstrip("/")
        copy = outside / damage_kind.replace("/", "_").replace(":", "_")
        if folder.is_dir():
            shutil.copytree(folder, copy)
            shutil.rmtree(folder)
        else:
            copy.mkdir()
        folder.symlink_to(copy)
    else:
        _damage_file(run_dir / FILES[target], how, outside / "secret")


def run_requests(run_id: str, trajectory_id: str, code_file: str) -> dict[str, list[dict]]:
    """Valid requests of every method that names a run, the ways a client sends them."""
    reroll = {"turn": 0, "text": "x", "policy": "base", "samples": 1, "temperature": 0}
    return {
        "run/get": [{"runId": run_id}],
        "run/config": [{"runId": run_id}],
        "run/code": [{"runId": run_id}],
        "run/codeFile": [{"runId": run_id, "path": code_file}],
        "trajectory/query": [{"runId": run_id}, {"runId": run_id, "sort": "reward", "limit": 5, "status": "finished"}],
        "trajectory/get": [{"runId": run_id, "ids": [trajectory_id]}, {"runId": run_id, "step": 1}],
        "trajectory/search": [
            {"runIds": [run_id], "text": "key"},
            {"runIds": [run_id], "status": "finished", "sort": "reward", "tool": "lookup"},
        ],
        "reroll/list": [{"runId": run_id}, {"runId": run_id, "trajectoryId": trajectory_id}],
        "reroll/get": [{"runId": run_id, "rerollId": REROLL_ID}],
        "run/subscribe": [{"runId": run_id, "since": 0}],
        "run/unsubscribe": [{"runId": run_id}],
        "run/resume": [{"runId": run_id}],
        "run/stop": [{"runId": run_id, "mode": "graceful"}],
        "run/export": [{"runId": run_id}],
        "episode/reroll": [{"runId": run_id, "trajectoryId": trajectory_id, "edit": "assistant", **reroll}],
        "tool/rerun": [{"runId": run_id, "trajectoryId": trajectory_id, "turn": 0, "call": 0}],
        "run/delete": [{"runId": run_id}],
    }


def run_free_requests(env_folder: Path) -> dict[str, dict]:
    """Valid requests of every method that names no run (env/check's bundleId is env/upload's answer)."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as bundle:
        for file in env_folder.iterdir():
            bundle.write(file, file.name)
    config = example_config()
    return {
        "initialize": {"protocolVersion": p.PROTOCOL_VERSION, "clientInfo": {"name": "fuzz"}},
        "server/ping": {},
        "run/list": {},
        "env/upload": {"name": "lookup", "archive": base64.b64encode(archive.getvalue()).decode()},
        "env/check": {"configDir": str(env_folder)},
        "config/memoryPlan": {"config": config, "configDir": str(env_folder)},
        "mcp/listTools": {"server": {"name": "gone", "command": "/nonexistent/mcp-server"}},
        "run/start": {"config": config, "mode": "try", "episodes": 1},
        "server/shutdown": {},
    }


@pytest.fixture(scope="module")
def damaged_runs(tmp_path_factory):
    """The runs folder: the real run once whole, and once per kind of damage (DAMAGE), each under its own id."""
    root = tmp_path_factory.mktemp("damaged")
    runs_dir, outside = root / "runs", root / "outside"
    outside.mkdir()
    (outside / "secret").write_text(SECRET)
    run_dir = train(example("train.steps=1"), runs_dir=runs_dir, config_base_dir=EXAMPLE_CONFIG.parent)
    step_file = run_dir / FILES["step-file"]
    records = [json.loads(line) for line in step_file.read_text().splitlines()]
    # The untrained tiny model's calls rarely parse: the first episode's first turn is given one that did, so that
    # tool/rerun has arguments to run it with (a call without any is the client's error: rpc.md) and reaches its child.
    records[0]["turns"][0]["tool_calls"] = [{**PARSED_CALL, "id": "call-0-0"}]
    step_file.write_text("".join(json.dumps(record) + "\n" for record in records))
    trajectory_id = records[0]["id"]
    code_file = json.loads((run_dir / "code.json").read_text())["code"]["files"][0]["path"]
    for index, kind in enumerate(DAMAGE):
        copy = runs_dir / f"{run_dir.name}-d{index:03d}"
        shutil.copytree(run_dir, copy, symlinks=True)
        damage(copy, kind, outside)
    return runs_dir, run_dir.name, trajectory_id, code_file, outside


def test_every_method_on_every_damaged_run_folder_gets_a_clear_answer_never_an_internal_or_params_error(damaged_runs):
    runs_dir, whole, trajectory_id, code_file, outside = damaged_runs
    seed = int(os.environ.get("AGENTRL_FUZZ_SEED", time.time_ns() % 2**32))
    damaged = {f"{whole}-d{index:03d}": kind for index, kind in enumerate(DAMAGE)}
    by_run = {whole: "whole", **damaged}
    sample = random.Random(seed)
    children_asked = {method: sample.sample(sorted(damaged), CHILD_SAMPLE) for method in CHILD_METHODS}
    requests = {run_id: run_requests(run_id, trajectory_id, code_file) for run_id in by_run}
    free = run_free_requests(EXAMPLE_CONFIG.parent)
    assert set(requests[whole]) | set(free) == set(p.METHODS), "a method of rpc.schema.json is not fuzzed here"
    server = ServerProcess(runs_dir)
    client = server.client()
    wrong: list[str] = []

    def ask(method: str, params: dict, about: str, timeout: float = 60) -> dict:
        p.check_params(method, params)  # valid: a -32602 would be the server's fault
        try:
            response = client.call(method, params, timeout=timeout)
        except TimeoutError:  # a reader blocked (a FIFO) or a read without bound: the server's to fix
            raise AssertionError(f"AGENTRL_FUZZ_SEED={seed}: {about}: {method} unanswered in {timeout} s") from None
        error = response.get("error")
        if error is not None and error["code"] in (p.INTERNAL_ERROR, p.INVALID_PARAMS):
            wrong.append(f"{about}: {method} {json.dumps(params)[:200]}: {error}")
        return response

    try:
        for method in ("run/list", "server/ping"):  # the runs folder with every damage in it, listed
            ask(method, free[method], "runs folder")
        for run_id, kind in by_run.items():
            for method, variants in requests[run_id].items():
                if method == "run/delete" or (method in CHILD_METHODS and run_id not in children_asked[method]):
                    continue
                for params in variants:
                    ask(method, params, kind, timeout=300 if method in CHILD_METHODS else 60)
        bundle = ask("env/upload", free["env/upload"], "runs folder").get("result", {}).get("bundleId")
        for method in ("env/check", "config/memoryPlan", "mcp/listTools", "initialize"):
            ask(method, free[method], "runs folder", timeout=300)
        started = ask("run/start", free["run/start"], "runs folder").get("result")
        if started is not None:  # it ends here, not after the test
            ask("run/stop", {"runId": started["runId"], "mode": "immediate"}, "runs folder")
        if bundle is not None:
            ask("env/check", {"bundleId": bundle}, "runs folder", timeout=300)
        for run_id, kind in by_run.items():
            ask("run/delete", requests[run_id]["run/delete"][0], kind)
        ask("run/list", {}, "after the deletes")
        assert "time" in client.request("server/ping")
        assert not wrong, f"AGENTRL_FUZZ_SEED={seed}:\n" + "\n".join(wrong)
        assert "result" in ask("server/shutdown", {}, "runs folder")
        server.process.wait(timeout=30)
    finally:
        client.close()
        server.stop()
    log = server.process.stderr.read()
    assert "Traceback" not in log, f"AGENTRL_FUZZ_SEED={seed}:\n{log[-3000:]}"
    assert (outside / "secret").read_text() == SECRET, "written through a link out of a run folder"

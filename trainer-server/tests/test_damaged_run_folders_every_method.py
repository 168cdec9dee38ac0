"""Every read of a run folder against damage on the server's side (issue #44): one real run copied into folders each
damaged one way (torn, truncated, linked out, a FIFO where a file was, huge, nested past any parser, an alias bomb,
a garbage index) and every method that reads a run asked about each, with valid params. The server's damage is
never the client's fault and never an internal error: no answer is -32603, none is -32602 (the request is valid),
and the server stays responsive with no traceback in its log."""

import json
import os
import shutil
from pathlib import Path

import pytest
from agentrl.run.trainer import train
from agentrl.server import protocol as p
from conftest import EXAMPLE_CONFIG
from server_harness import ServerProcess
from test_train import example


def _first_line_cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def _damage(run_dir: Path, how: str) -> None:
    trajectories = sorted((run_dir / "trajectories").glob("*.jsonl"))
    if how == "torn-trajectories":
        _first_line_cut(trajectories[0])
    elif how == "garbage-events":
        with (run_dir / "events.jsonl").open("a") as log:
            log.write('{"seq": "x"}\nnot json\n' + "[" * 100_000 + "\n" + '{"seq": 99999, "type": "status"}\n')
    elif how == "truncated-events":
        _first_line_cut(run_dir / "events.jsonl")
    elif how == "code-linked-out":
        shutil.rmtree(run_dir / "code", ignore_errors=True)
        (run_dir / "code").symlink_to("/etc")
    elif how == "fifo-step-file":
        trajectories[0].unlink()
        os.mkfifo(trajectories[0])
    elif how == "fifo-events":
        (run_dir / "events.jsonl").unlink()
        os.mkfifo(run_dir / "events.jsonl")
    elif how == "huge-run-json":
        (run_dir / "run.json").write_text(json.dumps({"name": "x" * (20 * 2**20)}))
    elif how == "run-json-linked-out":
        (run_dir / "run.json").unlink()
        (run_dir / "run.json").symlink_to("/etc/passwd")
    elif how == "alias-bomb-config":
        bomb = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n"
            for i in range(12)
        )
        (run_dir / "config.yaml").write_text(bomb)
    elif how == "garbage-index":
        (run_dir / "search.sqlite").write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    elif how == "garbage-reroll":
        (run_dir / "rerolls").mkdir(exist_ok=True)
        (run_dir / "rerolls" / "20260101-000000-abcdef.json").write_text("{not json")
    elif how == "nested-trajectory-line":
        with trajectories[0].open("a") as step:
            step.write('{"id": ' + "[" * 50_000 + "\n")
    else:
        raise ValueError(how)


DAMAGE = [
    "torn-trajectories", "garbage-events", "truncated-events", "code-linked-out", "fifo-step-file", "fifo-events",
    "huge-run-json", "run-json-linked-out", "alias-bomb-config", "garbage-index", "garbage-reroll",
    "nested-trajectory-line",
]  # fmt: skip


def _reads(run_id: str, trajectory_id: str, code_file: str) -> list[tuple[str, dict]]:
    """Every method that reads a run folder, with params a client may validly send."""
    return [
        ("run/get", {"runId": run_id}),
        ("run/list", {}),
        ("run/config", {"runId": run_id}),
        ("run/code", {"runId": run_id}),
        ("run/codeFile", {"runId": run_id, "path": code_file}),
        ("trajectory/query", {"runId": run_id}),
        ("trajectory/query", {"runId": run_id, "sort": "reward", "limit": 5}),
        ("trajectory/get", {"runId": run_id, "ids": [trajectory_id]}),
        ("trajectory/get", {"runId": run_id, "step": 1}),
        ("trajectory/search", {"runIds": [run_id], "text": "key"}),
        ("trajectory/search", {"runIds": [run_id], "status": "finished", "sort": "reward"}),
        ("reroll/list", {"runId": run_id}),
        ("reroll/get", {"runId": run_id, "rerollId": "20260101-000000-abcdef"}),
        ("run/subscribe", {"runId": run_id, "since": 0}),
        ("run/unsubscribe", {"runId": run_id}),
        ("run/resume", {"runId": run_id}),
        ("run/stop", {"runId": run_id, "mode": "graceful"}),
    ]


@pytest.fixture(scope="module")
def damaged_runs(tmp_path_factory):
    """The runs folder: the real run once whole (`whole`), and once per kind of damage, each under its own id."""
    runs_dir = tmp_path_factory.mktemp("damaged") / "runs"
    run_dir = train(example("train.steps=1"), runs_dir=runs_dir, config_base_dir=EXAMPLE_CONFIG.parent)
    trajectory_id = json.loads(next((run_dir / "trajectories").glob("*.jsonl")).read_text().splitlines()[0])["id"]
    code_file = json.loads((run_dir / "code.json").read_text())["code"]["files"][0]["path"]
    for how in DAMAGE:
        copy = runs_dir / f"{run_dir.name}-{how}"
        shutil.copytree(run_dir, copy, symlinks=True)
        _damage(copy, how)
    return runs_dir, run_dir.name, trajectory_id, code_file


def test_every_read_of_a_damaged_run_folder_gets_a_clear_answer_never_an_internal_or_params_error(damaged_runs):
    runs_dir, whole, trajectory_id, code_file = damaged_runs
    server = ServerProcess(runs_dir)
    client = server.client()
    wrong: list[tuple[str, str, dict]] = []
    try:
        for run_id in [whole, *(f"{whole}-{how}" for how in DAMAGE)]:
            for method, params in _reads(run_id, trajectory_id, code_file):
                response = client.call(method, params, timeout=60)
                error = response.get("error")
                if error is not None and error["code"] in (p.INTERNAL_ERROR, p.INVALID_PARAMS):
                    wrong.append((run_id.removeprefix(whole), method, error))
        assert not wrong, "\n".join(f"{how or 'whole'}: {method}: {error}" for how, method, error in wrong)
        assert "time" in client.request("server/ping")
        listed = {info["runId"] for info in client.request("run/list")["runs"]}
        assert whole in listed  # the whole run is listed beside the damaged ones
    finally:
        client.close()
        server.stop()
    log = server.process.stderr.read()
    assert "Traceback" not in log, log[-3000:]

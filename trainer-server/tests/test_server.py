"""The trainer server, end to end: a real `agentrl serve` and real WebSocket clients."""

import base64
import io
import json
import shutil
import time
import zipfile

import pytest
from agentrl.contract.training_config import ALGORITHM_NAMES
from agentrl.run.runstore import read_events
from conftest import EXAMPLE_CONFIG
from server_harness import ServerProcess, command_lines_with, example_config, is_final_status, kill_run_process
from test_train import NAN_ENV


@pytest.fixture
def server(tmp_path):
    proc = ServerProcess(tmp_path / "runs")
    yield proc
    proc.stop()


def seqs(events):
    return [e["seq"] for e in events]


def test_listening_line_and_initialize(server):
    assert server.ready["event"] == "listening" and server.ready["url"].startswith("ws://127.0.0.1:")
    client = server.client(initialize=False)
    early = client.call("run/list")
    assert early["error"]["code"] == -32002 and "initialize first" in early["error"]["message"]
    wrong = client.call("initialize", {"protocolVersion": "3.0"})
    assert wrong["error"]["code"] == -32003 and "protocol 3.0" in wrong["error"]["message"]
    result = client.request("initialize", {"protocolVersion": "2.0"})
    assert result["protocolVersion"] == "2.0" and result["devices"]["cpu"]["cores"] >= 1
    assert result["capabilities"]["algorithms"] == list(ALGORITHM_NAMES)
    assert client.request("run/list") == {"runs": []}


def test_disconnect_and_reconnect_with_since_loses_and_doubles_nothing(server):
    client = server.client()
    run_id = client.request("run/start", {"config": example_config(steps=6, checkpoint_every=2)})["runId"]
    client.request("run/subscribe", {"runId": run_id, "since": 0})
    first = client.events_until(run_id, lambda e: e["type"] == "metrics" and e["data"]["step"] == 2)
    client.close()  # the run goes on without any client
    time.sleep(1.0)
    again = server.client()
    again.request("run/subscribe", {"runId": run_id, "since": first[-1]["seq"]})
    rest = again.events_until(run_id, is_final_status)
    combined = seqs(first) + seqs(rest)
    assert combined == list(range(1, len(combined) + 1))  # gap-free, duplicate-free
    assert rest[-1]["data"]["status"] == "completed"
    on_disk = read_events(server.runs_dir / run_id)
    assert [e["seq"] for e in on_disk] == combined
    info = again.request("run/get", {"runId": run_id})
    assert info["status"] == "completed" and info["step"] == 6 and "reward/mean" in info["latestMetrics"]
    frozen = again.request("run/config", {"runId": run_id})["config"]  # what the dashboard compares runs by
    assert (
        frozen["train"]["steps"] == 6 and frozen["algorithm"]["name"] == "grpo" and frozen["rollout"]["group_size"] == 8
    )
    assert again.call("run/config", {"runId": "nope"})["error"]["code"] == -32010

    # queries over the finished run
    page = again.request("trajectory/query", {"runId": run_id, "sort": "-reward", "limit": 5})
    assert page["total"] == 6 * 16 and len(page["items"]) == 5 and page["nextCursor"] == "5"
    rewards = [i["reward"] for i in page["items"]]
    assert rewards == sorted(rewards, reverse=True)
    step3 = again.request("trajectory/query", {"runId": run_id, "step": 3, "limit": 1000})
    assert step3["total"] == 16 and {i["step"] for i in step3["items"]} == {3}
    wanted = [page["items"][0]["id"], page["items"][1]["id"]]
    records = again.request("trajectory/get", {"runId": run_id, "ids": wanted})["records"]
    assert [r["id"] for r in records] == wanted  # several in one request, in the order asked
    record = records[0]
    assert record["id"] == page["items"][0]["id"] and len(record["tokens"]["ids"]) > 0
    whole_step = again.request("trajectory/get", {"runId": run_id, "step": 3})["records"]
    assert sorted(r["id"] for r in whole_step) == sorted(i["id"] for i in step3["items"])
    for params in ({"runId": run_id}, {"runId": run_id, "step": 3, "ids": wanted}):
        assert again.call("trajectory/get", params)["error"]["code"] == -32602
    missing = again.call("trajectory/get", {"runId": run_id, "ids": [wanted[0], "99-0-0"]})
    assert "'99-0-0'" in missing["error"]["message"]
    assert missing["error"]["code"] == -32030


def test_run_export_writes_the_model_into_the_run_folder_and_says_what_is_missing(server):
    from transformers import AutoModelForCausalLM

    client = server.client()
    run_id = client.request("run/start", {"config": example_config(steps=2, checkpoint_every=1)})["runId"]
    client.request("run/subscribe", {"runId": run_id, "since": 0})
    client.events_until(run_id, is_final_status, timeout=300)
    exported = client.request("run/export", {"runId": run_id, "step": 1}, timeout=300)
    assert exported == {
        "runId": run_id,
        "step": 1,
        "weights": "full",
        "path": str(server.runs_dir / run_id / "exports" / "step-000001"),
    }
    AutoModelForCausalLM.from_pretrained(exported["path"])  # transformers loads it as it is
    assert client.request("run/export", {"runId": run_id, "step": 1}, timeout=300) == exported  # again: the same
    latest = client.request("run/export", {"runId": run_id}, timeout=300)
    assert latest["step"] == 2
    for params, code, message in (
        ({"runId": run_id, "step": 7}, -32011, "no checkpoint at step 7"),
        ({"runId": run_id, "mergeLora": True}, -32011, "no LoRA adapter to merge"),
        ({"runId": ".."}, -32602, "runId"),  # not a run id ($defs/runId), so never a folder above the runs folder
        ({"runId": run_id, "out": "/tmp/x"}, -32602, "out"),
    ):
        error = client.call("run/export", params, timeout=300)["error"]
        assert error["code"] == code and message in error["message"], error
    assert sorted(p.name for p in (server.runs_dir / run_id / "exports").iterdir()) == ["step-000001", "step-000002"]


def test_several_clients_watch_one_run(server):
    a, b = server.client(), server.client()
    run_id = a.request("run/start", {"config": example_config(steps=2)})["runId"]
    for client in (a, b):
        client.request("run/subscribe", {"runId": run_id, "since": 0})
    events_a = a.events_until(run_id, is_final_status)
    events_b = b.events_until(run_id, is_final_status)
    assert seqs(events_a) == seqs(events_b) == list(range(1, len(events_a) + 1))


def test_graceful_and_immediate_stop_then_resume(server):
    client = server.client()
    graceful = client.request("run/start", {"config": example_config(steps=400, checkpoint_every=1000)})["runId"]
    client.request("run/subscribe", {"runId": graceful, "since": 0})
    client.events_until(graceful, lambda e: e["type"] == "metrics")
    assert client.request("run/stop", {"runId": graceful, "mode": "graceful"})["status"] == "stopping"
    events = client.events_until(graceful, is_final_status)
    stopped = events[-1]["data"]
    assert stopped["status"] == "stopped" and stopped["step"] >= 1
    # the log says stopping from the moment it is asked, not "running" until the step ends
    assert [e["data"]["status"] for e in events if e["type"] == "status"][-2:] == ["stopping", "stopped"]
    assert any(e["type"] == "checkpoint" and e["data"]["step"] == stopped["step"] for e in events)

    immediate = client.request("run/start", {"config": example_config(steps=400, checkpoint_every=2)})["runId"]
    client.request("run/subscribe", {"runId": immediate, "since": 0})
    client.events_until(immediate, lambda e: e["type"] == "checkpoint")
    assert client.request("run/stop", {"runId": immediate, "mode": "immediate"})["status"] == "stopped"
    final = client.events_until(immediate, is_final_status)[-1]
    assert final["data"]["status"] == "stopped" and "immediately" in final["data"]["message"]

    conflict = client.call("run/stop", {"runId": immediate, "mode": "graceful"})
    assert conflict["error"]["code"] == -32011
    client.request("run/resume", {"runId": graceful})
    assert client.call("run/resume", {"runId": graceful})["error"]["code"] == -32011  # already running
    resumed = client.events_until(graceful, lambda e: e["type"] == "metrics" and e["seq"] > events[-1]["seq"])
    # where it resumes from, said at once (not "step 0" until the first step after the resume ends)
    first_statuses = [e["runInfo"] for e in resumed if e["type"] == "status"][:2]
    assert [(info["status"], info["step"]) for info in first_statuses] == [
        ("queued", stopped["step"]),
        ("running", stopped["step"]),
    ]
    assert f"from the checkpoint at step {stopped['step']}" in first_statuses[0]["message"]
    assert any(e["type"] == "status" and "superseded" in e["data"].get("message", "") for e in resumed)
    assert resumed[-1]["data"]["step"] == stopped["step"] + 1  # continues where it stopped
    client.request("run/stop", {"runId": graceful, "mode": "graceful"})
    assert client.events_until(graceful, is_final_status)[-1]["data"]["status"] == "stopped"


def test_a_run_says_its_phase_and_an_ended_run_can_be_deleted(server):
    client = server.client()
    run_id = client.request("run/start", {"config": example_config(steps=400, checkpoint_every=1000)})["runId"]
    client.request("run/subscribe", {"runId": run_id, "since": 0})
    client.events_until(run_id, lambda e: e["type"] == "phase" and e["data"]["phase"] == "updating")
    info = client.request("run/get", {"runId": run_id})
    assert info["status"] == "running" and info["phase"]["phase"] in ("rollouts", "updating", "checkpointing")
    refused = client.call("run/delete", {"runId": run_id})["error"]
    assert refused["code"] == -32011 and "stop it before deleting it" in refused["message"]
    client.request("run/stop", {"runId": run_id, "mode": "immediate"})
    client.events_until(run_id, is_final_status)
    assert "phase" not in client.request("run/get", {"runId": run_id})  # an ended run has none
    assert (server.runs_dir / ".logs" / f"{run_id}.stderr.log").exists()

    assert client.request("run/delete", {"runId": run_id}) == {"runId": run_id}
    assert not (server.runs_dir / run_id).exists() and not (server.runs_dir / ".logs" / f"{run_id}.stderr.log").exists()
    assert [entry.name for entry in server.runs_dir.iterdir() if entry.name.startswith(".deleting")] == []
    assert client.request("run/list") == {"runs": []}
    assert client.call("run/get", {"runId": run_id})["error"]["code"] == -32010
    assert client.call("run/delete", {"runId": run_id})["error"]["code"] == -32010  # deleted already
    assert client.call("run/delete", {"runId": "../runs"})["error"]["code"] == -32602  # not a run id


def test_server_kill9_restart_marks_interrupted_and_resume_keeps_history(tmp_path):
    runs = tmp_path / "runs"
    first = ServerProcess(runs)
    try:
        client = first.client()
        run_id = client.request("run/start", {"config": example_config(steps=8, checkpoint_every=2)})["runId"]
        client.request("run/subscribe", {"runId": run_id, "since": 0})
        client.events_until(run_id, lambda e: e["type"] == "checkpoint" and e["data"]["step"] == 2)
        first.kill()
        kill_run_process(runs / run_id)  # the machine went down: the run dies too
    finally:
        first.stop()
    before = read_events(runs / run_id)
    checkpoint_seq = max(e["seq"] for e in before if e["type"] == "checkpoint")
    second = ServerProcess(runs)
    try:
        client = second.client()
        info = client.request("run/get", {"runId": run_id})
        assert info["status"] == "interrupted" and info["hasCheckpoint"]
        assert [r["runId"] for r in client.request("run/list")["runs"]] == [run_id]
        client.request("run/resume", {"runId": run_id})
        client.request("run/subscribe", {"runId": run_id, "since": 0})
        events = client.events_until(run_id, lambda e: is_final_status(e) and e["data"]["status"] == "completed")
        after = read_events(runs / run_id)
        kept = [e for e in before if e["seq"] <= checkpoint_seq]
        assert after[: len(kept)] == kept  # nothing before the last checkpoint is lost or rewritten
        metric_steps = {e["data"]["step"] for e in after if e["type"] == "metrics"}
        assert metric_steps == set(range(1, 9))
        assert seqs(events) == list(range(1, len(events) + 1))
    finally:
        second.stop()


def test_env_upload_check_and_start_from_bundle(server):
    client = server.client()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in ("env.py", "tasks.jsonl", "lookup.agentrl.yaml"):
            archive.write(EXAMPLE_CONFIG.parent / name, name)
    archive_b64 = base64.b64encode(buffer.getvalue()).decode()
    uploaded = client.request("env/upload", {"name": "lookup", "archive": archive_b64})
    assert uploaded["files"] == 3 and uploaded["bundleId"] == uploaded["sha256"]
    assert client.request("env/upload", {"name": "lookup", "archive": archive_b64})["sha256"] == uploaded["sha256"]
    checked = client.request("env/check", {"bundleId": uploaded["bundleId"]}, timeout=120)
    assert checked["ok"] and "status finished" in checked["diagnostics"][-1]["message"]
    config = example_config()
    config["env"]["module"], config["data"]["train"] = "env.py", "tasks.jsonl"  # relative to the bundle
    run_id = client.request(
        "run/start", {"config": config, "envBundle": uploaded["bundleId"], "mode": "try", "episodes": 3}
    )["runId"]
    client.request("run/subscribe", {"runId": run_id, "since": 0})
    events = client.events_until(run_id, is_final_status)
    assert events[-1]["data"]["status"] == "completed"
    assert sum(e["type"] == "trajectory" for e in events) == 3
    assert client.call("env/check", {"bundleId": "0" * 64})["error"]["code"] == -32021


def test_env_check_names_how_an_env_that_ends_the_process_died(server):
    """os._exit in the env's code kills the check's process before it reports; the server says how it ended."""
    client = server.client()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("env.py", "import os\nos._exit(3)\n")
        archive.write(EXAMPLE_CONFIG.parent / "tasks.jsonl", "tasks.jsonl")
        archive.write(EXAMPLE_CONFIG.parent / "lookup.agentrl.yaml", "lookup.agentrl.yaml")
    uploaded = client.request("env/upload", {"name": "exits", "archive": base64.b64encode(buffer.getvalue()).decode()})
    checked = client.request("env/check", {"bundleId": uploaded["bundleId"]}, timeout=120)
    assert not checked["ok"]
    assert checked["diagnostics"][-1]["message"].startswith("env check exited with code 3 before reporting")


def test_trajectory_search_over_two_runs_merges_them_in_the_sort_order(server):
    client = server.client()
    run_ids = []
    for _ in range(2):
        run_id = client.request("run/start", {"config": example_config(), "mode": "try", "episodes": 3})["runId"]
        client.request("run/subscribe", {"runId": run_id, "since": 0})
        assert client.events_until(run_id, is_final_status)[-1]["data"]["status"] == "completed"
        run_ids.append(run_id)
    found = client.request("trajectory/search", {"runIds": run_ids, "sort": "-reward"})
    assert found["total"] == 6 and found["nextCursor"] is None
    assert {item["runId"] for item in found["items"]} == set(run_ids)
    rewards = [item["summary"]["reward"] for item in found["items"]]
    assert rewards == sorted(rewards, reverse=True)
    first = client.request("trajectory/search", {"runIds": run_ids, "sort": "-reward", "limit": 4})
    rest = client.request("trajectory/search", {"runIds": run_ids, "sort": "-reward", "cursor": first["nextCursor"]})
    assert first["items"] + rest["items"] == found["items"]
    one = client.request("trajectory/search", {"runIds": run_ids[:1], "text": "zebra", "textIn": "observation"})
    assert one == {"items": [], "total": 0, "nextCursor": None}
    assert client.call("trajectory/search", {"runIds": run_ids, "text": '""'})["error"]["code"] == -32602
    assert client.call("trajectory/search", {"runIds": [*run_ids, "no-such-run"]})["error"]["code"] == -32010


def test_env_check_of_a_folder_on_the_server_names_a_raising_tool_by_its_file_in_that_folder(server, tmp_path):
    """The editor checks its env folder before a Try: a Tool that raises on the scripted call is a warning at the
    Tool's class, its file named relative to the folder checked (the client maps it onto its own copy)."""
    folder = tmp_path / "env"
    shutil.copytree(EXAMPLE_CONFIG.parent, folder)
    source = (folder / "env.py").read_text()
    (folder / "env.py").write_text(source.replace("if key not in TABLE:", "if True:"))
    (folder / "second.agentrl.yaml").write_text("name: broken\n")  # two configs: the request names which
    client = server.client()
    checked = client.request("env/check", {"configDir": str(folder), "configFile": "lookup.agentrl.yaml"}, timeout=120)
    failed = [d for d in checked["diagnostics"] if "tool call failed" in d["message"]]
    assert failed and failed[0]["severity"] == "warning" and "no value under key" in failed[0]["message"]
    assert (failed[0]["file"], failed[0]["line"]) == ("env.py", source[: source.index("class Lookup")].count("\n") + 1)
    assert all(not d.get("file", "").startswith("/") for d in checked["diagnostics"])
    unnamed = client.call("env/check", {"configDir": str(folder)}, timeout=120)["result"]
    assert not unnamed["ok"] and "expected exactly one" in unnamed["diagnostics"][0]["message"]
    for params in ({}, {"configDir": "relative"}, {"configDir": str(folder), "configFile": "../x.agentrl.yaml"}):
        assert client.call("env/check", params)["error"]["code"] == -32602, params


def test_config_dir_resolves_relative_paths_for_a_client_on_the_same_machine(server, tmp_path):
    client = server.client()
    config = example_config()
    config["env"]["module"], config["data"]["train"] = "env.py", "tasks.jsonl"  # relative to the config's folder
    run_id = client.request(
        "run/start", {"config": config, "configDir": str(EXAMPLE_CONFIG.parent), "mode": "try", "episodes": 2}
    )["runId"]
    queued = client.request("run/get", {"runId": run_id})  # before the run's process has written run.json
    assert (queued["name"], queued["mode"], queued["createdAt"] != "") == (config["name"], "try", True)
    client.request("run/subscribe", {"runId": run_id, "since": 0})
    assert client.events_until(run_id, is_final_status)[-1]["data"]["status"] == "completed"
    assert client.request("run/get", {"runId": run_id})["name"] == config["name"]
    for bad in (
        {"configDir": "relative/dir"},
        {"configDir": str(tmp_path / "missing")},
        {"configDir": str(EXAMPLE_CONFIG.parent), "envBundle": "0" * 64},
    ):
        response = client.call("run/start", {"config": config, **bad})
        assert response["error"]["code"] == -32602 and "configDir" in response["error"]["message"]


def test_bad_configs_are_rejected_with_the_key(server):
    client = server.client()
    bad = example_config()
    bad["train"]["lr"] = "fast"
    response = client.call("run/start", {"config": bad})
    assert response["error"]["code"] == -32012 and "train.lr" in response["error"]["message"]
    assert client.call("run/get", {"runId": "nope"})["error"]["code"] == -32010
    assert client.call("run/get", {"runId": "../etc"})["error"]["code"] == -32602


def nan_at_step_2_config(folder, checkpoint_every):
    """A run whose env scores NaN from step 2 on: it fails there (train.non_finite_rewards: fail)."""
    (folder / "env.py").write_text(NAN_ENV)
    (folder / "tasks.jsonl").write_text("".join(json.dumps({"key": str(k)}) + "\n" for k in range(4)))
    config = example_config(steps=3, checkpoint_every=checkpoint_every, batch_size=4, micro_batch_size=4)
    config["env"].update(module=str(folder / "env.py"), class_name="NonFiniteFromStep2")
    config["data"]["train"] = str(folder / "tasks.jsonl")
    config["rollout"]["group_size"] = 2
    return config


@pytest.mark.parametrize("checkpoint_every", [1, 100])
def test_resume_right_after_the_failed_event_races_the_exiting_process(server, tmp_path, checkpoint_every):
    """The failed event is written moments before the run's process exits: a resume sent the instant it arrives
    resumes the run (or says it has no checkpoint), never "is failed; only ... a failed run can be resumed"."""
    client = server.client()
    run_id = client.request("run/start", {"config": nan_at_step_2_config(tmp_path, checkpoint_every)})["runId"]
    client.request("run/subscribe", {"runId": run_id, "since": 0})
    failed = client.events_until(run_id, is_final_status, timeout=300)[-1]
    assert failed["data"]["status"] == "failed" and "nan" in failed["data"]["message"]
    response = client.call("run/resume", {"runId": run_id}, timeout=60)
    if checkpoint_every == 100:
        assert response["error"] == {"code": -32011, "message": f"run {run_id} has no checkpoint to resume from"}
        return
    assert response["result"] == {"runId": run_id, "status": "running"}
    resumed = client.events_until(run_id, lambda e: e["seq"] > failed["seq"] and is_final_status(e), timeout=300)
    assert resumed[0]["data"] == {
        "status": "queued",
        "step": 1,
        "total_steps": 3,
        "message": "resume requested: from the checkpoint at step 1",
    }
    assert any(e["type"] == "metrics" and e["data"]["step"] == 2 for e in resumed)  # it trained on from step 1


FLOODS_STDERR_ENV = """
import sys
from agentrl.examples.lookup.env import LookupEnv

class FloodsStderr(LookupEnv):
    def __init__(self, **args):
        line = "x" * 1023 + "\\n"
        for _ in range(20 * 1024):  # 20 MiB
            sys.stderr.write(line)
        sys.stderr.flush()
        raise RuntimeError("the env broke after a flood of output")
"""


def test_a_run_that_floods_stderr_keeps_only_the_tail_of_its_log(server, tmp_path):
    from agentrl.run.stderr_log import STDERR_LOG_KEEP_BYTES, STDERR_LOG_MAX_BYTES
    from agentrl.server.run_process import stderr_log_path

    (tmp_path / "env.py").write_text(FLOODS_STDERR_ENV)
    config = example_config(steps=1)
    config["env"].update(module=str(tmp_path / "env.py"), class_name="FloodsStderr")
    client = server.client()
    run_id = client.request("run/start", {"config": config})["runId"]
    client.request("run/subscribe", {"runId": run_id, "since": 0})
    assert client.events_until(run_id, is_final_status, timeout=300)[-1]["data"]["status"] == "failed"
    log_path = stderr_log_path(server.runs_dir, run_id)
    deadline = time.time() + 60
    while log_path.stat().st_size > STDERR_LOG_MAX_BYTES:  # cut once the server has seen the process exit
        assert time.time() < deadline, f"the run's stderr log was left at {log_path.stat().st_size} bytes"
        time.sleep(0.2)
    text = log_path.read_text()
    assert text.startswith("[agentrl: earlier output was cut at ")
    # A cut keeps STDERR_LOG_KEEP_BYTES; what the run writes after its last cut stays until the log passes
    # STDERR_LOG_MAX_BYTES again (4.29 MB were seen on a loaded machine: 98 KB written after the last cut).
    assert STDERR_LOG_KEEP_BYTES - 2000 <= len(text) <= STDERR_LOG_MAX_BYTES  # less a cut line of the 1 KiB lines
    assert "RuntimeError: the env broke after a flood of output" in text  # the end, where the error is, is kept


def test_cap_log_keeps_the_tail_and_the_writer_appends_after_it(tmp_path):
    """The run's process holds its log open for appending while the server cuts it."""
    from agentrl.run.stderr_log import cap_log

    path = tmp_path / "run.stderr.log"
    with path.open("ab") as writer:
        for index in range(1000):
            writer.write(f"line {index:04d}\n".encode())
            writer.flush()
        assert not cap_log(path, max_bytes=20_000, keep_bytes=100)  # under the cap: untouched
        assert cap_log(path, max_bytes=5_000, keep_bytes=100)
        writer.write(b"written after the cut\n")
    lines = path.read_text().splitlines()
    assert lines[0].startswith("[agentrl: earlier output was cut at ") and "keeps the last 100 bytes" in lines[0]
    assert lines[1:] == [f"line {index:04d}" for index in range(991, 1000)] + ["written after the cut"]


def test_a_run_cuts_its_own_stderr_log_when_no_server_watches(tmp_path):
    """The cap was kept only while a server watched (a log reached 1.9 GB in 3 s): the run's process cuts its own
    log too, whenever its stderr is a file it appends to."""
    import subprocess
    import sys

    flood = (
        "import sys, time\n"
        "from agentrl.run.stderr_log import cap_own_stderr\n"
        "assert cap_own_stderr(every_s=0.2, max_bytes=200_000, keep_bytes=20_000) is not None\n"
        "for n in range(200):\n"
        "    sys.stderr.write(('x' * 99 + '\\n') * 100)\n"  # 10 KB a write, 2 MB in all
        "    time.sleep(0.01)\n"
        "time.sleep(0.5)\n"
        "sys.stderr.write('the end\\n')\n"
    )
    log_path = tmp_path / "run.stderr.log"
    with log_path.open("ab") as stderr:
        subprocess.run([sys.executable, "-c", flood], stderr=stderr, check=True, timeout=60)
    text = log_path.read_text()
    assert len(text) < 200_000 + 0.2 / 0.01 * 10_000 * 2  # the cap, and what a cut's interval can add at most
    assert text.startswith("[agentrl: earlier output was cut at ") and text.endswith("the end\n")


def test_runs_past_the_limit_wait_queued_and_start_in_order_as_runs_end(tmp_path):
    """Twenty run/start calls started twenty processes at once (11 GB, a load of 36 on 2 cores). Past
    --max-runs a run waits, queued, saying why and where it stands; it starts when a running run ends, in the order
    asked; one stopped while queued is listed as stopped, with nothing run, and a resume of a queued run says it
    waits."""
    capped = ServerProcess(tmp_path / "runs", "--max-runs", "1")
    try:
        client = capped.client()
        first, second, third = (
            client.request("run/start", {"config": example_config(steps=2)})["runId"] for _ in range(3)
        )
        waiting = client.request("run/get", {"runId": third})
        assert waiting["status"] == "queued" and waiting["message"] == (
            "queued: 1 runs are running, this server's limit (agentrl serve --max-runs 1); 2 of 2 in the queue"
        )
        refused = client.call("run/resume", {"runId": third})["error"]
        assert refused["code"] == -32011 and refused["message"].endswith(
            "it waits for a slot and starts once a running run ends"
        )
        assert client.request("run/stop", {"runId": third, "mode": "immediate"})["status"] == "stopped"
        listed = {info["runId"]: info for info in client.request("run/list")["runs"]}[third]
        assert (listed["status"], listed["message"], listed["mode"]) == (
            "stopped",
            "stopped while queued; nothing ran",
            "train",
        )
        assert not (capped.runs_dir / ".incoming" / f"{third}.agentrl.yaml").exists()
        client.request("run/subscribe", {"runId": second, "since": 0})
        ended = client.events_until(second, is_final_status, timeout=300)
        assert ended[-1]["data"]["status"] == "completed"
        runs = {info["runId"]: info for info in client.request("run/list")["runs"]}
        assert runs[first]["status"] == runs[second]["status"] == "completed"
        finished_first = max(e["time"] for e in read_events(capped.runs_dir / first))
        started_second = min(e["time"] for e in read_events(capped.runs_dir / second))
        assert started_second >= finished_first  # one process at a time
        client.close()
    finally:
        capped.stop()


def test_an_idle_subscription_to_an_ended_run_wakes_when_the_run_is_resumed(server):
    """A subscription to a run no process runs no longer reads its log ten times a second (600 of them took 35% of
    a core): it waits, and a resume wakes it at once."""
    from agentrl.run.runstore import RunStore
    from agentrl.server.event_stream import IDLE_POLL_SECONDS

    client = server.client()
    run_id = client.request("run/start", {"config": example_config(steps=1, checkpoint_every=1)})["runId"]
    client.request("run/subscribe", {"runId": run_id, "since": 0})
    client.events_until(run_id, lambda e: is_final_status(e) and e["data"]["status"] == "completed")
    time.sleep(1.0)  # the process is gone: the subscription is idle now
    run_dir = server.runs_dir / run_id
    RunStore(run_dir).append_event("status", {"status": "stopped", "step": 1, "total_steps": 1}, durable=True)
    stopped_seq = read_events(run_dir)[-1]["seq"]
    client.request("run/subscribe", {"runId": run_id, "since": stopped_seq})
    time.sleep(1.0)
    resumed = time.monotonic()
    assert client.request("run/resume", {"runId": run_id})["status"] == "running"
    [queued] = client.events_until(run_id, lambda e: e["seq"] > stopped_seq, timeout=60)
    assert queued["data"]["status"] == "queued" and time.monotonic() - resumed < IDLE_POLL_SECONDS / 2
    client.events_until(run_id, is_final_status, timeout=120)
    client.close()


def test_sigterm_ends_the_children_answering_calls_and_a_half_export_is_cleaned(tmp_path):
    """SIGTERM during a call left its child running (and an export's exports/.tmp-* folder behind): the server now
    shuts down as server/shutdown does, ending the children that answer calls with what they started; a half export
    left by a server killed outright is removed when the next one starts."""
    import signal
    import threading

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("env.py", "import time\ntime.sleep(120)\n")
        for name in ("tasks.jsonl", "lookup.agentrl.yaml"):
            archive.write(EXAMPLE_CONFIG.parent / name, name)
    runs = tmp_path / "runs"
    half = runs / "old-20261126-000000-abcdef" / "exports" / ".tmp-1234"
    half.mkdir(parents=True)
    (half.parent.parent / "run.json").write_text('{"run_id": "old-20261126-000000-abcdef", "mode": "train"}')
    server = ServerProcess(runs)
    assert not half.exists()
    client = server.client()
    uploaded = client.request("env/upload", {"name": "slow", "archive": base64.b64encode(buffer.getvalue()).decode()})
    checking = threading.Thread(target=lambda: client.call("env/check", {"bundleId": uploaded["bundleId"]}, timeout=5))
    checking.start()
    time.sleep(3.0)  # the check's child is importing the env, which sleeps
    assert command_lines_with(uploaded["bundleId"])  # `agentrl env check BUNDLE_FOLDER`
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(timeout=30) == 0
    checking.join(timeout=10)
    time.sleep(0.5)
    assert not command_lines_with(uploaded["bundleId"]), "the check's child outlived the server"

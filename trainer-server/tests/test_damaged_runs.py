"""Nothing on disk, however damaged, takes the server down or hides a run (issue #32, item 8): a damaged log line is
skipped and named, the events around it still stream, a damaged run.json still lists its run, and a resume passes
over a damaged checkpoint to the newest whole one."""

import asyncio
import json
import os
import shutil

import pytest
import torch
from agentrl.contract.config import load_config
from agentrl.contract.files_inside import RefusedFile, is_plain_file
from agentrl.run.runstore import (
    EVENTS_FILE,
    PID_FILE,
    RUN_FILE,
    last_seq,
    read_events,
    reverse_events,
    trajectory_file_name,
)
from agentrl.run.trainer import train
from agentrl.server import protocol as p
from agentrl.server.app import ServerOptions, TrainerServer
from agentrl.server.event_stream import read_new_events
from agentrl.server.handlers_trajectories import query_page, trajectory_records
from agentrl.server.protocol import INTERNAL_ERROR, RpcError, validator_for
from agentrl.server.runs import RunManager
from conftest import EXAMPLE_CONFIG
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_harness import ServerProcess

# Lines a damaged log may hold, each complete (a torn last line without its newline is another case, long handled).
DAMAGED_LINES = [
    b"\x00\xff garbage",
    b"[1, 2, 3]",
    b'{"seq": "7", "time": 0, "type": "log", "data": {}}',
    b'{"seq": 7, "time": 0, "type": "no-such-type", "data": {}}',
    b'{"seq": 7, "time": 0, "type": "status", "data": {"status": 5}}',
    b'{"seq": 7, "time": 0, "type": "metrics", "data": []}',
    b'{"seq": 7, "time": 0, "type": "trajectory", "data": {"id": 3}}',
]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """A finished two-step run of the tiny example, a checkpoint after each step: copied, then damaged."""
    config = load_config(EXAMPLE_CONFIG, ["train.steps=2", "train.checkpoint_every=1"])
    runs = tmp_path_factory.mktemp("template") / "runs"
    return train(config, runs_dir=runs, config_base_dir=EXAMPLE_CONFIG.parent)


def copy_run(trained_run, runs, name, checkpoints=True):
    target = runs / f"{name}-20261126-000000-abcdef"
    shutil.copytree(trained_run, target, ignore=None if checkpoints else shutil.ignore_patterns("checkpoints"))
    return target


def insert_lines(run_dir, where, lines):
    log_lines = (run_dir / EVENTS_FILE).read_bytes().splitlines(keepends=True)
    log_lines[where:where] = [line + b"\n" for line in lines]
    (run_dir / EVENTS_FILE).write_bytes(b"".join(log_lines))


def test_a_damaged_log_line_is_skipped_named_and_the_rest_reads(trained_run, tmp_path):
    run_dir = copy_run(trained_run, tmp_path, "damaged")
    valid = read_events(run_dir)
    insert_lines(run_dir, 3, DAMAGED_LINES)
    insert_lines(run_dir, len(valid) + len(DAMAGED_LINES), [b"{not json"])  # the log now ends with a damaged line
    damage: list[str] = []
    assert read_events(run_dir, damage=damage) == valid
    assert len(damage) == len(DAMAGED_LINES) + 1
    assert damage[0] == f"{EVENTS_FILE} line 4: not a JSON line"
    assert "unknown event type 'no-such-type'" in damage[3] and "status event's data breaks" in damage[4]
    assert damage[-1].startswith(f"{EVENTS_FILE} line {len(valid) + 8}: ")
    backwards: list[str] = []
    assert list(reverse_events(run_dir, backwards)) == valid[::-1]
    assert len(backwards) == 8 and all(" at byte " in entry for entry in backwards)
    assert last_seq(run_dir) == valid[-1]["seq"]
    frames, _, latest = read_new_events(run_dir / EVENTS_FILE, 0, run_dir.name)
    assert [seq for seq, _ in frames] == [e["seq"] for e in valid] and latest == valid[-1]["seq"]


def test_the_server_starts_lists_and_streams_runs_however_damaged(trained_run, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    valid = read_events(trained_run)
    ends_damaged = copy_run(trained_run, runs, "ends-damaged")
    insert_lines(ends_damaged, len(valid), [b'{"seq": 99, "type": "status", "data": {"status": "runn'])
    middle = copy_run(trained_run, runs, "middle-damaged")
    insert_lines(middle, len(valid) // 2, DAMAGED_LINES)
    (copy_run(trained_run, runs, "record-a-list") / RUN_FILE).write_text("[1, 2]")
    (copy_run(trained_run, runs, "record-garbage") / RUN_FILE).write_bytes(b"\xff\xfe{")
    (copy_run(trained_run, runs, "no-log") / EVENTS_FILE).unlink()
    whole = copy_run(trained_run, runs, "whole")

    server = ServerProcess(runs)  # it used to exit at start with a traceback on the first of these
    try:
        client = server.client()
        listed = {info["runId"].split("-2026")[0]: info for info in client.request("run/list")["runs"]}
        assert set(listed) == {"ends-damaged", "middle-damaged", "record-a-list", "record-garbage", "no-log", "whole"}
        assert "damage" not in listed["whole"] and listed["whole"]["status"] == "completed"
        assert listed["ends-damaged"]["damage"][0].endswith("not a JSON line")
        assert listed["ends-damaged"]["status"] == "completed" and listed["ends-damaged"]["lastSeq"] == valid[-1]["seq"]
        assert listed["record-a-list"]["damage"] == [f"{RUN_FILE}: a JSON list, not an object"]
        assert listed["record-garbage"]["damage"] == [f"{RUN_FILE}: unreadable (UnicodeDecodeError)"]
        assert listed["record-a-list"]["name"] == listed["record-a-list"]["runId"]
        # A run without its log: the server's start said how it ended, as for a run whose process died unseen.
        assert (listed["no-log"]["status"], listed["no-log"]["lastSeq"]) == ("interrupted", 1)

        client.request("run/subscribe", {"runId": middle.name})  # 0 events streamed, and no error, before
        streamed = client.events_until(middle.name, lambda e: e["seq"] == valid[-1]["seq"], timeout=30)
        assert [e["seq"] for e in streamed] == [e["seq"] for e in valid]
        assert client.request("run/get", {"runId": whole.name})["runId"] == whole.name
        client.close()
    finally:
        server.stop()


def test_a_resume_passes_over_a_damaged_checkpoint_and_says_so(trained_run, tmp_path):
    run_dir = copy_run(trained_run, tmp_path, "resumed")
    newest = run_dir / "checkpoints" / "step-000002"
    (newest / "learner.pt").write_bytes(b"cut short")
    train(None, runs_dir=tmp_path, resume_dir=run_dir)
    statuses = [e["data"] for e in read_events(run_dir) if e["type"] == "status"]
    resumed = next(s for s in statuses if "resumed" in (s.get("message") or ""))
    assert resumed["step"] == 1 and "skipped as damaged: checkpoints/step-000002" in resumed["message"]
    assert statuses[-1]["status"] == "completed" and statuses[-1]["step"] == 2  # step 2 trained again
    warnings = [e["data"]["message"] for e in read_events(run_dir) if e["type"] == "log"]
    assert any("step-000002 is damaged and is skipped" in w for w in warnings)


def test_a_resume_with_no_whole_checkpoint_names_every_damaged_one(trained_run, tmp_path):
    run_dir = copy_run(trained_run, tmp_path, "unresumable")
    for state in run_dir.glob("checkpoints/step-*/state.json"):
        state.write_text('{"step": 1}')  # no seq
    with pytest.raises(
        RuntimeError, match="no checkpoint of .* loads: checkpoints/step-000002 .*; checkpoints/step-000001"
    ):
        train(None, runs_dir=tmp_path, resume_dir=run_dir)


class RunsCodeWhenUnpickled:
    """A learner.pt planted to run a command when torch.load unpickles it without weights_only."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_resume_runs_no_code_planted_in_a_checkpoint_and_reads_no_state_through_a_link(trained_run, tmp_path):
    """The training process read a checkpoint's learner.pt with weights_only=False (anyone who could write the runs
    folder could have it run their code) and its state.json through links: each is now damage, skipped and named."""
    run_dir = copy_run(trained_run, tmp_path, "planted")
    marker, outside = tmp_path / "code-ran", tmp_path / "state.json"
    newest, older = run_dir / "checkpoints" / "step-000002", run_dir / "checkpoints" / "step-000001"
    torch.save({"optimizer": RunsCodeWhenUnpickled(marker)}, newest / "learner.pt")
    outside.write_bytes((older / "state.json").read_bytes())
    (older / "state.json").unlink()
    (older / "state.json").symlink_to(outside)
    with pytest.raises(RuntimeError, match="no checkpoint of .* loads") as refused:
        train(None, runs_dir=tmp_path, resume_dir=run_dir)
    assert not marker.exists(), "a resume unpickled code planted in learner.pt"
    assert "step-000002 (UnpicklingError" in str(refused.value) and "state.json is a link" in str(refused.value)


def test_the_training_process_writes_no_file_through_a_link_planted_in_its_run_folder(trained_run, tmp_path):
    """A resume rewrites its pid file and the steps it trains again: a link planted at either (the step file's
    staging had a fixed name too) is replaced as a link, never written through; a trajectories folder that is a link
    stops the run, naming it, with nothing written where it leads."""
    run_dir = copy_run(trained_run, tmp_path, "linked")
    victim = tmp_path / "victim.txt"
    victim.write_text("left alone\n")
    shutil.rmtree(run_dir / "checkpoints" / "step-000002")  # step 2 is trained again, its file written again
    for planted in (run_dir / "trajectories" / trajectory_file_name(2), run_dir / PID_FILE):
        planted.unlink(missing_ok=True)
        planted.symlink_to(victim)
    train(None, runs_dir=tmp_path, resume_dir=run_dir)
    assert victim.read_text() == "left alone\n"
    assert is_plain_file(run_dir / "trajectories" / trajectory_file_name(2))
    assert not list((run_dir / "trajectories").glob(".tmp-*"))

    elsewhere = tmp_path / "elsewhere"
    linked = copy_run(trained_run, tmp_path, "linked-folder")
    shutil.rmtree(linked / "checkpoints" / "step-000002")
    (linked / "trajectories").rename(elsewhere)
    (linked / "trajectories").symlink_to(elsewhere)
    before = sorted(path.name for path in elsewhere.iterdir())
    with pytest.raises(RefusedFile, match="trajectories is a link or not a folder"):
        train(None, runs_dir=tmp_path, resume_dir=linked)
    assert sorted(path.name for path in elsewhere.iterdir()) == before


def _damage(run_dir, operations):
    """Applies (file, kind, position, payload) damages: truncate, garbage bytes, a damaged line, delete."""
    files = sorted(p for p in run_dir.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".json", ".yaml", ""))
    for index, kind, position, payload in operations:
        path = files[index % len(files)]
        if not path.exists():
            continue
        data = path.read_bytes()
        cut = int(position * len(data))
        if kind == "truncate":
            path.write_bytes(data[:cut])
        elif kind == "garbage":
            path.write_bytes(data[:cut] + payload + data[cut + len(payload) :])
        elif kind == "line":
            start = data.rfind(b"\n", 0, cut) + 1
            path.write_bytes(data[:start] + payload + b"\n" + data[start:])
        else:
            path.unlink()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    operations=st.lists(
        st.tuples(
            st.integers(0, 50),
            st.sampled_from(["truncate", "garbage", "line", "delete"]),
            st.floats(0, 1),
            st.one_of(st.sampled_from(DAMAGED_LINES), st.binary(min_size=1, max_size=40)),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_random_damage_never_stops_the_server_from_listing_and_streaming(trained_run, tmp_path_factory, operations):
    """Random damage to a run folder's files: start-up, run/list, run/get, run/config, the replay of the log and
    trajectory queries all answer, each with a result the protocol declares or a documented error."""
    runs = tmp_path_factory.mktemp("runs")
    run_dir = copy_run(trained_run, runs, "random", checkpoints=False)  # the server reads no checkpoint
    _damage(run_dir, operations)
    server = TrainerServer(ServerOptions(host="127.0.0.1", port=0, runs_dir=runs, bundles_dir=runs / "b", token=None))
    manager: RunManager = server.state.runs

    async def start() -> None:
        manager.recover()

    asyncio.run(start())
    listed = manager.list()
    if (run_dir / RUN_FILE).is_file():
        [info] = listed
        validator_for("run/get.result").validate(info)
    frames, _, _ = read_new_events(run_dir / EVENTS_FILE, 0, run_dir.name)
    for _, frame in frames:
        validator_for("run/event.params").validate(json.loads(frame)["params"])
    for call in (
        lambda: manager.config(run_dir.name),
        lambda: query_page(server.state, {"runId": run_dir.name, "sort": "-reward"}),
        lambda: trajectory_records(server.state, {"runId": run_dir.name, "step": 1}),
    ):
        try:
            call()
        except RpcError as err:
            assert err.code != INTERNAL_ERROR and err.message
        except Exception as err:  # noqa: BLE001
            pytest.fail(f"{type(err).__name__}: {err} after {operations}")


def test_a_resume_of_a_run_whose_frozen_config_is_invalid_says_which_key(trained_run, tmp_path):
    """It said only "the run's process exited with code 1"."""
    from agentrl.run.runstore import CONFIG_FILE, RunStore
    from server_harness import is_final_status

    runs = tmp_path / "runs"
    run_dir = copy_run(trained_run, runs, "edited")
    RunStore(run_dir).append_event("status", {"status": "stopped", "step": 2, "total_steps": 2}, durable=True)
    frozen = run_dir / CONFIG_FILE
    frozen.write_text(frozen.read_text().replace("  lr: ", "  lr: abc #", 1))
    server = ServerProcess(runs)
    try:
        client = server.client()
        client.request("run/subscribe", {"runId": run_dir.name, "since": last_seq(run_dir)})
        assert client.request("run/resume", {"runId": run_dir.name})["status"] == "running"
        [*_, ended] = client.events_until(run_dir.name, is_final_status, timeout=120)
        message = ended["data"]["message"]
        assert ended["data"]["status"] == "failed" and "frozen config" in message and "train.lr" in message, message
        client.close()
    finally:
        server.stop()


def _fake_running_run(trained_run, runs, name, pid_line):
    from agentrl.run.runstore import PID_FILE, RunStore

    run_dir = copy_run(trained_run, runs, name, checkpoints=False)
    RunStore(run_dir).append_event("status", {"status": "running", "step": 1, "total_steps": 2}, durable=True)
    (run_dir / PID_FILE).write_text(pid_line)
    return run_dir


def test_a_stale_pid_file_naming_another_process_is_never_adopted_or_killed(trained_run, tmp_path):
    """A pid file naming an unrelated live process made a restarted server adopt it, and run/stop then SIGKILLed it.
    The run's process is known by its pid and its start time."""
    import subprocess

    bystander = subprocess.Popen(["sleep", "60"])
    try:
        runs = tmp_path / "runs"
        stale = _fake_running_run(trained_run, runs, "stale", f"{bystander.pid} 1\n")  # another start time
        legacy = _fake_running_run(trained_run, runs, "legacy", f"{bystander.pid}")  # a pid alone names no process
        server = ServerProcess(runs)
        try:
            client = server.client()
            for run_dir in (stale, legacy):
                assert client.request("run/get", {"runId": run_dir.name})["status"] == "interrupted"
                refused = client.call("run/stop", {"runId": run_dir.name, "mode": "immediate"})
                assert refused["error"]["code"] == p.RUN_STATE_CONFLICT
            assert bystander.poll() is None, "the server killed a process that was not the run's"
        finally:
            server.stop()
    finally:
        bystander.kill()
        bystander.wait()


def test_a_run_that_started_as_the_server_did_is_adopted_stopped_and_its_end_recorded(trained_run, tmp_path):
    """A run started less than a second before a server restart was never adopted: run/stop answered "is not
    running (it is running)" and its end was never recorded."""
    import subprocess

    from agentrl.run.runstore import process_start_time, read_events
    from server_harness import is_final_status

    runs = tmp_path / "runs"
    runs.mkdir()
    server = ServerProcess(runs)  # looked at its runs folder before the run wrote its pid file
    process = subprocess.Popen(["sleep", "60"])
    try:
        late = _fake_running_run(trained_run, runs, "late", f"{process.pid} {process_start_time(process.pid)}\n")
        client = server.client()
        assert client.request("run/get", {"runId": late.name})["status"] == "running"
        client.request("run/subscribe", {"runId": late.name, "since": read_events(late)[-1]["seq"]})
        assert client.request("run/stop", {"runId": late.name, "mode": "immediate"})["status"] == "stopped"
        [ended] = client.events_until(late.name, is_final_status, timeout=30)
        assert ended["data"]["status"] == "stopped"
        assert process.wait(timeout=10) == -9
    finally:
        process.kill()
        process.wait()
        server.stop()

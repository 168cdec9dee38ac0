"""What anyone who can write the runs folder can plant in it (issue #44, items 4, 8, 9 and 11): links, FIFOs, huge and
damaged files. Every reader opens a run folder's files through files_inside (no link followed, only regular files,
never blocking, capped), a damaged re-roll is skipped and named, a link in a run's place is deleted as a link, and
run/delete is refused while an export or a re-roll works on the run. Each answer is a result or a documented error:
never an internal error (-32603), never "invalid params" (-32602) for the server's own damage."""

import asyncio
import json
import os
import threading
import time

import pytest
from agentrl.contract.files_inside import RefusedFile, is_plain_file, is_plain_folder, open_inside, read_inside
from agentrl.run.reroll_store import REROLLS_DIR, list_rerolls, read_reroll, write_reroll
from agentrl.run.runstore import (
    EVENTS_FILE,
    PID_FILE,
    RUN_FILE,
    TRAJECTORIES_DIR,
    RunStore,
    list_checkpoints,
    list_run_dirs,
    list_trajectory_files,
    read_events,
    reverse_events,
    run_process,
    trajectory_file_name,
)
from agentrl.server import handlers_rerolls, handlers_runs
from agentrl.server import protocol as p
from agentrl.server.app import Client, ServerOptions, TrainerServer

REROLL_ID = "20261127-120000-abcdef"
STORED = {
    "reroll_id": REROLL_ID,
    "created_at": "2026-11-27T12:00:00+00:00",
    "trajectory_id": "1-0-0",
    "turn": 0,
    "edit": "observation",
    "text": "x",
    "recorded_text": "y",
    "policy_step": None,
    "samples": 1,
    "temperature": 0.0,
    "seed": 0,
    "code": "current",
    "differences": [],
    "rewards": [1.0],
    "elapsed_s": 0.5,
}


def within(seconds, work):
    """`work()`'s result (or its exception), failing the test rather than hanging it when it blocks past `seconds`."""
    found = {}

    def run():
        try:
            found["result"] = work()
        except Exception as err:  # noqa: BLE001 - raised again in the test's thread
            found["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "blocked: a reader opened a FIFO and waits for a writer that never comes"
    if "error" in found:
        raise found["error"]
    return found["result"]


@pytest.fixture
def run_dir(tmp_path):
    """A run folder in a runs folder: one status event, its config and run.json."""
    store = RunStore.create(tmp_path / "runs", "planted-20261127-120000-abcdef", {"rollout": {"temperature": 0.0}}, {})
    store.append_event("status", {"status": "completed", "step": 1, "total_steps": 1})
    return store.run_dir


class Connection:
    def __init__(self):
        self.sent = []

    async def send(self, frame):
        self.sent.append(json.loads(frame))


def ask(server, client, method, params, request_id=1):
    frame = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    return server.handle_message(client, frame)


def in_process_server(runs):
    options = ServerOptions(host="127.0.0.1", port=0, runs_dir=runs, bundles_dir=runs / "b", token=None, runs_code=True)
    return TrainerServer(options), Client(connection=Connection(), initialized=True)


def test_a_link_below_the_folder_is_never_followed_even_one_that_stays_inside(tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "passwd").write_text("root:x:0:0\n")
    folder = tmp_path / "run"
    (folder / "code").mkdir(parents=True)
    (folder / "code" / "a.py").write_text("A = 1\n")
    (folder / "code" / "same.py").symlink_to("a.py")
    (folder / "etc").symlink_to(tmp_path / "outside")
    assert read_inside(folder, "code/a.py", 100) == b"A = 1\n"
    for relative, where in (("etc/passwd", "etc"), ("etc", "etc"), ("code/same.py", "code/same.py")):
        with pytest.raises(RefusedFile, match=f"^{where} is a link"):
            read_inside(folder, relative, 100)
    for relative in ("../outside/passwd", "code/../../outside/passwd", "/etc/passwd", ""):
        with pytest.raises(RefusedFile, match="not a relative path"):
            read_inside(folder, relative, 100)
    assert not is_plain_file(folder / "code" / "same.py") and not is_plain_folder(folder / "etc")


def test_a_fifo_is_refused_at_once_and_a_file_over_the_cap_before_it_is_read(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    started = time.monotonic()
    with pytest.raises(RefusedFile, match="not a regular file"):
        within(5, lambda: open_inside(tmp_path, "fifo", None))
    assert time.monotonic() - started < 5
    (tmp_path / "big").write_bytes(b"x" * 1001)
    with pytest.raises(RefusedFile, match="1,001 bytes, over the 1,000 read"):
        read_inside(tmp_path, "big", 1000)
    with pytest.raises(FileNotFoundError):
        read_inside(tmp_path, "missing", 1000)


def test_fifos_as_the_log_the_pid_file_and_a_step_file_block_no_reader(run_dir):
    """Two step files planted as FIFOs blocked every client's trajectory/search and trajectory/query; the log and
    the pid file as FIFOs would block run/list and the server's start."""
    (run_dir / TRAJECTORIES_DIR).mkdir()
    os.mkfifo(run_dir / TRAJECTORIES_DIR / trajectory_file_name(1))
    (run_dir / TRAJECTORIES_DIR / trajectory_file_name(2)).symlink_to("/etc/passwd")
    assert within(5, lambda: list_trajectory_files(run_dir)) == {}
    os.mkfifo(run_dir / PID_FILE)
    assert within(5, lambda: run_process(run_dir)) is None
    (run_dir / EVENTS_FILE).unlink()
    os.mkfifo(run_dir / EVENTS_FILE)
    damage = []
    assert within(5, lambda: read_events(run_dir, damage=damage)) == []
    assert within(5, lambda: list(reverse_events(run_dir, damage))) == []
    assert damage == [f"{EVENTS_FILE} is not a regular file (a FIFO, a socket or a device)"] * 2
    server, client = in_process_server(run_dir.parent)
    asked = {"runId": run_dir.name}
    for method, params in (("run/list", {}), ("run/get", asked), ("trajectory/query", asked)):
        answer = within(10, lambda params=params, method=method: asyncio.run(ask(server, client, method, params)))
        assert "result" in answer or answer["error"]["code"] not in (p.INTERNAL_ERROR, p.INVALID_PARAMS), answer
    info = asyncio.run(ask(server, client, "run/get", {"runId": run_dir.name}))["result"]
    assert info["damage"] == [f"{EVENTS_FILE} is not a regular file (a FIFO, a socket or a device)"]


def test_a_checkpoint_or_run_json_that_is_a_link_is_not_the_runs(run_dir, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (run_dir / "checkpoints").mkdir()
    (run_dir / "checkpoints" / "step-000001").symlink_to(tmp_path / "elsewhere")
    assert list_checkpoints(run_dir) == []
    (run_dir / RUN_FILE).unlink()
    (run_dir / RUN_FILE).symlink_to(tmp_path / "elsewhere" / RUN_FILE)
    (tmp_path / "elsewhere" / RUN_FILE).write_text("{}")
    assert list_run_dirs(run_dir.parent) == []


def test_one_damaged_stored_reroll_is_skipped_and_named_and_the_others_still_read(run_dir):
    """One damaged re-roll made reroll/list and reroll/get answer -32603 for the whole run."""
    write_reroll(run_dir, STORED, [{"id": "reroll-x-0"}])
    folder = run_dir / REROLLS_DIR
    damaged = {
        "20261127-120001-000001": b"{not json",
        "20261127-120002-000002": json.dumps({**STORED, "reroll_id": "20261127-120002-000002", "turn": "a"}).encode(),
        "20261127-120003-000003": json.dumps([1, 2]).encode(),
    }
    for reroll_id, content in damaged.items():
        (folder / f"{reroll_id}.json").write_bytes(content)
    os.mkfifo(folder / "20261127-120004-000004.json")
    (folder / "20261127-120005-000005.json").symlink_to("/etc/passwd")
    torn = {**STORED, "reroll_id": "20261127-120006-000006"}
    (folder / "20261127-120006-000006.json").write_text(json.dumps(torn))
    (folder / "20261127-120006-000006.trajectories.jsonl").write_text('{"id": "a"}\n[3]\n')

    damage = []
    stored = within(5, lambda: list_rerolls(run_dir, damage))
    assert [s["reroll_id"] for s in stored] == [REROLL_ID, "20261127-120006-000006"]
    assert len(damage) == 5 and damage[0] == f"{REROLLS_DIR}/20261127-120001-000001.json: not JSON"
    assert "damaged at turn" in damage[1] and "link or not a regular file" in damage[3]
    assert read_reroll(run_dir, REROLL_ID)[1] == [{"id": "reroll-x-0"}]

    server, client = in_process_server(run_dir.parent)
    listed = asyncio.run(ask(server, client, "reroll/list", {"runId": run_dir.name}))["result"]
    p.validator_for("reroll/list.result").validate(listed)
    assert [r["rerollId"] for r in listed["rerolls"]] == [REROLL_ID, "20261127-120006-000006"]
    assert listed["damage"] == damage
    for reroll_id in [*damaged, "20261127-120004-000004", "20261127-120005-000005", "20261127-120006-000006"]:
        asked = {"runId": run_dir.name, "rerollId": reroll_id}
        error = within(5, lambda asked=asked: asyncio.run(ask(server, client, "reroll/get", asked)))["error"]
        assert error["code"] == p.RUN_STATE_CONFLICT and f"re-roll {reroll_id} is damaged" in error["message"]


def test_run_delete_of_a_run_folder_that_is_a_link_removes_the_link_only(run_dir, tmp_path):
    """It answered -32603 and the link stayed forever (renamed to .deleting-..., which no rmtree removes)."""
    runs = run_dir.parent
    (runs / "linked-20261127-120000-abcdef").symlink_to(run_dir)
    (runs / ".deleting-old-abcdef").symlink_to(run_dir)  # what an earlier server left
    server, client = in_process_server(runs)

    async def start():
        server.state.runs.recover()

    asyncio.run(start())
    assert not (runs / ".deleting-old-abcdef").is_symlink() and (run_dir / RUN_FILE).is_file()
    answer = asyncio.run(ask(server, client, "run/delete", {"runId": "linked-20261127-120000-abcdef"}))
    assert answer["result"] == {"runId": "linked-20261127-120000-abcdef"}
    assert not (runs / "linked-20261127-120000-abcdef").is_symlink() and (run_dir / RUN_FILE).is_file()
    assert not list(runs.glob(".deleting-*"))


@pytest.mark.parametrize("method", ["run/export", "episode/reroll"])
def test_run_delete_while_an_export_or_a_reroll_works_on_the_run_is_refused_naming_it(run_dir, monkeypatch, method):
    """The delete was accepted, and the export then failed with "has no checkpoint", the re-roll with a missing
    file. Refused while either holds the run; accepted once it has ended."""
    release = asyncio.Event()

    async def working(*args, **kwargs):  # the export's child, or the re-roll's, at work until released
        await release.wait()
        raise p.RpcError(p.RUN_STATE_CONFLICT, "ended by the test")

    monkeypatch.setattr(handlers_runs, "run_child", working)
    monkeypatch.setattr(handlers_rerolls, "reroll_episode", working)
    monkeypatch.setattr(handlers_rerolls, "trajectory_records", lambda state, params: {"records": [{"turns": []}]})
    monkeypatch.setattr(handlers_rerolls, "replayable", lambda record: record)  # the record above is a stand-in
    monkeypatch.setattr(handlers_rerolls, "branch_point", lambda *args: None)
    params = {"runId": run_dir.name}
    if method == "episode/reroll":
        params |= {"trajectoryId": "1-0-0", "turn": 0, "edit": "observation", "text": "x", "policy": "base"}
        params |= {"samples": 1, "temperature": 0}
        (run_dir / "config.yaml").write_text("env: {module: env.py}\nrollout: {temperature: 0}\n")
    server, client = in_process_server(run_dir.parent)

    async def scenario():
        assert await ask(server, client, method, params, "work") is None  # answered in the background
        await asyncio.sleep(0.1)
        refused = await ask(server, client, "run/delete", {"runId": run_dir.name})
        release.set()
        await asyncio.wait(client.background)
        return refused, await ask(server, client, "run/delete", {"runId": run_dir.name})

    refused, accepted = asyncio.run(scenario())
    holder = {"run/export": "an export (run/export)", "episode/reroll": "a re-roll (episode/reroll)"}[method]
    assert refused["error"]["code"] == p.RUN_STATE_CONFLICT
    assert refused["error"]["message"] == f"run {run_dir.name} is in use by {holder}: delete it once that has ended"
    assert client.connection.sent[0]["error"]["message"] == "ended by the test"
    assert accepted["result"] == {"runId": run_dir.name} and not run_dir.exists()


def test_a_link_planted_as_a_runs_stderr_log_is_replaced_never_written_through(tmp_path):
    """Starting a run's process appended its stderr to whatever its log's place held: a link there (anyone who can
    write the runs folder can plant one) led the run's output into another file."""
    from agentrl.server.run_process import stderr_log_path

    runs, victim = tmp_path / "runs", tmp_path / "victim.txt"
    victim.write_text("left alone\n")
    log = stderr_log_path(runs, "planted-20261128-000000-abcdef")
    log.parent.mkdir(parents=True)
    log.symlink_to(victim)
    server, _ = in_process_server(runs)

    async def spawn():
        runs = server.state.runs
        await runs._spawn("planted-20261128-000000-abcdef", ["no-such-command"])  # argparse: exit 2, on stderr
        await runs.live["planted-20261128-000000-abcdef"].process.wait()

    asyncio.run(spawn())
    assert victim.read_text() == "left alone\n"
    assert is_plain_file(log) and "invalid choice" in log.read_text()

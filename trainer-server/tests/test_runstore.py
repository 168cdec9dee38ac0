"""The run folder's guarantees, and the rollout health signals, on their own."""

import json

import pytest
from agentrl.environment.tool import ToolCallRecord
from agentrl.rollout.episode import Episode, TurnRecord
from agentrl.run.metrics import rollout_metrics
from agentrl.run.runstore import RunStore, last_seq, latest_status, list_run_dirs, read_events


def test_events_are_sequenced_and_a_torn_tail_is_never_read(tmp_path):
    store = RunStore.create(tmp_path, "r", {"name": "r"}, {"name": "r", "mode": "train"})
    for step in range(3):
        store.append_event("metrics", {"step": step, "metrics": {}})
    with (store.run_dir / "events.jsonl").open("a") as handle:
        handle.write('{"seq": 4, "time": 0, "type": "status", "da')  # a crash mid-write
    assert [e["seq"] for e in read_events(store.run_dir)] == [1, 2, 3]
    assert [e["seq"] for e in read_events(store.run_dir, since=2)] == [3]
    reopened = RunStore(store.run_dir)  # a resuming writer drops the torn line and continues the sequence
    assert reopened.append_event("status", {"status": "running", "step": 3, "total_steps": 3}) == 4
    lines = (store.run_dir / "events.jsonl").read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [1, 2, 3, 4]
    assert latest_status(read_events(store.run_dir))["status"] == "running"


def test_an_event_that_breaks_the_protocol_is_refused_before_it_is_written(tmp_path):
    store = RunStore.create(tmp_path, "r", {}, {"name": "r", "mode": "train"})
    with pytest.raises(ValueError, match="unknown event type 'progress'; .* declares status, metrics, log"):
        store.append_event("progress", {"step": 1})
    with pytest.raises(
        ValueError,
        match=r"a metrics event's data breaks rpc.schema.json at data/metrics/reward: 'high' is not of type 'number'",
    ):
        store.append_event("metrics", {"step": 1, "metrics": {"reward": "high"}})
    with pytest.raises(ValueError, match="at data: 'total_steps' is a required property"):
        store.append_event("status", {"status": "running", "step": 1})
    with pytest.raises(ValueError, match="at data/status: 'paused' is not one of"):
        store.append_event("status", {"status": "paused", "step": 1, "total_steps": 2})
    assert read_events(store.run_dir) == [] and store.last_seq == 0


def test_the_last_seq_is_read_from_the_tail(tmp_path):
    store = RunStore.create(tmp_path, "r", {"name": "r"}, {"name": "r", "mode": "train"})
    assert last_seq(store.run_dir) == 0
    for step in range(2000):
        store.append_event("metrics", {"step": step, "metrics": {"x": 1.0}})
    store.append_event("log", {"level": "info", "message": "y" * 300_000})  # one event longer than the first tail read
    assert last_seq(store.run_dir) == 2001 == read_events(store.run_dir)[-1]["seq"]
    with (store.run_dir / "events.jsonl").open("a") as handle:
        handle.write('{"seq": 2002, "ty')  # a torn tail is not an event yet
    assert last_seq(store.run_dir) == 2001


def test_checkpoints_are_whole_or_absent_and_trimmed(tmp_path):
    store = RunStore.create(tmp_path, "r", {}, {"name": "r", "mode": "train"})
    for step in (1, 2, 3):
        store.save_checkpoint(step, lambda folder, s=step: (folder / "model.pt").write_text(str(s)), keep=2)
    assert [p.name for p in store.checkpoints()] == ["step-000002", "step-000003"]
    assert (store.latest_checkpoint() / "model.pt").read_text() == "3"

    def crash(folder):
        (folder / "model.pt").write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        store.save_checkpoint(4, crash, keep=2)
    assert store.latest_checkpoint().name == "step-000003"  # the half-written one is never taken
    assert sorted(p.name for p in store.checkpoints_dir.iterdir()) == ["step-000002", "step-000003"]


def test_run_folders_are_listed_and_never_overwritten(tmp_path):
    RunStore.create(tmp_path, "a", {}, {"name": "a", "mode": "train"})
    (tmp_path / "not-a-run").mkdir()
    assert [p.name for p in list_run_dirs(tmp_path)] == ["a"]
    with pytest.raises(FileExistsError):
        RunStore.create(tmp_path, "a", {}, {"name": "a", "mode": "train"})


def episode(group, reward, *, status="finished", calls=(), parse_error=None, tokens=4):
    ep = Episode(task_id="t", group=group, sample=0, prompt_messages=[], tool_schemas=[])
    ep.turns = [TurnRecord(index=0, assistant="a", tool_calls=list(calls), parse_error=parse_error)]
    ep.outcome_reward, ep.status = reward, status
    ep.reward_breakdown = {"em": reward}
    ep.loss_mask = [1] * tokens
    ep.token_ids = [0] * tokens
    return ep


def test_rollout_health_signals():
    ok = ToolCallRecord(id="1", name="search", arguments={}, raw="r", result="x")
    bad = ToolCallRecord(id="2", name="search", arguments={}, raw="r", error="boom", error_kind="exception")
    episodes = [
        episode(0, 1.0, calls=[ok, bad]),
        episode(0, 0.0, status="truncated", parse_error="bad json"),
        episode(1, 0.5),
        episode(1, 0.5, tokens=8),
    ]
    m = rollout_metrics(episodes)
    assert m["reward/mean"] == pytest.approx(0.5)
    assert m["reward/em"] == pytest.approx(0.5)
    assert m["health/zero_variance_groups"] == 0.5  # group 1 earned 0.5 twice
    assert m["health/truncation_rate"] == 0.25
    assert m["health/tool_failure_rate"] == 0.5 and m["tools/search/failure_rate"] == 0.5
    assert m["tools/errors/exception"] == 1 and m["health/malformed_calls"] == 1
    assert m["episode/response_length_mean"] == 5.0 and m["episode/turns_mean"] == 1.0


def test_reverse_events_read_from_the_tail_equal_the_log_read_forwards(tmp_path, monkeypatch):
    from agentrl.run import runstore
    from agentrl.run.runstore import EVENTS_FILE, last_status, read_events, reverse_events

    monkeypatch.setattr(runstore, "_TAIL_BLOCK", 97)  # many blocks, and events longer than one block
    store = RunStore.create(tmp_path, "r", {}, {"name": "r", "mode": "train"})
    for index in range(60):
        store.append_event("log", {"level": "info", "message": "x" * (index * 7 % 300)})
        if index % 17 == 0:
            store.append_event("status", {"status": "running", "step": index, "total_steps": 60})
    with (store.run_dir / EVENTS_FILE).open("ab") as handle:
        handle.write(b'{"seq": 999, "type": "status", "da')  # an event still being written
    forwards = read_events(store.run_dir)
    assert list(reverse_events(store.run_dir)) == forwards[::-1]
    assert last_status(store.run_dir) == {"status": "running", "step": 51, "total_steps": 60}
    assert list(reverse_events(tmp_path / "nothing-here")) == []


def test_opening_the_run_of_a_long_log_reads_only_its_tail(tmp_path, monkeypatch):
    """The server opens a run's store to append one event (run/resume, a run found dead): for a log of 100,000
    events that must not parse all of them on the server's loop. A torn line longer than a read block is dropped."""
    from agentrl.run import runstore

    monkeypatch.setattr(runstore, "_TAIL_BLOCK", 97)
    store = RunStore.create(tmp_path, "r", {}, {"name": "r", "mode": "train"})
    with (store.run_dir / runstore.EVENTS_FILE).open("a", encoding="utf-8") as log:
        for seq in range(1, 100_001):
            log.write(json.dumps({"seq": seq, "time": 0, "type": "metrics", "data": {"step": seq, "metrics": {}}}))
            log.write("\n")
        log.write('{"seq": 100001, "time": 0, "type": "log", "data": {"level": "info", "message": "' + "x" * 500)
    parsed = []
    monkeypatch.setattr(runstore.json, "loads", lambda text, loads=json.loads: parsed.append(text) or loads(text))
    reopened = RunStore(store.run_dir)
    assert len(parsed) <= 2, f"opening the store parsed {len(parsed)} events"
    assert reopened.append_event("status", {"status": "running", "step": 1, "total_steps": 1}) == 100_001
    monkeypatch.undo()
    last_two = [json.loads(line) for line in (store.run_dir / runstore.EVENTS_FILE).read_text().splitlines()[-2:]]
    assert [(event["seq"], event["type"]) for event in last_two] == [(100_000, "metrics"), (100_001, "status")]


def test_a_log_line_whose_time_a_flipped_byte_renamed_is_damage_not_an_event():
    """A random flipped byte turned "time" into " ime": the line parsed, and run/subscribe streamed an event the
    protocol does not declare."""
    from agentrl.run.runstore import parse_event

    line = b'{"seq": 3, " ime": 1795827630.1, "type": "log", "data": {"level": "info", "message": "hi"}}'
    assert parse_event(line) == "no number time"
    assert isinstance(parse_event(line.replace(b'" ime"', b'"time"')), dict)

"""trajectory/query reads a run's trajectory index, not its whole log (issue #32, item 9): the answers are the ones
a scan of every event gives, however the index was left (a run begun before it, a process that died between an
event and its row, rows garbled or pointing at the wrong lines), and a query parses only the lines it returns."""

import random

import pytest
from agentrl.run import runstore, trajectory_summaries
from agentrl.run.runstore import (
    EPISODE_SORTS,
    EVENTS_FILE,
    TRAJECTORY_INDEX_FILE,
    TRAJECTORY_INDEX_ROW,
    RunStore,
    read_events,
)
from agentrl.run.trajectory_summaries import TrajectorySummaries

STATUSES = ("finished", "truncated", "error")


def summary(step, group, sample, rng):
    return {
        "id": f"{step}-{group}-{sample}",
        "step": step,
        "group": group,
        "sample": sample,
        "task_id": f"task-{group}",
        "status": rng.choice(STATUSES),
        "reward": rng.choice([0.0, 0.5, 1.0, rng.random()]),  # ties, so the tie order is checked
        "advantage": None,
        "num_turns": 1,
        "num_tool_calls": 1,
        "num_tool_errors": rng.choice([0, 0, 2]),
        "response_tokens": rng.randint(1, 20),
        "file": f"trajectories/step-{step:06d}.trajectories.jsonl",
    }


def write_steps(store, steps, rng, groups=2, samples=3):
    for step in steps:
        store.append_event("metrics", {"step": step, "metrics": {"reward/mean": 0.5}})
        for group in range(groups):
            for sample in range(samples):
                store.append_event("trajectory", summary(step, group, sample, rng))


def expected(run_dir, step=None, status=None, has_tool_error=None, sort="step"):
    """What trajectory/query answered when it read every event: the latest summary of each id, filtered, sorted."""
    latest = {}
    for event in read_events(run_dir):
        if event["type"] == "trajectory":
            latest[event["data"]["id"]] = event["data"]
    items = [
        item
        for item in latest.values()
        if (step is None or item["step"] == step)
        and (status is None or item["status"] == status)
        and (has_tool_error is None or (item["num_tool_errors"] > 0) == has_tool_error)
    ]
    field = sort.lstrip("-")
    items.sort(key=lambda i: (i[field], i["step"], i["group"], i["sample"]), reverse=sort.startswith("-"))
    return items


QUERIES = [
    {},
    {"step": 2},
    {"step": 4, "sort": "-reward"},
    {"status": "error"},
    {"has_tool_error": True, "sort": "response_tokens"},
    {"status": "finished", "has_tool_error": False, "sort": "-response_tokens"},
    *({"sort": sort} for sort in EPISODE_SORTS),
]


def assert_answers_like_a_full_scan(run_dir, summaries=None):
    summaries = summaries or TrajectorySummaries(run_dir)
    for query in QUERIES:
        want = expected(run_dir, **query)
        items, total = summaries.query(**query, start=0, limit=1000)
        assert (items, total) == (want, len(want)), query
        page, _ = summaries.query(**query, start=3, limit=4)
        assert page == want[3:7], query


@pytest.fixture
def resumed_run(tmp_path):
    """Steps 1-6, then a resume from step 3 that writes steps 4-7 again (superseded ids written twice)."""
    rng = random.Random(0)
    store = RunStore.create(tmp_path, "run-a", {}, {"name": "run-a", "mode": "train"})
    write_steps(store, range(1, 7), rng)
    write_steps(RunStore(store.run_dir), range(4, 8), rng)
    return store.run_dir


def test_every_query_answers_as_a_scan_of_the_whole_log_would(resumed_run):
    size = (resumed_run / TRAJECTORY_INDEX_FILE).stat().st_size
    assert size == TRAJECTORY_INDEX_ROW.size * 10 * 6  # a row per trajectory event, the superseded ones too
    assert_answers_like_a_full_scan(resumed_run)


def test_a_query_on_a_long_run_parses_only_the_lines_it_returns(resumed_run, monkeypatch):
    parsed, parse = [], runstore.parse_event

    def counting(line):
        parsed.append(line)
        return parse(line)

    monkeypatch.setattr(runstore, "parse_event", counting)
    monkeypatch.setattr(trajectory_summaries, "parse_event", counting)
    items, total = TrajectorySummaries(resumed_run).query(sort="-reward", start=5, limit=4)
    assert total == 7 * 6 and len(items) == 4
    assert len(parsed) == 4  # the page's lines: never the other 46 trajectory events, nor the metrics


def test_a_run_begun_before_the_index_is_scanned_once_then_grows_by_its_rows(resumed_run):
    (resumed_run / TRAJECTORY_INDEX_FILE).unlink()
    summaries = TrajectorySummaries(resumed_run)
    assert_answers_like_a_full_scan(resumed_run, summaries)
    write_steps(RunStore(resumed_run), [8], random.Random(1))  # the resumed trainer indexes what came before
    assert (resumed_run / TRAJECTORY_INDEX_FILE).stat().st_size == TRAJECTORY_INDEX_ROW.size * 11 * 6
    assert_answers_like_a_full_scan(resumed_run, summaries)  # the same reader: it takes only the new rows
    assert_answers_like_a_full_scan(resumed_run)


def test_events_a_process_wrote_without_their_rows_are_found(resumed_run):
    index = resumed_run / TRAJECTORY_INDEX_FILE
    rows = index.read_bytes()
    index.write_bytes(rows[: -TRAJECTORY_INDEX_ROW.size * 2 - 5])  # it died after two events, mid-row
    assert_answers_like_a_full_scan(resumed_run)  # the reader scans past the last whole row
    write_steps(RunStore(resumed_run), [8], random.Random(1))
    assert index.read_bytes()[: len(rows)] == rows  # the next writer put the missing rows back first
    assert_answers_like_a_full_scan(resumed_run)


@pytest.mark.parametrize(
    "garble",
    [
        lambda rows: b"\xff" * len(rows),  # nonsense
        lambda rows: rows[TRAJECTORY_INDEX_ROW.size :] + rows[: TRAJECTORY_INDEX_ROW.size],  # out of order
        lambda rows: rows[: TRAJECTORY_INDEX_ROW.size * 7] + rows[TRAJECTORY_INDEX_ROW.size * 8 :],  # a row missing
        lambda rows: rows + rows,  # every row twice
    ],
    ids=["nonsense", "out-of-order", "row-missing", "rows-twice"],
)
def test_a_garbled_index_gives_the_answers_of_the_log(resumed_run, garble):
    index = resumed_run / TRAJECTORY_INDEX_FILE
    index.write_bytes(garble(index.read_bytes()))
    assert_answers_like_a_full_scan(resumed_run)


def test_a_log_changed_under_its_index_gives_the_answers_of_the_log(resumed_run):
    """A line inserted at the top shifts every line: each row now names the wrong bytes."""
    log = resumed_run / EVENTS_FILE
    log.write_bytes(
        b'{"seq": 1, "time": 0, "type": "log", "data": {"level": "info", "message": "x"}}\n' + log.read_bytes()
    )
    assert_answers_like_a_full_scan(resumed_run)


def test_a_reader_follows_a_live_run(tmp_path):
    rng = random.Random(2)
    store = RunStore.create(tmp_path, "live", {}, {"name": "live", "mode": "train"})
    summaries = TrajectorySummaries(store.run_dir)
    assert summaries.query() == ([], 0)
    for step in range(1, 4):
        write_steps(store, [step], rng)
        assert_answers_like_a_full_scan(store.run_dir, summaries)
    with (store.run_dir / EVENTS_FILE).open("ab") as log:
        log.write(b'{"seq": 99, "time": 0, "type": "traj')  # a line still being written is not a summary yet
    assert summaries.query()[1] == 3 * 6


def test_the_sorts_are_the_ones_the_protocol_names():
    """trajectory/query and trajectory/search take the sorts runstore.EPISODE_SORTS defines, no more and no fewer."""
    from agentrl.contract.schemas import load_schema

    defs = load_schema("rpc.schema.json")["$defs"]
    for method in ("trajectory/query", "trajectory/search"):
        assert defs[f"{method}.params"]["properties"]["sort"]["enum"] == list(EPISODE_SORTS), method

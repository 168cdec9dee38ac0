"""trajectory/search's index (agentrl/run/episode_search.py) answers what a full scan of the trajectories answers,
for random queries over random runs; survives a rewritten (resumed) step, a step file the trainer wrote but never
indexed, and a writer killed in the middle of a step; and reads health alerts from the log as it grows. Concurrent
searches, searches during a rebuild, a damaged index and damaged run data (issue #44) never make it lie or fail."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from agentrl.run.episode_search import (
    DAMAGED_SUFFIX,
    SEARCH_FILE,
    EpisodeSearch,
    Filters,
    IndexDamaged,
    Range,
    Rebuilding,
    fts_query,
)
from agentrl.run.runstore import EVENTS_FILE, TRAJECTORIES_DIR, RunStore, trajectory_file_name
from server_harness import example_config

WORDS = ["alpha", "Beta", "gamma", "delta", "search", "answer", "Paris", "unknown", "retry", "busy"]
TOOLS = ["search", "lookup", "calculator"]
ERROR_KINDS = ["exception", "timeout", "bad_json", "unknown_tool"]
STATUSES = ["finished", "truncated", "error"]


def make_record(rng: random.Random, step: int, group: int, sample: int) -> dict[str, Any]:
    turns = []
    for index in range(rng.randint(1, 4)):
        calls = [
            {"name": rng.choice(TOOLS), "error_kind": rng.choice([None, None, *ERROR_KINDS])}
            for _ in range(rng.randint(0, 2))
        ]
        turns.append(
            {
                "index": index,
                "assistant": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))),
                "tool_calls": calls,
                "observation": " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4))) or None,
            }
        )
    return {
        "id": f"s{step}-g{group}-n{sample}",
        "step": step,
        "group": group,
        "sample": sample,
        "task_id": f"t{group}",
        "status": rng.choice(STATUSES),
        "reward": round(rng.uniform(-1, 2), 2),
        "advantage": None,
        "turns": turns,
        "stats": {
            "num_turns": len(turns),
            "num_tool_calls": sum(len(t["tool_calls"]) for t in turns),
            "num_tool_errors": sum(c["error_kind"] is not None for t in turns for c in t["tool_calls"]),
            "response_tokens": rng.randint(1, 500),
        },
    }


def write_step(store: RunStore, rng: random.Random, step: int, groups: int = 3, samples: int = 4) -> list[dict]:
    records = [make_record(rng, step, g, n) for g in range(groups) for n in range(samples)]
    path = store.write_trajectories(step, records)
    return records, path


def scan(records: list[dict], filters: Filters, health: set[tuple[int, str]]) -> list[dict]:
    """What a full scan finds: the reference the index must agree with."""

    def words(text: str) -> set[str]:
        return {w.lower() for w in text.split()}

    def holds(r: dict) -> bool:
        calls = [c for t in r["turns"] for c in t["tool_calls"]]
        if filters.text is not None:
            assistant = words(" ".join(t["assistant"] for t in r["turns"]))
            observation = words(" ".join(t["observation"] or "" for t in r["turns"]))
            where = {"assistant": assistant, "observation": observation}.get(filters.text_in, assistant | observation)
            if filters.text_in is None:
                # all words, each in either column: FTS5 matches an unqualified term against every column
                if not all(w.lower() in assistant or w.lower() in observation for w in filters.text.split()):
                    return False
            elif not all(w.lower() in where for w in filters.text.split()):
                return False
        if not any(
            filters.tool in (None, c["name"]) and filters.error_kind in (None, c["error_kind"]) for c in calls
        ) and (filters.tool is not None or filters.error_kind is not None):
            return False  # both given: one call of that tool failed with that kind
        if filters.status is not None and r["status"] != filters.status:
            return False
        if filters.health_code is not None and (r["step"], filters.health_code) not in health:
            return False
        for value, bounds in (
            (r["reward"], filters.reward),
            (r["step"], filters.step),
            (r["stats"]["num_turns"], filters.turns),
        ):
            if (bounds.low is not None and value < bounds.low) or (bounds.high is not None and value > bounds.high):
                return False
        return True

    return [r for r in records if holds(r)]


def random_filters(rng: random.Random) -> Filters:
    def maybe(value: Any) -> Any:
        return value if rng.random() < 0.3 else None

    def bounds(low: float, high: float) -> Range:
        a, b = sorted((rng.uniform(low, high), rng.uniform(low, high)))
        return Range(maybe(a), maybe(b))

    return Filters(
        text=maybe(" ".join(rng.sample(WORDS, rng.randint(1, 2)))),
        text_in=rng.choice([None, None, "assistant", "observation"]),
        tool=maybe(rng.choice(TOOLS)),
        error_kind=maybe(rng.choice(ERROR_KINDS)),
        status=maybe(rng.choice(STATUSES)),
        reward=bounds(-1, 2),
        step=bounds(0, 8),
        turns=bounds(1, 4),
        health_code=maybe(rng.choice(["zero_variance_groups", "kl_above_bound"])),
    )


SORT_KEY = {
    "step": lambda r: (r["step"], r["group"], r["sample"]),
    "reward": lambda r: (r["reward"], r["step"], r["group"], r["sample"]),
    "-reward": lambda r: (-r["reward"], -r["step"], -r["group"], -r["sample"]),
    "response_tokens": lambda r: (r["stats"]["response_tokens"], r["step"], r["group"], r["sample"]),
    "-response_tokens": lambda r: (-r["stats"]["response_tokens"], -r["step"], -r["group"], -r["sample"]),
}


def add_health(store: RunStore, step: int, code: str, since_step: int | None = None, resolved: bool = False) -> None:
    alert = {"code": code, "severity": "warning", "resolved": resolved, "step": step, "since_step": since_step or step}
    store.append_event("health", {**alert, "message": "m", "fix": "f", "metrics": {}, "trajectory_ids": []})


def test_random_queries_agree_with_a_full_scan(tmp_path):
    rng = random.Random(7)
    store = RunStore.create(tmp_path, "search-run", {"name": "x"}, {"name": "x", "mode": "train"})
    search = EpisodeSearch(store.run_dir)
    records: list[dict] = []
    for step in range(1, 9):
        written, path = write_step(store, rng, step)
        search.index_step(step, written, path)
        records += written
    add_health(store, 2, "zero_variance_groups")
    add_health(store, 6, "kl_above_bound", since_step=4)  # the streak 4-6 raised it
    add_health(store, 7, "kl_above_bound", resolved=True)  # cleared at 7: 7 is not one of its steps
    health = {(2, "zero_variance_groups"), (4, "kl_above_bound"), (5, "kl_above_bound"), (6, "kl_above_bound")}
    search.sync()
    found_some = 0
    for _ in range(300):
        filters = random_filters(rng)
        sort = rng.choice(list(SORT_KEY))
        expected = sorted(scan(records, filters, health), key=SORT_KEY[sort])
        start, limit = rng.choice([(0, 1000), (0, 5), (3, 7)])
        matches, total = search.search(filters, sort, start, limit)
        assert total == len(expected), filters
        assert [m.summary["id"] for m in matches] == [r["id"] for r in expected[start : start + limit]], filters
        assert [m.key for m in matches] == sorted(m.key for m in matches)
        found_some += total > 0
    assert 100 < found_some < 300  # the queries are neither all empty nor all trivial


def test_a_rewritten_step_replaces_its_rows_and_an_unindexed_step_file_is_indexed_by_sync(tmp_path):
    rng = random.Random(1)
    store = RunStore.create(tmp_path, "resumed", {"name": "x"}, {"name": "x", "mode": "train"})
    search = EpisodeSearch(store.run_dir)
    first, path = write_step(store, rng, 1)
    search.index_step(1, first, path)
    assert search.search(Filters(), "step", 0, 100)[1] == 12  # its rows now in this reader's memory
    again, path = write_step(store, rng, 1, groups=1, samples=2)  # a resumed run writes step 1 again
    EpisodeSearch(store.run_dir).index_step(1, again, path)  # another process: the trainer
    write_step(store, rng, 2)  # a trainer killed before it indexed step 2
    search.sync()
    matches, total = search.search(Filters(), "step", 0, 100)
    assert total == 2 + 12
    assert [m.summary["id"] for m in matches][:2] == [r["id"] for r in again]
    assert matches[0].summary["file"] == f"trajectories/{trajectory_file_name(1)}"


def test_a_writer_killed_in_the_middle_of_a_step_leaves_no_half_step(tmp_path):
    rng = random.Random(2)
    store = RunStore.create(tmp_path, "killed", {"name": "x"}, {"name": "x", "mode": "train"})
    search = EpisodeSearch(store.run_dir)
    records, path = write_step(store, rng, 1)
    search.index_step(1, records, path)
    records2, _ = write_step(store, rng, 2)
    (tmp_path / "records.json").write_text(json.dumps(records2))
    # A writer that dies with SIGKILL after two of step 2's episodes are inserted, inside the step's transaction.
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, os, signal, sys\n"
            "from pathlib import Path\n"
            "from agentrl.run.episode_search import EpisodeSearch\n"
            "records = json.loads(Path(sys.argv[2]).read_text())\n"
            "class Dies(list):\n"
            "    def __iter__(self):\n"
            "        for i, r in enumerate(list.__iter__(self)):\n"
            "            if i == 2: os.kill(os.getpid(), signal.SIGKILL)\n"
            "            yield r\n"
            "EpisodeSearch(Path(sys.argv[1])).index_step(2, Dies(records), Path(sys.argv[3]))\n",
            str(store.run_dir),
            str(tmp_path / "records.json"),
            str(store.trajectories_dir / trajectory_file_name(2)),
        ],
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL
    fresh = EpisodeSearch(store.run_dir)
    assert fresh.search(Filters(), "step", 0, 100)[1] == 12  # step 1 only: nothing of step 2's transaction
    fresh.sync()
    assert fresh.search(Filters(step=Range(2, 2)), "step", 0, 100)[1] == 12


def test_health_alerts_are_read_from_the_log_as_it_grows(tmp_path):
    rng = random.Random(3)
    store = RunStore.create(tmp_path, "health", {"name": "x"}, {"name": "x", "mode": "train"})
    search = EpisodeSearch(store.run_dir)
    for step in (1, 2):
        records, path = write_step(store, rng, step)
        search.index_step(step, records, path)
    add_health(store, 1, "zero_variance_groups")
    search.sync()
    assert search.search(Filters(health_code="zero_variance_groups"), "step", 0, 100)[1] == 12
    add_health(store, 2, "zero_variance_groups")
    with (store.run_dir / EVENTS_FILE).open("ab") as log:
        log.write(b'{"seq": 99, "type": "health", "data": {"step": 2')  # being written: read once complete
    search.sync()
    assert search.search(Filters(health_code="zero_variance_groups"), "step", 0, 100)[1] == 24


@pytest.mark.parametrize("text", ['"unclosed', "OR", "NEAR(a b)", "a*", "col:umn", "(x", "^y", "é", '""""'])
def test_any_text_a_user_types_is_a_valid_query(tmp_path, text):
    store = RunStore.create(tmp_path, "typed", {"name": "x"}, {"name": "x", "mode": "train"})
    search = EpisodeSearch(store.run_dir)
    records, path = write_step(store, random.Random(4), 1)
    search.index_step(1, records, path)
    try:
        query = fts_query(text, None)
    except ValueError:
        assert not text.strip('"')  # only a text with no word is refused
        return
    assert search.search(Filters(text=text), "step", 0, 10)[1] >= 0, query


def test_phrases_match_words_in_order_in_any_case(tmp_path):
    store = RunStore.create(tmp_path, "phrase", {"name": "x"}, {"name": "x", "mode": "train"})
    search = EpisodeSearch(store.run_dir)
    record = make_record(random.Random(5), 1, 0, 0)
    record["turns"] = [
        {"index": 0, "assistant": "The capital is PARIS, France.", "tool_calls": [], "observation": None}
    ]
    other = make_record(random.Random(5), 1, 0, 1)
    other["turns"] = [{"index": 0, "assistant": "France has Paris.", "tool_calls": [], "observation": None}]
    path = store.write_trajectories(1, [record, other])
    search.index_step(1, [record, other], path)
    assert search.search(Filters(text="paris france"), "step", 0, 10)[1] == 2
    assert [m.summary["id"] for m in search.search(Filters(text='"paris france"'), "step", 0, 10)[0]] == [record["id"]]
    assert search.search(Filters(text="paris", text_in="observation"), "step", 0, 10)[1] == 0


def test_the_trainer_indexes_each_step_as_it_records_it(tmp_path):
    """A real (tiny) training run: its search index holds every episode the run's trajectory events name."""
    path = tmp_path / "c.agentrl.yaml"
    path.write_text(yaml.safe_dump(example_config(steps=2)))
    subprocess.run(
        [sys.executable, "-m", "agentrl.cli", "train", str(path), "--runs-dir", str(tmp_path / "runs"), "--quiet"],
        check=True,
        capture_output=True,
    )
    [run_dir] = (tmp_path / "runs").iterdir()
    events = [json.loads(line) for line in (run_dir / EVENTS_FILE).read_text().splitlines()]
    ids = sorted(e["data"]["id"] for e in events if e["type"] == "trajectory")
    matches, total = EpisodeSearch(Path(run_dir)).search(Filters(), "step", 0, 1000)
    assert ids and sorted(m.summary["id"] for m in matches) == ids and total == len(ids)


# --- issue #44, items 1-3: answers that cannot lie, a damaged index rebuilt, damaged run data skipped and named ---
def big_run(tmp_path: Path, steps: int = 12, groups: int = 8, samples: int = 8) -> tuple[RunStore, list[dict]]:
    """A run whose steps the trainer indexed as it wrote them, and every record it wrote."""
    rng = random.Random(11)
    store = RunStore.create(tmp_path, "big", {"name": "x"}, {"name": "x", "mode": "train"})
    records: list[dict] = []
    for step in range(1, steps + 1):
        written, path = write_step(store, rng, step, groups, samples)
        EpisodeSearch(store.run_dir).index_step(step, written, path)
        records += written
    return store, records


def test_eight_concurrent_first_searches_read_the_episodes_once(tmp_path):
    """Two searches of one run at once doubled the reader's rows for the server's life (40,000 of 20,000); 5,120
    episodes are enough for the 8 to overlap (each then counted 10,240 to 20,480 before the fix)."""
    store, records = big_run(tmp_path, steps=20, groups=16, samples=16)
    search = EpisodeSearch(store.run_dir)
    start = threading.Barrier(8)
    results: list[tuple[list, int]] = []

    def first_search() -> None:
        start.wait()
        results.append(search.search(Filters(), "step", 0, 1000))

    threads = [threading.Thread(target=first_search) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = [r["id"] for r in sorted(records, key=SORT_KEY["step"])]
    for matches, total in [*results, search.search(Filters(), "step", 0, 1000)]:
        assert total == len(records) and [m.summary["id"] for m in matches] == expected[:1000]


def test_searches_while_steps_are_indexed_anew_agree_with_a_full_scan(tmp_path):
    """A step indexed anew (a resumed run's) deletes rows under a reader: a search then gave a KeyError or a total
    from two states of the index; each must answer as the index was before or after, whole."""
    store, records = big_run(tmp_path, steps=6)
    search = EpisodeSearch(store.run_dir)
    by_step = {step: [r for r in records if r["step"] == step] for step in range(1, 7)}
    done = threading.Event()

    def reindex() -> None:
        writer = EpisodeSearch(store.run_dir)
        for round_ in range(30):
            step = round_ % 6 + 1
            writer.index_step(step, by_step[step], store.trajectories_dir / trajectory_file_name(step))
        done.set()

    threading.Thread(target=reindex).start()
    filters = Filters(text="alpha")
    expected = [r["id"] for r in sorted(scan(records, filters, set()), key=SORT_KEY["-reward"])]
    while not done.is_set():
        matches, total = search.search(filters, "-reward", 0, 1000)
        assert total == len(expected) and [m.summary["id"] for m in matches] == expected


def test_a_search_during_a_rebuild_says_how_far_and_never_gives_a_partial_total(tmp_path):
    store, records = big_run(tmp_path)
    for path in store.run_dir.glob(SEARCH_FILE + "*"):
        path.unlink()  # a run begun before the index existed, or one whose index was deleted
    search = EpisodeSearch(store.run_dir)
    rebuilt = threading.Thread(target=search.sync)
    rebuilt.start()
    seen = set()
    while rebuilt.is_alive():
        try:
            assert search.search(Filters(), "step", 0, 10)[1] == len(records)
            seen.add("whole")
        except Rebuilding as progress:
            assert 0 <= progress.done <= progress.total == 12
            seen.add("rebuilding")
    rebuilt.join()
    assert search.search(Filters(), "step", 0, 10)[1] == len(records) and "rebuilding" in seen


def damage_index(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        path.write_bytes(random.Random(0).randbytes(len(data)))
    else:  # pages overwritten past the header
        path.write_bytes(data[:8192] + bytes(len(data) - 8192))


@pytest.mark.parametrize("how", ["truncated", "garbage", "zeroed pages"])
def test_a_damaged_index_is_moved_aside_and_rebuilt(tmp_path, how):
    """A corrupted or truncated search.sqlite answered -32603 on every search, forever."""
    store, records = big_run(tmp_path)
    for path in store.run_dir.glob(SEARCH_FILE + "-*"):
        path.unlink()  # the WAL checkpointed into the file by the last connection's close
    damage_index(store.run_dir / SEARCH_FILE, how)
    search = EpisodeSearch(store.run_dir)
    with pytest.raises(IndexDamaged):
        search.search(Filters(), "step", 0, 10)
    search.sync()
    assert (store.run_dir / (SEARCH_FILE + DAMAGED_SUFFIX)).is_file()
    matches, total = search.search(Filters(tool="search"), "step", 0, 1000)
    expected = sorted(scan(records, Filters(tool="search"), set()), key=SORT_KEY["step"])
    assert total == len(expected) and [m.summary["id"] for m in matches] == [r["id"] for r in expected]


def test_torn_and_garbled_trajectory_lines_are_skipped_and_named(tmp_path):
    """A torn trajectory file failed the whole run's search with -32602 (a ValueError)."""
    store, records = big_run(tmp_path, steps=2, groups=1, samples=4)
    path = store.trajectories_dir / trajectory_file_name(2)
    lines = path.read_bytes().splitlines(keepends=True)
    garbled = json.loads(lines[1])
    garbled["status"], garbled["turns"] = "lost", "not turns"
    deep = b"[" * 5000 + b"]" * 5000 + b"\n"
    path.write_bytes(lines[0] + json.dumps(garbled).encode() + b"\n\x00\xff garbage\n" + deep + lines[2][:40])
    search = EpisodeSearch(store.run_dir)
    search.sync()
    matches, total = search.search(Filters(), "step", 0, 100)
    assert [m.summary["id"] for m in matches] == [r["id"] for r in records[:5]]  # step 1's 4 and line 1 of step 2
    name = f"{TRAJECTORIES_DIR}/{trajectory_file_name(2)}"
    found = search.damage()
    assert [line.split(":")[0] for line in found] == [f"{name} line {n}" for n in (2, 3, 4, 5)]
    assert "rpc.schema.json at data/status" in found[0] and found[1].endswith("not a JSON line")


def test_a_damaged_health_line_is_skipped_and_named(tmp_path):
    """A bad health line in the log failed the whole run's search with -32603 (a KeyError)."""
    store, records = big_run(tmp_path, steps=2, groups=1, samples=4)
    add_health(store, 1, "zero_variance_groups")
    log = store.run_dir / EVENTS_FILE
    start = log.stat().st_size
    bad = b'{"seq": 90, "time": 0, "type": "health", "data": {"code": "zero_variance_groups", "step": 2}}\n'
    with log.open("ab") as handle:
        handle.write(bad + b'{"health": ' + b"[" * 5000 + b"]" * 5000 + b"}\n")
    search = EpisodeSearch(store.run_dir)
    search.sync()
    assert search.search(Filters(health_code="zero_variance_groups"), "step", 0, 100)[1] == 4  # step 1 only
    assert [line.split(":")[0] for line in search.damage()] == [
        f"{EVENTS_FILE} at byte {start}",
        f"{EVENTS_FILE} at byte {start + len(bad)}",
    ]


def test_a_nul_in_the_search_text_separates_words(tmp_path):
    """A NUL in the search text answered -32603 (FTS5: unterminated string)."""
    store, records = big_run(tmp_path, steps=1)
    search = EpisodeSearch(store.run_dir)
    both = search.search(Filters(text="alpha\x00beta"), "step", 0, 100)[1]
    assert both == len(scan(records, Filters(text="alpha beta"), set())) > 0
    assert (
        search.search(Filters(text='"alpha\x00'), "step", 0, 100)[1]
        == search.search(Filters(text="alpha"), "step", 0, 100)[1]
    )

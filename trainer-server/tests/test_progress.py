"""A run says what it is doing (agentrl/run/progress.py): its phases, a handful a step, and `stopping` the moment a
graceful stop is asked for, written from the stop's own thread while the step goes on."""

import threading
import time

from agentrl.run.progress import ProgressReporter
from agentrl.run.runstore import RunStore, read_events


def reporter_in(tmp_path, stop=None):
    store = RunStore.create(tmp_path, "r", {}, {"name": "r", "mode": "train"})
    return store, ProgressReporter(store, 5, stop or threading.Event(), "stopping after the step under way")


def said(store):
    return [
        (e["type"], e["data"].get("status") or e["data"].get("phase"), e["data"]) for e in read_events(store.run_dir)
    ]


def test_a_graceful_stop_is_said_at_once_and_every_later_status_stays_stopping(tmp_path):
    store, reporter = reporter_in(tmp_path)
    reporter.working(2)
    reporter.phase("rollouts", 3, 0, 8)
    reporter.request_stop()  # as the SIGTERM handler does, in the middle of step 3
    deadline = time.time() + 5
    while time.time() < deadline and said(store)[-1][1] != "stopping":
        time.sleep(0.01)
    assert said(store)[-1] == (
        "status",
        "stopping",
        {"status": "stopping", "step": 2, "total_steps": 5, "message": "stopping after the step under way"},
    )
    reporter.phase("updating", 3)
    reporter.working(3)  # the step's end: still stopping, not running again
    reporter.end("stopped", 3)
    reporter.phase("checkpointing", 3)  # after the end nothing is written
    assert [(kind, name) for kind, name, _ in said(store)] == [
        ("status", "running"),
        ("phase", "rollouts"),
        ("status", "stopping"),
        ("phase", "updating"),
        ("status", "stopping"),
        ("status", "stopped"),
    ]
    assert [e["seq"] for e in read_events(store.run_dir)] == list(range(1, 7))


def test_a_stop_asked_for_without_a_signal_is_said_at_the_next_phase(tmp_path):
    stop = threading.Event()
    store, reporter = reporter_in(tmp_path, stop)
    stop.set()
    reporter.phase("updating", 1)
    reporter.end("stopped", 1)
    assert [(kind, name) for kind, name, _ in said(store)] == [
        ("phase", "updating"),
        ("status", "stopping"),
        ("status", "stopped"),
    ]


def test_the_episode_count_is_written_at_each_quarter_of_a_step_and_never_twice(tmp_path):
    store, reporter = reporter_in(tmp_path)
    count = reporter.episode_counter(4)
    for done in [0, 3, 8, 8, 9, 17, 31, 32]:  # as an engine reports after each turn: repeats, jumps, the end
        count(done, 32)
    assert [data for _, _, data in said(store)] == [
        {"phase": "rollouts", "step": 4, "done": 8, "total": 32},
        {"phase": "rollouts", "step": 4, "done": 17, "total": 32},
        {"phase": "rollouts", "step": 4, "done": 31, "total": 32},
    ]
    reporter.end("completed", 4)


def test_a_try_runs_four_episodes_are_counted_one_by_one(tmp_path):
    store, reporter = reporter_in(tmp_path)
    count = reporter.episode_counter(0)
    for done in range(5):
        count(done, 4)
    assert [(data["done"], data["total"]) for _, _, data in said(store)] == [(1, 4), (2, 4), (3, 4)]
    reporter.end("completed", 0)

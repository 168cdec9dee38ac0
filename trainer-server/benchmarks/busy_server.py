"""bench_load.py's scenarios of a server busy with its own heavy work (issue #44): how fast a fresh connection's
`initialize` and another client's `run/list` are answered while

- 8 clients search a 100,000-episode run's index at once, again and again (trajectory/search);
- that index is rebuilt (deleted, then rebuilt in the background by the next search);
- a re-roll plays an episode again in its child process (episode/reroll of the tiny example's run);
- 3 runs wait queued behind the server's --max-runs (which run meanwhile).

Goal: each under 100 ms on an idle 2-core machine. Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import random
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

from agentrl.run.episode_search import SEARCH_FILE, EpisodeSearch
from agentrl.run.runstore import RunStore
from bench_search import episode, vocabulary
from server_harness import ServerProcess, example_config

SEARCHED_RUN = "searched"
SEARCHES = [
    {"text": "the"},
    {"status": "error", "sort": "-reward"},
    {"tool": "search", "errorKind": "timeout"},
    {"reward": {"min": 0.9}, "sort": "reward"},
    {"text": "a", "textIn": "observation", "sort": "-response_tokens"},
    {"step": {"min": 100, "max": 900}},
    {"sort": "step", "cursor": "50000"},
    {"text": '"of the"'},
]


def searched_run(runs: Path, episodes: int, per_step: int = 32) -> tuple[str, list[str]]:
    """A run of `episodes` synthetic episodes (bench_search.py's), indexed step by step as the trainer indexes them;
    its id, and its vocabulary (the texts searched for)."""
    rng = random.Random(0)
    words = vocabulary(rng)
    store = RunStore.create(runs, SEARCHED_RUN, {"name": SEARCHED_RUN}, {"name": SEARCHED_RUN, "mode": "train"})
    search = EpisodeSearch(store.run_dir)
    steps = episodes // per_step
    for step in range(1, steps + 1):
        records = [episode(rng, words, step, index // 8, index % 8) for index in range(per_step)]
        search.index_step(step, records, store.write_trajectories(step, records))
    store.append_event("status", {"status": "completed", "step": steps, "total_steps": steps})
    return SEARCHED_RUN, words


def answered_meanwhile(server: ServerProcess, tries: int = 20) -> dict[str, float]:
    """Median and worst of `tries` fresh connections' connect + `initialize`, and of another client's `run/list`."""
    connecting, listing = [], []
    other = server.client()
    for _ in range(tries):
        started = time.perf_counter()
        server.client().close()
        connecting.append(time.perf_counter() - started)
        started = time.perf_counter()
        other.request("run/list", timeout=60)
        listing.append(time.perf_counter() - started)
        time.sleep(0.05)
    other.close()
    return {
        "initialize median ms": statistics.median(connecting) * 1000,
        "initialize worst ms": max(connecting) * 1000,
        "run/list median ms": statistics.median(listing) * 1000,
        "run/list worst ms": max(listing) * 1000,
    }


def while_working(server: ServerProcess, work: Callable[[threading.Event], None], workers: int) -> dict[str, float]:
    stop = threading.Event()
    threads = [threading.Thread(target=work, args=(stop,), daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # the work under way
    try:
        return answered_meanwhile(server)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=120)


def eight_searches(server: ServerProcess, run_id: str) -> dict[str, float]:
    index = iter(range(len(SEARCHES)))
    lock = threading.Lock()

    def search(stop: threading.Event) -> None:
        with lock:
            filters = SEARCHES[next(index)]
        client = server.client()
        while not stop.is_set():
            client.call("trajectory/search", {"runIds": [run_id], **filters}, timeout=120)
        client.close()

    return while_working(server, search, len(SEARCHES))


def index_rebuilt(server: ServerProcess, runs: Path, run_id: str) -> dict[str, float]:
    """The index deleted; the next search starts its rebuild in the background and answers `rebuilding`; 1 when it
    still did after the measurements (they were made while it rebuilt)."""
    for path in (runs / run_id).glob(SEARCH_FILE + "*"):
        path.unlink()
    client = server.client()
    started = client.call("trajectory/search", {"runIds": [run_id], "text": "the"}, timeout=120)
    figures = answered_meanwhile(server)
    still = client.call("trajectory/search", {"runIds": [run_id], "text": "the"}, timeout=120)
    client.close()
    figures["rebuilding throughout"] = float(
        all("rebuilding" in answer.get("result", {}) for answer in (started, still))
    )
    return figures


def during_a_reroll(server: ServerProcess, run_dir: Path) -> dict[str, float]:
    """A re-roll of the run's first episode (its child loads the model and plays on) while the others are answered."""
    record = json.loads((next((run_dir / "trajectories").glob("*.jsonl"))).read_text().splitlines()[0])
    params = {"runId": run_dir.name, "trajectoryId": record["id"], "turn": 0, "edit": "assistant", "text": "key 3"}
    params |= {"policy": "latest", "samples": 4, "temperature": 1.0}
    client = server.client()
    client.ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "episode/reroll", "params": params}))
    started = time.perf_counter()
    time.sleep(1.0)  # its child started, loading
    figures = answered_meanwhile(server)
    while True:  # the re-roll's answer, after its progress notifications
        message = json.loads(client.ws.recv(timeout=300))
        if message.get("id") == 1:
            break
    figures["while the re-roll ran (it took s)"] = time.perf_counter() - started
    figures["re-roll answered"] = float("result" in message)
    client.close()
    return figures


def three_queued(server: ServerProcess, max_runs: int) -> dict[str, float]:
    """max_runs runs started, 3 more waiting for a slot; then every one stopped."""
    client = server.client()
    config = example_config(steps=50)
    ids = [client.request("run/start", {"config": config}, timeout=120)["runId"] for _ in range(max_runs + 3)]
    time.sleep(2.0)
    figures = answered_meanwhile(server)
    infos = [client.request("run/get", {"runId": run_id}) for run_id in ids]
    figures["queued"] = sum(info.get("message", "").startswith("queued:") for info in infos)
    for run_id in reversed(ids):  # the queued ones first, so none starts as another ends
        client.request("run/stop", {"runId": run_id, "mode": "immediate"}, timeout=60)
    client.close()
    return figures


def busy_scenarios(runs: Path, episodes: int, trained_run: Path, max_runs: int) -> dict[str, dict[str, float]]:
    """Every scenario above, against one server of `runs` (which holds `trained_run`, a run of the tiny example)."""
    started = time.perf_counter()
    run_id, _ = searched_run(runs, episodes)
    print(f"wrote and indexed {episodes:,} episodes in {time.perf_counter() - started:.0f} s")
    server = ServerProcess(runs, "--max-runs", str(max_runs))
    figures: dict[str, dict[str, float]] = {}
    try:
        figures["idle"] = answered_meanwhile(server)
        figures[f"8 searches of a {episodes:,}-episode index"] = eight_searches(server, run_id)
        figures["its index rebuilt"] = index_rebuilt(server, runs, run_id)
        figures["a re-roll"] = during_a_reroll(server, trained_run)
        figures[f"3 runs queued ({max_runs} running)"] = three_queued(server, max_runs)
    finally:
        server.stop()
    return figures

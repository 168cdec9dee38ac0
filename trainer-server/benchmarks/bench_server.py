"""Server benchmark: event throughput to one client, and what streaming costs a training step.

    .venv/bin/python trainer-server/benchmarks/bench_server.py [--events 50000] [--steps 12]

Prints figures side by side; it asserts nothing (targets live here, not in timed tests).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from agentrl.run.runstore import RunStore, read_events  # noqa: E402
from server_harness import ServerProcess, example_config, is_final_status  # noqa: E402


def event_throughput(root: Path, count: int) -> float:
    runs = root / "runs"
    store = RunStore.create(runs, "synthetic", {}, {"name": "synthetic", "mode": "train"})
    for i in range(count - 1):
        store.append_event("metrics", {"step": i, "metrics": {"reward/mean": i * 0.001, "loss/policy": 0.1}})
    store.append_event("status", {"status": "completed", "step": count, "total_steps": count})
    server = ServerProcess(runs)
    try:
        client = server.client()
        started = time.perf_counter()
        client.request("run/subscribe", {"runId": "synthetic", "since": 0})
        received = client.events_until("synthetic", is_final_status, timeout=600)
        elapsed = time.perf_counter() - started
        assert len(received) == count
        return count / elapsed
    finally:
        server.stop()


def step_times(root: Path, steps: int, subscribers: int) -> float:
    server = ServerProcess(root / f"runs-{subscribers}")
    try:
        control = server.client()
        run_id = control.request("run/start", {"config": example_config(steps=steps, checkpoint_every=1000)})["runId"]
        watchers = [server.client() for _ in range(subscribers)]
        for watcher in watchers:
            watcher.request("run/subscribe", {"runId": run_id, "since": 0})
        for watcher in watchers:
            watcher.events_until(run_id, is_final_status, timeout=600)
        while control.request("run/get", {"runId": run_id})["status"] not in ("completed", "failed"):
            time.sleep(0.5)
        events = read_events(server.runs_dir / run_id)
        times = [e["data"]["metrics"]["perf/step_time_s"] for e in events if e["type"] == "metrics"]
        return statistics.median(times[1:])  # the first step warms up
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rate = event_throughput(root, args.events)
        alone = step_times(root, args.steps, subscribers=0)
        watched = step_times(root, args.steps, subscribers=3)
    print(
        json.dumps(
            {
                "events": args.events,
                "event_throughput_per_s": round(rate),
                "median_step_time_s_no_client": round(alone, 4),
                "median_step_time_s_three_streaming_clients": round(watched, 4),
                "streaming_overhead_pct": round(100 * (watched - alone) / alone, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()

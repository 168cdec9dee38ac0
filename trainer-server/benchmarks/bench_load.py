"""Server load benchmark: how fast the server answers while it is under attack.

    .venv/bin/python trainer-server/benchmarks/bench_load.py [--events 300000] [--subscribers 20]

Scenarios, one after the other, against one `agentrl serve` and a run of `--events` events (a `metrics` event and 32
`trajectory` events per step):
- idle;
- bombs: two clients upload, again and again, a 6 KB .tar.bz2 that inflates to 1 GiB of zeros (rejected at
  the bundle limit while it streams);
- listing: two clients call run/list and run/get on that run in a loop;
- trajectory queries: eight clients query the run's trajectories at once, again and again, each its own filters,
  sort and page (the first round against a server that never read the run: its index is read then); each
  query's latency, and how fast a ninth client's run/get and a new connection's `initialize` are answered meanwhile;
- silent subscribers: N clients subscribe from seq 0 to the run and never read;
- run starts: twenty run/start calls at once (past the server's --max-runs they wait, queued);
- hanging MCP listings: six clients list the tools of an "MCP server" that never answers;
- the server busy with its own heavy work (busy_server.py: `--episodes`, alone with `--only-busy`): 8 searches of a
  100,000-episode index, that index rebuilt, a re-roll, 3 runs queued; a fresh `initialize` and another client's
  `run/list` meanwhile, goal under 100 ms each on an idle 2-core machine.
For each: the median and worst latency of a fresh connection's `initialize` (connect included, 20 tries), and
the server's resident memory, with the scenario's own figures. Prints figures; it asserts nothing (targets live
here, not in timed tests): each trajectory query under 0.3 s, every other client answered within 0.1 s.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import random
import statistics
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from agentrl.run.runstore import RunStore  # noqa: E402
from server_harness import Client, ServerProcess, example_config  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402


def server_rss_mb(server: ServerProcess) -> float:
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def initialize_latency_ms(server: ServerProcess, tries: int = 20) -> tuple[float, float]:
    latencies = []
    for _ in range(tries):
        started = time.perf_counter()
        client = server.client()  # connects and sends initialize, waits for its answer
        latencies.append((time.perf_counter() - started) * 1000)
        client.close()
        time.sleep(0.05)
    return statistics.median(latencies), max(latencies)


def bomb_archive() -> str:
    """A tar.bz2 of 16 members of 64 MiB of zeros each: 1 GiB inflated, a few KB on the wire."""
    buffer = io.BytesIO()
    zeros = b"\0" * (64 * 2**20)
    with tarfile.open(fileobj=buffer, mode="w:bz2") as archive:
        for index in range(16):
            member = tarfile.TarInfo(f"zeros-{index}.bin")
            member.size = len(zeros)
            archive.addfile(member, io.BytesIO(zeros))
    return base64.b64encode(buffer.getvalue()).decode()


def synthetic_run(runs: Path, events: int) -> str:
    """A completed run of `events` events: per step a `metrics` event and 32 `trajectory` events (4 groups of 8)."""
    rng = random.Random(0)
    store = RunStore.create(runs, "big", {}, {"name": "big", "mode": "train"})
    written = step = 0
    while written < events - 1:
        step += 1
        store.append_event("metrics", {"step": step, "metrics": {"reward/mean": 0.5, "loss/policy": 0.1}})
        written += 1
        for index in range(min(32, events - 1 - written)):
            group, sample = divmod(index, 8)
            summary = {
                "id": f"{step}-{group}-{sample}",
                "step": step,
                "group": group,
                "sample": sample,
                "task_id": f"task-{step}-{group}",
                "status": rng.choice(["finished", "finished", "truncated", "error"]),
                "reward": rng.random(),
                "advantage": None,
                "num_turns": 2,
                "num_tool_calls": 1,
                "num_tool_errors": rng.choice([0, 0, 1]),
                "response_tokens": rng.randint(1, 300),
                "file": f"trajectories/step-{step:06d}.trajectories.jsonl",
            }
            store.append_event("trajectory", summary)
            written += 1
    store.append_event("status", {"status": "completed", "step": step, "total_steps": step})
    return "big"


def latencies_ms(samples: list[float]) -> dict[str, float]:
    return {"median ms": statistics.median(samples) * 1000, "worst ms": max(samples) * 1000}


def raw_request(client: Client, method: str, params: dict) -> dict:
    """A request answered, as the server sent it: a big answer is not checked against the schema (the harness's
    check would take longer than the server took to answer)."""
    client.ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
    answer = json.loads(client.ws.recv(timeout=120))
    if "result" not in answer:
        raise RuntimeError(f"{method} failed: {answer}")
    return answer["result"]


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def trajectory_queries(server: ServerProcess, run_id: str, steps: int, clients: int = 8, rounds: int = 10) -> dict:
    """`clients` clients query at once, `rounds` times each; a ninth calls run/get meanwhile."""
    queries = [
        {"sort": "-reward", "limit": 100},
        {"step": steps // 2},
        {"status": "error", "hasToolError": True, "sort": "response_tokens", "cursor": "20000"},
        {"sort": "reward", "limit": 1000, "cursor": "150000"},
        {"hasToolError": False, "sort": "-response_tokens"},
        {"status": "truncated"},
        {"step": steps - 1, "sort": "-reward"},
        {"sort": "step", "cursor": "280000"},
    ]
    connected = [server.client() for _ in range(clients)]
    first_round: list[float] = []
    every: list[float] = []
    start = threading.Barrier(clients)

    def query(index: int) -> None:
        params = {"runId": run_id, **queries[index % len(queries)]}
        start.wait()
        for round_ in range(rounds):
            took = timed(lambda: raw_request(connected[index], "trajectory/query", params))
            (first_round if round_ == 0 else every).append(took)

    other = server.client()
    beside: list[float] = []
    threads = [threading.Thread(target=query, args=(index,)) for index in range(clients)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        beside.append(timed(lambda: other.request("run/get", {"runId": run_id})))
        time.sleep(0.02)
    for thread in threads:
        thread.join()
    for client in [*connected, other]:
        client.close()
    median, worst = initialize_latency_ms(server)
    return {
        "first round worst ms": max(first_round) * 1000,
        **{f"query {key}": value for key, value in latencies_ms(every).items()},
        **{f"run/get {key}": value for key, value in latencies_ms(beside).items()},
        "initialize median ms": median,
        "initialize worst ms": worst,
        "server RSS MB": server_rss_mb(server),
    }


def run_starts(server: ServerProcess, count: int = 20) -> dict:
    """`count` run/start calls at once; then every run is stopped."""
    client = server.client()
    started = time.perf_counter()
    ids = []
    for _ in range(count):
        ids.append(client.request("run/start", {"config": example_config(steps=50)}, timeout=120)["runId"])
    answered = time.perf_counter() - started
    median, worst = initialize_latency_ms(server)
    infos = [client.request("run/get", {"runId": run_id}) for run_id in ids]
    waiting = sum(info.get("message", "").startswith("queued:") for info in infos)  # past --max-runs
    figures = {
        "all answered s": answered,
        "started": len(infos) - waiting,
        "waiting for a slot": waiting,
        "initialize median ms": median,
        "initialize worst ms": worst,
        "server RSS MB": server_rss_mb(server),
    }
    for run_id in reversed(ids):  # the queued ones first, so none starts as another ends
        client.request("run/stop", {"runId": run_id, "mode": "immediate"}, timeout=60)
    client.close()
    return figures


def hanging_mcp_listings(server: ServerProcess, count: int = 6) -> dict:
    """`count` clients list the tools of an MCP server that never answers; measured while they hang (the server
    ends them at its listing timeout, or when it stops)."""
    entry = {"name": "hangs", "command": sys.executable, "args": ["-c", "import time; time.sleep(600)"]}
    before = server_rss_mb(server)
    hanging = [server.client() for _ in range(count)]
    for client in hanging:
        client.ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "mcp/listTools", "params": {"server": entry}}))
    time.sleep(3.0)  # every listing has started (two at a time) or waits for a slot
    other = server.client()
    listing = [timed(lambda: other.request("run/list")) for _ in range(20)]
    median, worst = initialize_latency_ms(server)
    figures = {
        **{f"run/list {key}": value for key, value in latencies_ms(listing).items()},
        "initialize median ms": median,
        "initialize worst ms": worst,
        "server RSS MB": server_rss_mb(server),
        "RSS MB added": server_rss_mb(server) - before,
    }
    for client in [*hanging, other]:
        client.close()
    return figures


def under(load: Callable[[threading.Event], None], workers: int, server: ServerProcess) -> dict[str, float]:
    stop = threading.Event()
    threads = [threading.Thread(target=load, args=(stop,), daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # let the load build up
    try:
        median, worst = initialize_latency_ms(server)
        return {"initialize median ms": median, "initialize worst ms": worst, "server RSS MB": server_rss_mb(server)}
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--subscribers", type=int, default=20)
    parser.add_argument("--episodes", type=int, default=100_000, help="of the searched run (busy_server.py)")
    parser.add_argument("--only-busy", action="store_true", help="only busy_server.py's scenarios")
    args = parser.parse_args()
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        figures |= busy(Path(folder) / "busy", args.episodes)
    if args.only_busy:
        report(figures)
        return
    with tempfile.TemporaryDirectory() as folder:
        runs = Path(folder) / "runs"
        started = time.perf_counter()
        run_id = synthetic_run(runs, args.events)
        print(f"wrote a run of {args.events:,} events in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        archive = bomb_archive()
        server = ServerProcess(runs)
        try:
            median, worst = initialize_latency_ms(server)
            figures["idle"] = {
                "initialize median ms": median,
                "initialize worst ms": worst,
                "server RSS MB": server_rss_mb(server),
            }

            def bombs(stop: threading.Event) -> None:
                client = server.client()
                while not stop.is_set():
                    client.call("env/upload", {"name": "bomb", "archive": archive}, timeout=120)
                client.close()

            figures["2 clients uploading bombs"] = under(bombs, 2, server)

            def listing(stop: threading.Event) -> None:
                client = server.client()
                while not stop.is_set():
                    client.request("run/list")
                    client.request("run/get", {"runId": run_id})
                client.close()

            figures[f"2 clients listing a {args.events:,}-event run"] = under(listing, 2, server)
            figures["8 clients querying trajectories"] = trajectory_queries(server, run_id, steps=args.events // 33)

            before = server_rss_mb(server)
            silent = [server.client(ping_interval=None) for _ in range(args.subscribers)]  # they answer no ping
            for client in silent:  # subscribe, then never read again
                client.ws.send(
                    json.dumps(
                        {"jsonrpc": "2.0", "id": 1, "method": "run/subscribe", "params": {"runId": run_id, "since": 0}}
                    )
                )
            time.sleep(5.0)
            median, worst = initialize_latency_ms(server)
            after = server_rss_mb(server)
            figures[f"{args.subscribers} silent subscribers"] = {
                "initialize median ms": median,
                "initialize worst ms": worst,
                "server RSS MB": after,
                "RSS MB per silent subscriber": (after - before) / args.subscribers,
            }
            for client in silent:
                try:
                    client.close()
                except ConnectionClosed:
                    pass  # the server dropped it: it answered no keepalive ping while it did not read
            figures["20 run starts"] = run_starts(server)
            figures["6 hanging MCP listings"] = hanging_mcp_listings(server)
        finally:
            server.stop()
    report(figures)


def busy(runs: Path, episodes: int) -> dict[str, dict[str, float]]:
    """busy_server.py's scenarios, with a run of the tiny example to re-roll (one step: its trajectories, a checkpoint),
    2 runs at once as on 2 cores."""
    from agentrl.run.trainer import train
    from busy_server import busy_scenarios
    from conftest import EXAMPLE_CONFIG
    from test_train import example

    trained = train(example("train.steps=1"), runs_dir=runs, config_base_dir=EXAMPLE_CONFIG.parent, progress=False)
    return busy_scenarios(runs, episodes, trained, max_runs=2)


def report(figures: dict[str, dict[str, float]]) -> None:
    for name, values in figures.items():
        print(f"  {name}\n    " + "  ".join(f"{key} {value:,.1f}" for key, value in values.items()))


if __name__ == "__main__":
    main()

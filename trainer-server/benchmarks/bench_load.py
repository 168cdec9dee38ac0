"""Server load benchmark: how fast a new client's `initialize` is answered while the server is under attack.

    .venv/bin/python trainer-server/benchmarks/bench_load.py [--events 300000] [--subscribers 20]

Scenarios, one after the other, against one `agentrl serve`:
- idle;
- bombs: two clients upload, again and again, a 6 KB .tar.bz2 that inflates to 1 GiB of zeros (rejected at
  the bundle limit while it streams);
- silent subscribers: N clients subscribe from seq 0 to a run of `--events` events and never read;
- listing: two clients call run/list and run/get on that run in a loop.
For each: the median and worst latency of a fresh connection's `initialize` (connect included, 20 tries), and
the server's resident memory; for the silent subscribers also the memory each one costs. Prints figures; it
asserts nothing (targets live here, not in timed tests).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
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
from server_harness import ServerProcess  # noqa: E402
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
    store = RunStore.create(runs, "big", {}, {"name": "big", "mode": "train"})
    for index in range(events - 1):
        store.append_event("metrics", {"step": index, "metrics": {"reward/mean": index * 1e-6, "loss/policy": 0.1}})
    store.append_event("status", {"status": "completed", "step": events, "total_steps": events})
    return "big"


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
    args = parser.parse_args()
    figures: dict[str, dict[str, float]] = {}
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
        finally:
            server.stop()
    for name, values in figures.items():
        print(f"  {name:40s} " + "  ".join(f"{key} {value:,.1f}" for key, value in values.items()))


if __name__ == "__main__":
    main()

"""Episode search benchmark: trajectory/search's index over a run of many episodes.

    .venv/bin/python trainer-server/benchmarks/bench_search.py [--episodes 100000] [--per-step 32]

Writes a run of `--episodes` synthetic episodes (`--per-step` a step; 1-4 turns each, each turn's text a few dozen
words from a 5,000-word vocabulary, 0-2 tool calls a turn of which a tenth fail), indexing each step as the trainer
does when it records it. Prints, side by side:
- what the trainer pays per step to index it, and the index's size beside the trajectory files';
- what a server pays to index the same run from its files alone (a run begun before the index existed);
- a reader's first query, which reads the episodes' columns into memory;
- each query's latency (median and worst of 20, with the server's sync before each, as trajectory/search does),
  for: no filter; a rare word; two common words; a phrase; a tool and an error kind; a reward range sorted by
  reward; a text search limited to observations, sorted by response length; a health code's steps.
Asserts nothing: the target (each query under 0.3 s at 100,000 episodes) is read here, not in a timed test.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from agentrl.run.episode_search import SEARCH_FILE, EpisodeSearch, Filters, Range
from agentrl.run.runstore import RunStore

TOOLS = ["search", "lookup", "calculator", "open_page", "click"]
ERROR_KINDS = ["exception", "timeout", "bad_json", "unknown_tool", "schema"]


def vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size)]


def episode(rng: random.Random, words: list[str], step: int, group: int, sample: int) -> dict:
    def text(n: int) -> str:
        # Zipf-like: a few words are everywhere, most are rare, as in real text.
        return " ".join(words[min(int(rng.paretovariate(1.1)) - 1, len(words) - 1)] for _ in range(n))

    turns = []
    for index in range(rng.randint(1, 4)):
        calls = [
            {"name": rng.choice(TOOLS), "error_kind": rng.choice(ERROR_KINDS) if rng.random() < 0.1 else None}
            for _ in range(rng.randint(0, 2))
        ]
        turns.append(
            {"index": index, "assistant": text(rng.randint(10, 60)), "tool_calls": calls, "observation": text(30)}
        )
    return {
        "id": f"s{step}-g{group}-n{sample}",
        "step": step,
        "group": group,
        "sample": sample,
        "task_id": f"t{group}",
        "status": rng.choice(["finished"] * 8 + ["truncated", "error"]),
        "reward": round(rng.random(), 3),
        "advantage": None,
        "turns": turns,
        "stats": {
            "num_turns": len(turns),
            "num_tool_calls": sum(len(t["tool_calls"]) for t in turns),
            "num_tool_errors": sum(c["error_kind"] is not None for t in turns for c in t["tool_calls"]),
            "response_tokens": rng.randint(20, 800),
        },
    }


def timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--per-step", type=int, default=32)
    args = parser.parse_args()
    rng = random.Random(0)
    words = vocabulary(rng)
    folder = Path(tempfile.mkdtemp(prefix="bench-search-"))
    try:
        store = RunStore.create(folder, "bench", {"name": "bench"}, {"name": "bench", "mode": "train"})
        search = EpisodeSearch(store.run_dir)
        steps = args.episodes // args.per_step
        index_times = []
        for step in range(1, steps + 1):
            records = [episode(rng, words, step, i // 8, i % 8) for i in range(args.per_step)]
            path = store.write_trajectories(step, records)
            index_times.append(timed(lambda: search.index_step(step, records, path)))
            if step % 10 == 0:
                alert = {"code": "zero_variance_groups", "severity": "warning", "resolved": False, "step": step}
                store.append_event(
                    "health",
                    {**alert, "since_step": step, "message": "", "fix": "", "metrics": {}, "trajectory_ids": []},
                )
        files = sum(p.stat().st_size for p in store.trajectories_dir.iterdir())
        index = sum(p.stat().st_size for p in store.run_dir.glob(SEARCH_FILE + "*"))
        print(f"run: {steps * args.per_step} episodes in {steps} steps ({files / 2**20:.0f} MiB of trajectory files)")
        print(
            f"trainer, indexing each step as it records it: median {statistics.median(index_times) * 1000:.1f} ms, "
            f"worst {max(index_times) * 1000:.1f} ms a step; index {index / 2**20:.0f} MiB "
            f"({index / files:.2f}x the trajectory files)"
        )
        for path in store.run_dir.glob(SEARCH_FILE + "*"):
            path.unlink()
        rebuilt = EpisodeSearch(store.run_dir)
        print(f"server, indexing the run from its files alone (once): {timed(rebuilt.sync):.1f} s")

        common = words[0]
        rare = words[100]  # in about 1% of the episodes
        queries = {
            "no filter, by step": (Filters(), "step"),
            f"a rare word ({rare})": (Filters(text=rare), "step"),
            f"two common words ({common} {words[1]})": (Filters(text=f"{common} {words[1]}"), "step"),
            f'a phrase ("{common} {words[2]}")': (Filters(text=f'"{common} {words[2]}"'), "step"),
            "tool search failed with timeout": (Filters(tool="search", error_kind="timeout"), "step"),
            "reward 0.9-1.0, by -reward": (Filters(reward=Range(0.9, 1.0)), "-reward"),
            "a word in observations, by -response_tokens": (
                Filters(text=words[3], text_in="observation"),
                "-response_tokens",
            ),
            "health code's steps, errors only": (Filters(health_code="zero_variance_groups", status="error"), "step"),
        }
        server_side = EpisodeSearch(store.run_dir)
        first_query = timed(lambda: server_side.search(Filters(text=common), "step", 0, 100))
        print(f"a reader's first query (it reads the index's columns once): {first_query * 1000:.0f} ms")
        print(f"{'query':55} {'matches':>8} {'median ms':>10} {'worst ms':>9}")
        for name, (filters, sort) in queries.items():
            latencies = []
            for _ in range(20):
                start = time.perf_counter()
                server_side.sync()
                _, total = server_side.search(filters, sort, 0, 100)
                latencies.append(time.perf_counter() - start)
            print(f"{name:55} {total:>8} {statistics.median(latencies) * 1000:>10.1f} {max(latencies) * 1000:>9.1f}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""The shortest way to the coin in each CoinCollector game: what "finding the coin sooner" is measured against.

The mean steps of the games an agent solves rise as it learns to solve games whose coin lies farther away, and the
games an untrained agent already solves are mostly a coin in sight (1 step, nothing to shorten), so neither that
mean nor its change over the games solved before and after says whether the agent finds the coin sooner. Each
success's steps over its game's shortest path do: 0 where the agent walked straight to the coin.

TextWorldExpress's gold path is an exploration walk, not a shortest path, so each game is searched here
breadth-first over its rooms, the game replayed from its seed for every path (a game is fixed by its seed and its
settings). Its shortest path is the moves to the coin's room, then `take coin`. The figures are cached in
results/coin_shortest.json with the settings they hold for; other settings are searched again.

    .venv/bin/python results/coin_shortest.py [--limit 200]   # the recipe's first 200 held-out games
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
from collections import deque
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / "coin_shortest.json"
RECIPE = HERE.parent / "trainer-server" / "agentrl" / "recipes" / "textworld" / "coin_grpo.agentrl.yaml"
TAKE = "take coin"


def game_settings(config) -> dict:
    """What fixes the games, besides each task's seed: the env's factory, its arguments, its set-up calls and the
    arguments of every reset."""
    gym = config.env.gym
    return {"factory": gym.factory, "args": gym.args, "setup": gym.setup, "reset_args": gym.reset_args}


def _made(settings: dict):
    module, _, name = settings["factory"].partition(":")
    env = getattr(importlib.import_module(module), name)(**settings["args"])
    for method, arguments in settings["setup"].items():
        getattr(env, method)(**arguments)
    return env


def _room(info: dict) -> str:
    return info["look"].split(".", 1)[0]  # "You are in the kitchen"


def shortest_path(env, task: dict, reset_args: dict) -> int | None:
    """The fewest actions from the start to the coin taken, or None where no room holds it."""

    def replay(path: list[str]) -> dict:
        _, info = env.reset(seed=task["seed"], **{**reset_args, **task.get("reset_args", {})})
        for action in path:
            info = env.step(action)[-1]
        return info

    start = replay([])
    seen, frontier = {_room(start)}, deque([([], start)])
    while frontier:
        path, info = frontier.popleft()
        if TAKE in info["validActions"]:
            return len(path) + 1
        for action in sorted(a for a in info["validActions"] if a.startswith("move ")):
            reached = replay([*path, action])
            if _room(reached) not in seen:
                seen.add(_room(reached))
                frontier.append(([*path, action], reached))
    return None


def shortest_paths(config, tasks: list[dict]) -> dict[str, int | None]:
    """Each task's shortest path by task id, from the cache where it holds these settings and these tasks."""
    settings = game_settings(config)
    cached = json.loads(CACHE.read_text()) if CACHE.exists() else {}
    known = cached.get("shortest", {}) if cached.get("settings") == settings else {}
    missing = [task for task in tasks if task["id"] not in known]
    if missing:
        env = _made(settings)
        try:
            known.update({task["id"]: shortest_path(env, task, settings["reset_args"]) for task in missing})
        finally:
            env.close()
        CACHE.write_text(json.dumps({"settings": settings, "shortest": known}, indent=1) + "\n")
    return {task["id"]: known[task["id"]] for task in tasks}


def over_shortest(steps_by_solved_task: dict[str, int], shortest: dict[str, int | None]) -> list[int]:
    """Each solved game's steps beyond its shortest path (0: straight to the coin)."""
    return [steps - shortest[task] for task, steps in steps_by_solved_task.items()]


def change_ci95(before: list[float], after: list[float], resamples: int = 10_000, seed: int = 0) -> list[float]:
    """A 95% bootstrap CI of mean(after) - mean(before) for two independent samples (the solved games differ)."""
    rng = random.Random(seed)
    differences = sorted(
        sum(rng.choices(after, k=len(after))) / len(after) - sum(rng.choices(before, k=len(before))) / len(before)
        for _ in range(resamples)
    )
    return [differences[int(0.025 * resamples)], differences[int(0.975 * resamples) - 1]]


def main() -> None:
    from agentrl.contract.config import load_config, resolve_paths

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=200, help="the first N held-out games (default 200)")
    args = parser.parse_args()
    config = resolve_paths(load_config(RECIPE, []), RECIPE.parent)
    tasks = [json.loads(line) for line in Path(config.data.eval).read_text().splitlines()[: args.limit]]
    found = shortest_paths(config, tasks)
    lengths = sorted({n for n in found.values() if n is not None})
    print({n: sum(1 for v in found.values() if v == n) for n in lengths}, "games by shortest path")


if __name__ == "__main__":
    main()

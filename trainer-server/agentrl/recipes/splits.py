"""Generated recipes' train and held-out splits: tasks drawn from a seeded generator, the held-out split from
another seed with every task whose key occurs in training left out, each written as JSON Lines."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

Task = dict[str, Any]


def generate(
    make_task: Callable[[random.Random], Task],
    key: Callable[[Task], str],
    count: int,
    seed: int,
    exclude: set[str] | frozenset[str] = frozenset(),
) -> list[Task]:
    """`count` tasks of distinct keys, none in `exclude`, each with an id naming its seed."""
    rng, tasks, seen = random.Random(seed), [], set(exclude)
    while len(tasks) < count:
        task = make_task(rng)
        if key(task) not in seen:
            seen.add(key(task))
            tasks.append({"id": f"s{seed}-{len(tasks)}", **task})
    return tasks


def write_splits(folder: Path, train: list[Task], heldout: list[Task]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, tasks in (("train.jsonl", train), ("heldout.jsonl", heldout)):
        with open(folder / name, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(t) + "\n" for t in tasks)

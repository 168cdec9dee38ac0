"""Task records: the JSON Lines files named by data.train, data.eval and `agentrl eval --data`, one JSON object a
line; each object is what `ToolEnv.reset(task)` receives. And the order in which a run takes its data, step by step."""

from __future__ import annotations

import json
import random
from typing import Any, TypeVar

T = TypeVar("T")


def load_tasks(path: str, limit: int | None) -> list[dict[str, Any]]:
    tasks = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{number}: not a JSON object ({err.msg})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{number}: a task record must be a JSON object")
            tasks.append(record)
            if limit and len(tasks) >= limit:
                break
    if not tasks:
        raise ValueError(f"{path}: no task records")
    return tasks


def items_for_step(items: list[T], step: int, per_step: int, seed: int, shuffle: bool) -> list[T]:
    """Step `step`'s share of a run's data (tasks to roll out, or an sft run's episodes): the next `per_step` items of
    an endless sequence of epochs, epoch e a shuffle seeded by (seed, e). So a resumed run, knowing only its step,
    takes exactly what an unbroken one would."""
    chosen = []
    for position in range((step - 1) * per_step, step * per_step):
        epoch, index = divmod(position, len(items))
        order = list(range(len(items)))
        if shuffle:
            random.Random(seed * 1_000_003 + epoch).shuffle(order)
        chosen.append(items[order[index]])
    return chosen

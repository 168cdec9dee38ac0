"""Task records: the JSON Lines files named by data.train, data.eval and `agentrl eval --data`, one JSON object a
line; each object is what `ToolEnv.reset(task)` receives."""

from __future__ import annotations

import json
from typing import Any


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

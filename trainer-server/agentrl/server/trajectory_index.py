"""Where each trajectory's record sits in its step file, so `trajectory/get` reads only the records it returns.

A step file only grows: the trainer appends records, and a resumed run appends a superseded trajectory again (the
latest line of an id is its record). So a file's index extends from where it stopped, and each line is indexed
once, however many requests read the file.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

# How every record line begins (agentrl/rollout/episode.py writes schema_version first, then id).
_ID_PREFIX = re.compile(rb'\{"schema_version": \d+, "id": "([^"\\]*)"')


class TrajectoryIndex:
    def __init__(self) -> None:
        self._files: dict[Path, tuple[int, dict[str, tuple[int, int]]]] = {}  # bytes indexed, id -> (offset, length)
        self._lock = threading.Lock()  # requests read files in worker threads

    def _offsets(self, path: Path) -> dict[str, tuple[int, int]]:
        with self._lock:
            indexed, offsets = self._files.get(path, (0, {}))
            size = path.stat().st_size
            if size > indexed:
                with path.open("rb") as handle:
                    handle.seek(indexed)
                    data = handle.read(size - indexed)
                complete = data.rfind(b"\n") + 1  # a line still being written is indexed next time
                position = indexed
                for line in data[:complete].splitlines(keepends=True):
                    match = _ID_PREFIX.match(line)
                    trajectory_id = match.group(1).decode() if match else json.loads(line)["id"]
                    offsets[trajectory_id] = (position, len(line))
                    position += len(line)
                self._files[path] = (indexed + complete, offsets)
            return dict(offsets)

    def records(self, path: Path, ids: list[str]) -> dict[str, dict[str, Any]]:
        """The records of those `ids` the file holds (the latest of each), read from their offsets."""
        offsets = self._offsets(path)
        found = {}
        with path.open("rb") as handle:
            for trajectory_id in dict.fromkeys(ids):
                if trajectory_id in offsets:
                    offset, length = offsets[trajectory_id]
                    handle.seek(offset)
                    found[trajectory_id] = json.loads(handle.read(length))
        return found

    def all_records(self, path: Path) -> list[dict[str, Any]]:
        """Every trajectory of the file, the latest record of each, in the order they were written."""
        offsets = self._offsets(path)
        ordered = sorted(offsets, key=lambda trajectory_id: offsets[trajectory_id][0])
        found = self.records(path, ordered)
        return [found[trajectory_id] for trajectory_id in ordered]

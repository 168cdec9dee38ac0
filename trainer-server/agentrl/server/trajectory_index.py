"""Where each trajectory's record sits in its step file, so `trajectory/get` reads only the records it returns.

A step file only grows: the trainer appends records, and a resumed run appends a superseded trajectory again (the
latest line of an id is its record). So a file's index extends from where it stopped, and each line is indexed
once, however many requests read the file. A damaged line (not a JSON object with a string id) is not indexed, nor
returned: a damaged file answers with the records it still holds. A record is not checked against
trajectory.schema.json as it is read (~10 ms a record: seconds for a step), so one whose insides were garbled into
other valid JSON is returned as the file holds it; the replay shows it as text. A record played again (tool/rerun,
episode/reroll: one at a time) is checked first, `replayable`: a None, list or object where the record holds text
would otherwise reach the tokenizer or a parser and fail as a TypeError that names nothing.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from pathlib import Path
from typing import Any, BinaryIO

from agentrl.contract.files_inside import open_inside, parse_json
from agentrl.contract.schemas import file_validator
from agentrl.server import protocol as p

log = logging.getLogger("agentrl.server")
_TRAJECTORY = file_validator("trajectory.schema.json")

# How every record line begins (agentrl/rollout/episode.py writes schema_version first, then id).
_ID_PREFIX = re.compile(rb'\{"schema_version": \d+, "id": "([^"\\]*)"')


class TrajectoryIndex:
    def __init__(self) -> None:
        self._files: dict[Path, tuple[int, dict[str, tuple[int, int]]]] = {}  # bytes indexed, id -> (offset, length)
        self._lock = threading.Lock()  # requests read files in worker threads

    def _offsets(self, path: Path) -> dict[str, tuple[int, int]]:
        with self._lock:
            indexed, offsets = self._files.get(path, (0, {}))
            handle = _open_step_file(path)
            if handle is None:
                return {}
            with handle:
                size = os.fstat(handle.fileno()).st_size
                handle.seek(indexed)
                data = handle.read(size - indexed) if size > indexed else b""
            if size > indexed:
                complete = data.rfind(b"\n") + 1  # a line still being written is indexed next time
                position = indexed
                for line in data[:complete].splitlines(keepends=True):
                    trajectory_id = _line_id(line)
                    if trajectory_id is not None:
                        offsets[trajectory_id] = (position, len(line))
                    position += len(line)
                self._files[path] = (indexed + complete, offsets)
            return dict(offsets)

    def forget(self, run_dir: Path) -> None:
        """Drops what is known of the files of a run that was deleted (run/delete)."""
        with self._lock:
            for path in [path for path in self._files if path.is_relative_to(run_dir)]:
                del self._files[path]

    def records(self, path: Path, ids: list[str]) -> dict[str, dict[str, Any]]:
        """The records of those `ids` the file holds (the latest of each), read from their offsets."""
        offsets = self._offsets(path)
        found: dict[str, dict[str, Any]] = {}
        handle = _open_step_file(path) if offsets else None
        if handle is None:
            return found
        with handle:
            for trajectory_id in dict.fromkeys(ids):
                if trajectory_id in offsets:
                    offset, length = offsets[trajectory_id]
                    handle.seek(offset)
                    record = _record(handle.read(length))
                    if isinstance(record, str):
                        log.warning(
                            "skipped the damaged trajectory %s at byte %d of %s: %s",
                            trajectory_id,
                            offset,
                            path,
                            record,
                        )
                    else:
                        found[trajectory_id] = record
        return found

    def all_records(self, path: Path) -> list[dict[str, Any]]:
        """Every trajectory of the file, the latest record of each, in the order they were written."""
        offsets = self._offsets(path)
        ordered = sorted(offsets, key=lambda trajectory_id: offsets[trajectory_id][0])
        found = self.records(path, ordered)
        return [found[trajectory_id] for trajectory_id in ordered if trajectory_id in found]


def replayable(record: dict[str, Any]) -> dict[str, Any]:
    """`record`, when trajectory.schema.json holds for it; else TRAJECTORY_NOT_FOUND naming where it is damaged."""
    problem = next(_TRAJECTORY.iter_errors(record), None)
    if problem is None:
        return record
    where = "/".join(map(str, problem.absolute_path)) or "the top level"
    raise p.RpcError(
        p.TRAJECTORY_NOT_FOUND,
        f"trajectory {record['id']}'s record is damaged at {where} ({problem.message[:200]}): it cannot be played "
        "again",
    )


def _open_step_file(path: Path) -> BinaryIO | None:
    """The step file, never through a link nor a FIFO planted in its place: None when there is none, or it is
    refused or unreadable (logged), so that it reads as holding no records, as a damaged line holds none."""
    try:
        return open_inside(path.parent, path.name, None)
    except FileNotFoundError:
        return None
    except OSError as err:
        log.warning("skipped the trajectories of %s: %s", path, err)
        return None


def _line_id(line: bytes) -> str | None:
    match = _ID_PREFIX.match(line)
    if match:
        return match.group(1).decode("utf-8", "replace")
    try:
        record = parse_json(line)
    except ValueError:  # UnicodeDecodeError is one, and so is nesting too deep (parse_json)
        return None
    return record["id"] if isinstance(record, dict) and isinstance(record.get("id"), str) else None


def _record(line: bytes) -> dict[str, Any] | str:
    """A record as the file holds it, or what is wrong with the line."""
    try:
        record = parse_json(line)
    except ValueError:
        return "not a JSON line"
    if not isinstance(record, dict) or not isinstance(record.get("id"), str):
        return "not a JSON object with a string id"
    return record

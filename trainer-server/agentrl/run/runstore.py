"""The run folder: the one place a run's history lives (layout: protocol/README.md).

Writers append; nothing is rewritten. A checkpoint is complete or absent: it is written to a
temporary folder and renamed. A reader tolerates a torn last line (a crash mid-write): it is
ignored until it is completed, never returned half.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from agentrl.contract.files_inside import (
    RefusedFile,
    folder_to_write,
    is_plain_file,
    is_plain_folder,
    open_inside,
    open_own_file,
    open_to_write,
    parse_json,
    read_inside,
    read_json_inside,
    replace_file,
)
from agentrl.contract.schemas import RUN_ID_MAX_LENGTH, RUN_ID_PATTERN, check_event, load_schema
from agentrl.run.log_lines import MAX_EVENT_LINE_BYTES, complete_lines, overlong

MAX_CHECKPOINT_STATE_BYTES = 16 * 2**20  # state.json: a step, a seq and the health monitor's few numbers
EVENTS_FILE = "events.jsonl"
RUN_FILE = "run.json"
CONFIG_FILE = "config.yaml"
PID_FILE = "pid"
EXPORTS_DIR = "exports"  # what run/export and `agentrl export-trajectories` write, by default
MAX_RUN_RECORD_BYTES = 2**20  # run.json: a name, a mode, when, a few fields
TRAJECTORIES_DIR = "trajectories"  # a step's trajectory records: TRAJECTORIES_DIR/trajectory_file_name(step)
# Where each `trajectory` event of events.jsonl sits, with the figures trajectory/query filters and sorts by, a
# fixed-size row per event, appended right after the event's line (run/trajectory_summaries.py reads it).
TRAJECTORY_INDEX_FILE = "trajectory-index.bin"
# The row's own position in the file (a row lost or repeated shows), the offset and length of the event's line in
# events.jsonl, step, group, sample, status (its position in the schema's enum), num_tool_errors, response_tokens,
# reward: all 8 bytes, so the file reads as one array.
TRAJECTORY_INDEX_ROW = struct.Struct("<9qd")
TRAJECTORY_STATUSES: tuple[str, ...] = tuple(
    load_schema("rpc.schema.json")["$defs"]["trajectorySummary"]["properties"]["status"]["enum"]
)

# The orders trajectory/query and trajectory/search list a run's episodes in: the figure each sorts by and whether
# larger comes first. Ties go by id (step, group, sample), in the sort's direction.
EPISODE_SORTS = {
    "step": ("step", False),
    "reward": ("reward", False),
    "-reward": ("reward", True),
    "response_tokens": ("response_tokens", False),
    "-response_tokens": ("response_tokens", True),
}


def trajectory_index_values(position: int, offset: int, length: int, summary: dict[str, Any]) -> tuple[Any, ...]:
    """The fields of index row `position`: the `trajectory` event whose line starts at byte `offset` of events.jsonl."""
    return (
        position,
        offset,
        length,
        summary["step"],
        summary["group"],
        summary["sample"],
        TRAJECTORY_STATUSES.index(summary["status"]),
        summary["num_tool_errors"],
        summary["response_tokens"],
        summary["reward"],
    )


def trajectory_index_row(position: int, offset: int, length: int, summary: dict[str, Any]) -> bytes:
    return TRAJECTORY_INDEX_ROW.pack(*trajectory_index_values(position, offset, length, summary))


def new_run_id(name: str) -> str:
    """NAME-TIMESTAMP-RANDOM, with NAME made of the name's ASCII letters, digits, '-' and '_' (anything else becomes
    '-') and never starting with '-' or '_' (an argument parser reads a leading '-' as an option): a valid run id
    (`check_run_id`) whatever the run's name."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    safe = "".join(ch if (ch.isascii() and ch.isalnum()) or ch in "-_" else "-" for ch in name)[:40].lstrip("-_")
    return check_run_id(f"{safe or 'run'}-{stamp}-{uuid.uuid4().hex[:6]}")


def check_run_id(run_id: str) -> str:
    """`run_id` if it is a valid run id (rpc.schema.json's `$defs/runId`: it names a folder directly inside a runs
    folder, never `..`, a path or a name an argument parser takes for an option); else ValueError saying why."""
    if not isinstance(run_id, str) or len(run_id) > RUN_ID_MAX_LENGTH or not re.fullmatch(RUN_ID_PATTERN, run_id):
        raise ValueError(
            f"{run_id!r} is not a run id: ASCII letters, digits, '-' and '_', starting with a letter or digit, "
            f"at most {RUN_ID_MAX_LENGTH} characters"
        )
    return run_id


def run_folder(runs_dir: Path, run_id: str) -> Path:
    """The folder of run `run_id` in `runs_dir`: ValueError for an invalid id or a link planted in its place (its
    files would be read through it: files_inside follows no link below the runs folder)."""
    folder = Path(runs_dir) / check_run_id(run_id)
    if folder.is_symlink():
        raise ValueError(f"run {run_id!r}: its folder is a link, which is never followed")
    return folder


def trajectory_file_name(step: int) -> str:
    return f"step-{step:06d}.trajectories.jsonl"


STEP_FILE_PATTERN = re.compile(r"step-(\d{6,})\.trajectories\.jsonl")


def list_trajectory_files(run_dir: Path) -> dict[int, Path]:
    """A run's trajectory files by step, in step order."""
    folder = Path(run_dir) / TRAJECTORIES_DIR
    if not is_plain_folder(folder):
        return {}
    found = {
        int(match[1]): path
        for path in folder.iterdir()
        if (match := STEP_FILE_PATTERN.fullmatch(path.name)) and is_plain_file(path)  # never a link or a FIFO
    }
    return dict(sorted(found.items()))


def parse_event(line: bytes) -> dict[str, Any] | str:
    """One log line as the event `append_event` wrote, or, for a damaged line, what is wrong with it: the envelope
    (a positive integer seq, a number time, a type the protocol declares, object data) and the data against the protocol
    (check_event: the same check as on writing). A damaged line is skipped by every reader: the rest of the log
    still reads."""
    try:
        event = parse_json(line)
    except ValueError:  # UnicodeDecodeError is one, and so is nesting too deep (parse_json)
        return "not a JSON line"
    if not isinstance(event, dict):
        return f"a JSON {type(event).__name__}, not an event object"
    if type(event.get("seq")) is not int or event["seq"] < 1:
        return "no positive integer seq"
    if type(event.get("time")) not in (int, float):
        return "no number time"
    if not isinstance(event.get("type"), str) or not isinstance(event.get("data"), dict):
        return "no string type and object data"
    try:
        check_event(event["type"], event["data"])
    except ValueError as err:
        return str(err)
    return event


def open_log(run_dir: Path, damage: list[str] | None = None) -> BinaryIO | None:
    """events.jsonl, opened by files_inside (no link, no FIFO); None when absent or unreadable (said in `damage`)."""
    try:
        return open_inside(run_dir, EVENTS_FILE, None)
    except FileNotFoundError:
        return None
    except OSError as err:
        if damage is not None:
            damage.append(str(err) if isinstance(err, RefusedFile) else f"{EVENTS_FILE}: unreadable ({err.strerror})")
        return None


def trajectory_lines(run_dir: Path, start: int) -> Iterator[tuple[int, int, dict[str, Any] | None]]:
    """(offset, length, summary) of each complete line of the log from byte `start` (a line's start), in order; the
    summary (a `trajectory` event's data) is None for a line that is not an undamaged trajectory event. What a
    trajectory index row is made of."""
    handle = open_log(run_dir)
    if handle is None:
        return
    with handle:
        for offset, length, line in complete_lines(handle, start):
            summary = None
            if line is not None and b'"trajectory"' in line:  # the type's value; a line without it is no trajectory
                event = parse_event(line)
                if isinstance(event, dict) and event["type"] == "trajectory":
                    summary = event["data"]
            yield offset, length, summary


def last_seq(run_dir: Path) -> int:
    """The seq of the log's last complete, undamaged event, read from its tail, or 0."""
    return next((event["seq"] for event in reverse_events(run_dir)), 0)


def read_events(run_dir: Path, since: int = 0, damage: list[str] | None = None) -> list[dict[str, Any]]:
    """Every complete event with seq > since, in order; a damaged line is skipped and, given `damage`, said there."""
    handle = open_log(run_dir, damage)
    if handle is None:
        return []
    events = []
    with handle:
        for number, (_, length, line) in enumerate(complete_lines(handle, 0), start=1):
            if line is not None and not line.strip():
                continue
            event = parse_event(line) if line is not None else overlong(length)
            if isinstance(event, str):
                if damage is not None:
                    damage.append(f"{EVENTS_FILE} line {number}: {event}")
            elif event["seq"] > since:
                events.append(event)
    return events


_TAIL_BLOCK = 1 << 16


def reverse_events(run_dir: Path, damage: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Complete events from the last to the first, reading the log backwards block by block: the latest events
    cost a read of the log's tail, however long the log is. A damaged line is skipped and, given `damage`, said
    there (by its byte offset: lines are not counted from the end)."""
    handle = open_log(run_dir, damage)
    if handle is None:
        return
    with handle:
        for line_start, length, line in _lines_backwards(handle):
            if line is not None and not line.strip():
                continue
            event = parse_event(line) if line is not None else overlong(length)
            if isinstance(event, dict):
                yield event
            elif damage is not None:
                damage.append(f"{EVENTS_FILE} at byte {line_start}: {event}")


def _lines_backwards(handle: BinaryIO) -> Iterator[tuple[int, int, bytes | None]]:
    """(offset, length, line) of the log's complete lines from the last to the first, without their newline; `line`
    is None for one over MAX_EVENT_LINE_BYTES, whose blocks are not kept (log_lines.py). What follows the last
    newline is a torn tail, left out."""
    position = handle.seek(0, 2)
    line_end: int | None = None  # where the line being read ends (its newline); None while in the torn tail
    later_parts: list[bytes] = []  # its blocks read so far, last first, while they fit the bound
    while position > 0:
        start = max(0, position - _TAIL_BLOCK)
        handle.seek(start)
        block = handle.read(position - start)
        cut = len(block)
        while (newline := block.rfind(b"\n", 0, cut)) >= 0:
            if line_end is not None:
                line_start = start + newline + 1
                whole = line_end - line_start <= MAX_EVENT_LINE_BYTES
                line = block[newline + 1 : cut] + b"".join(reversed(later_parts)) if whole else None
                yield line_start, line_end - line_start, line
            line_end, later_parts, cut = start + newline, [], newline
        if line_end is not None and line_end - start <= MAX_EVENT_LINE_BYTES:
            later_parts.append(block[:cut])
        position = start
    if line_end is not None:  # the log's first line
        yield 0, line_end, b"".join(reversed(later_parts)) if line_end <= MAX_EVENT_LINE_BYTES else None


def last_status(run_dir: Path) -> dict[str, Any] | None:
    """The data of the log's latest status event, read from its tail."""
    return next((event["data"] for event in reverse_events(run_dir) if event["type"] == "status"), None)


def latest_status(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    for event in reversed(events):
        if event["type"] == "status":
            return event["data"]
    return None


def process_start_time(pid: int) -> str | None:
    """When process `pid` started, in clock ticks since boot (/proc/PID/stat, field 22), or None when it is gone or
    the system has no /proc."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(") ", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def run_process(run_dir: Path) -> tuple[int, str] | None:
    """(pid, start time) of the process running this run, or None: the pid file names a live process that started
    when the run's process did, so a stale file naming an unrelated process that got the same pid is not the run's
    (a restarted server adopted one, and its run/stop killed it)."""
    try:
        pid_text, _, started = read_inside(run_dir, PID_FILE, 100).decode().strip().partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    now = process_start_time(pid)
    if now is None or now != started:  # gone, or another process (a pid file without the time names none)
        return None
    return pid, now


def list_run_dirs(runs_dir: Path) -> list[Path]:
    """The runs in `runs_dir`: its folders that hold a run.json, named by a valid run id and resolving inside it."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    return sorted(p for p in runs_dir.iterdir() if _is_run_folder(runs_dir, p))


def _is_run_folder(runs_dir: Path, path: Path) -> bool:
    try:
        run_folder(runs_dir, path.name)
    except ValueError:
        return False
    return is_plain_file(path / RUN_FILE)


def checkpoint_step(checkpoint: Path) -> int:
    """The step a checkpoint was written at, from its folder's name (checkpoints/step-NNNNNN)."""
    return int(checkpoint.name.removeprefix("step-"))


def list_checkpoints(run_dir: Path) -> list[Path]:
    """A run's complete checkpoints, oldest first (read-only: safe while the run writes)."""
    folder = Path(run_dir) / "checkpoints"
    if not is_plain_folder(folder):
        return []
    # Only step-NNNNNN folders (a stray name never breaks checkpoint_step; a link is never followed), in step order.
    return sorted(
        (p for p in folder.iterdir() if re.fullmatch(r"step-\d+", p.name) and is_plain_folder(p)), key=checkpoint_step
    )


def checkpoint_state(checkpoint: Path) -> dict[str, Any]:
    """A checkpoint's state.json (its step, the event seq it was taken at, the health monitor's state), read without
    following a link out of the run folder and capped."""
    state = read_json_inside(checkpoint, "state.json", MAX_CHECKPOINT_STATE_BYTES)
    if not isinstance(state, dict):
        raise ValueError("state.json is not an object")
    return state


def checkpoints_by_step(run_dir: Path) -> dict[int, Path]:
    """A run's complete checkpoints by their step."""
    return {checkpoint_step(path): path for path in list_checkpoints(run_dir)}


class RunStore:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.trajectories_dir = self.run_dir / TRAJECTORIES_DIR
        self.checkpoints_dir = self.run_dir / "checkpoints"
        # Only the log's end is read: opening the run of a long log (a resume, the server recording how a run
        # ended) costs the same as opening a short one.
        self._truncate_torn_tail()
        self._next_seq = last_seq(self.run_dir) + 1
        self._trajectory_index_rows: int | None = None  # known once the index is synced with the log
        # A run's events come from more than its main thread (the stopping status of a graceful stop, a Ray worker's
        # restart, vLLM's loop counting episodes): one append at a time keeps seq gap-free and lines whole.
        self._append_lock = threading.Lock()

    @classmethod
    def create(cls, runs_dir: Path, run_id: str, config: dict[str, Any], meta: dict[str, Any]) -> RunStore:
        run_dir = run_folder(runs_dir, run_id)
        if run_dir.exists():
            raise FileExistsError(f"run folder already exists: {run_dir}")
        run_dir.mkdir(parents=True)
        (run_dir / CONFIG_FILE).write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        record = {"run_id": run_id, "created_at": datetime.now(UTC).isoformat(), **meta}
        (run_dir / RUN_FILE).write_text(json.dumps(record, indent=2), encoding="utf-8")
        return cls(run_dir)

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    def meta(self) -> dict[str, Any]:
        return read_json_inside(self.run_dir, RUN_FILE, MAX_RUN_RECORD_BYTES)

    def _truncate_torn_tail(self) -> None:
        """Drops what follows the log's last newline (an event a crash left half written), reading back from the
        end block by block until that newline."""
        path = self.run_dir / EVENTS_FILE
        if not path.exists() and not path.is_symlink():
            return
        with open_to_write(self.run_dir, EVENTS_FILE, append=False) as handle:
            end = position = handle.seek(0, 2)
            complete = 0
            while position > 0:
                start = max(0, position - _TAIL_BLOCK)
                handle.seek(start)
                newline = handle.read(position - start).rfind(b"\n")
                if newline >= 0:
                    complete = start + newline + 1
                    break
                position = start
            if complete < end:
                handle.truncate(complete)

    def append_event(self, event_type: str, data: dict[str, Any], *, durable: bool = False) -> int:
        """Appends one event (its data checked against the protocol: ValueError if it breaks it); returns its seq."""
        check_event(event_type, data)
        with self._append_lock:
            seq = self._next_seq
            line = (
                json.dumps({"seq": seq, "time": time.time(), "type": event_type, "data": data}, allow_nan=False) + "\n"
            ).encode()
            if len(line) > MAX_EVENT_LINE_BYTES:  # its readers would pass over it as damage
                raise ValueError(f"a {event_type} event: {overlong(len(line))}")
            with open_to_write(self.run_dir, EVENTS_FILE, append=True) as handle:
                offset = handle.tell()  # append mode starts at the end
                handle.write(line)
                handle.flush()
                if durable:
                    os.fsync(handle.fileno())
            if event_type == "trajectory":  # after the line: a row never names a line that is not complete
                if self._trajectory_index_rows is None:
                    self._sync_trajectory_index(offset)
                with open_own_file(self.run_dir, TRAJECTORY_INDEX_FILE, append=True) as index:
                    index.write(trajectory_index_row(self._trajectory_index_rows, offset, len(line), data))
                self._trajectory_index_rows += 1
            self._next_seq += 1
            return seq

    def _sync_trajectory_index(self, log_end: int) -> None:
        """Before this store's first row: the index gets a row for every trajectory event of the log before
        `log_end` that it lacks (a process that died between an event and its row, a run begun before the index
        existed; a row cut short is dropped), so that its rows have no gap and a reader scans only the log past
        the last row's line. An index whose last row names no trajectory line of the log is rebuilt whole."""
        with open_own_file(self.run_dir, TRAJECTORY_INDEX_FILE, append=False) as index:
            rows = index.seek(0, 2) // TRAJECTORY_INDEX_ROW.size
            indexed_to = 0
            if rows:
                index.seek((rows - 1) * TRAJECTORY_INDEX_ROW.size)
                position, offset, length, *_ = TRAJECTORY_INDEX_ROW.unpack(index.read(TRAJECTORY_INDEX_ROW.size))
                found = next(trajectory_lines(self.run_dir, offset), None) if 0 <= offset < log_end else None
                names_its_line = found is not None and found[:2] == (offset, length) and found[2] is not None
                indexed_to, rows = (offset + length, rows) if position == rows - 1 and names_its_line else (0, 0)
            index.truncate(rows * TRAJECTORY_INDEX_ROW.size)
            index.seek(0, 2)
            for offset, length, summary in trajectory_lines(self.run_dir, indexed_to):
                if offset >= log_end:
                    break
                if summary is not None:
                    index.write(trajectory_index_row(rows, offset, length, summary))
                    rows += 1
        self._trajectory_index_rows = rows

    @property
    def last_seq(self) -> int:
        return self._next_seq - 1

    def write_trajectories(self, step: int, records: list[dict[str, Any]]) -> Path:
        folder = folder_to_write(self.run_dir, self.trajectories_dir.name)
        text = "".join(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n" for record in records)
        return replace_file(folder, trajectory_file_name(step), text.encode())  # a resumed step's file, whole

    def save_checkpoint(self, step: int, write: Callable[[Path], None], keep: int) -> Path:
        """`write(folder)` fills a temporary folder; it becomes `checkpoints/step-NNNNNN` by rename."""
        folder_to_write(self.run_dir, self.checkpoints_dir.name)
        final = self.checkpoints_dir / f"step-{step:06d}"
        tmp = self.checkpoints_dir / f".tmp-{step:06d}-{uuid.uuid4().hex[:6]}"
        tmp.mkdir()
        try:
            write(tmp)
            for path in tmp.rglob("*"):
                if path.is_file():
                    with path.open("rb") as handle:
                        os.fsync(handle.fileno())
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)  # a failed checkpoint leaves nothing behind
            raise
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        for old in self.checkpoints()[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def checkpoints(self) -> list[Path]:
        return list_checkpoints(self.run_dir)

    def latest_checkpoint(self) -> Path | None:
        found = self.checkpoints()
        return found[-1] if found else None

    def write_pid(self) -> None:
        """ "PID START": this process, and when it started (so a later process given the same pid is not taken for
        the run's: `run_process`)."""
        pid = os.getpid()
        replace_file(self.run_dir, PID_FILE, f"{pid} {process_start_time(pid)}\n".encode())

    def clear_pid(self) -> None:
        (self.run_dir / PID_FILE).unlink(missing_ok=True)

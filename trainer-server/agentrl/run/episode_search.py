"""Search a run's episodes: free text in what the model wrote or what it was told back, tools called, tool error
kinds, status, reward, step and turn ranges, health codes. `trajectory/search` answers from `search.sqlite` in the
run folder, an index built as the run writes, never from a scan of the trajectories per query.

The index holds one row per episode of each step file (`trajectories/step-NNNNNN.jsonl`: a step's file is written
whole, and a resumed step's again, so the latest file of a step is its episodes, as trajectory/query lists them),
its tool calls, a full-text table (SQLite's FTS5) of its assistant turns and observations, and the steps where a
health alert fired. The trainer indexes each step file as it writes it (`index_step`); a reader then `sync`s: it
indexes the step files the index lacks or has older copies of (a run begun before the index existed, a trainer
killed between a file and its rows, a failure to index that the trainer only logged), and reads the health events
the log gained since its last read. Each step is one transaction, so a process killed at any point leaves the index
either with a step's rows or without them, never half.

A reader never answers from part of an index, nor from two states of it: its episodes' figures are an immutable
snapshot made once, under a lock, in the search's own read transaction. An index made anew (deleted, or moved aside
as damaged: IndexDamaged) is not `whole`, and a search of it raises Rebuilding, until a sync indexed every step file.
Damaged lines (a step file's, or a health event's in the log) are skipped and kept in its `damage` table.
"""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agentrl.contract.files_inside import is_planted
from agentrl.run.episode_records import Episode, read_episode, read_step_file
from agentrl.run.log_lines import complete_lines, overlong
from agentrl.run.runstore import (
    EPISODE_SORTS,
    EVENTS_FILE,
    TRAJECTORIES_DIR,
    TRAJECTORY_STATUSES,
    list_trajectory_files,
    open_log,
    parse_event,
)

SEARCH_FILE = "search.sqlite"
DAMAGED_SUFFIX = ".damaged"  # a damaged index is moved aside to search.sqlite.damaged, its -wal and -shm beside it
MAX_DAMAGE_SHOWN = 20  # damage(): the first problems, enough to say where to look (as a RunInfo's `damage`)
# A health alert's streak is stored a step per row: a hostile `since_step` cannot make the index grow without end.
MAX_HEALTH_STREAK = 100_000
_SCHEMA_VERSION = 2
_DAMAGE_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)  # SQLite's primary codes for a damaged file
_BUSY_TIMEOUT_MS = 10_000  # a writer (the trainer, or a reader's sync) holds the lock for one step at most
# The episodes' figures a search filters and sorts by, as numpy reads them (status: its index in TRAJECTORY_STATUSES)
COLUMNS = {
    "rowid": "<i8",
    "step": "<i8",
    "grp": "<i8",
    "sample": "<i8",
    "status": "<i8",
    "reward": "<f8",
    "num_turns": "<i8",
    "response_tokens": "<i8",
}
_SCHEMA = f"""
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS steps (step INTEGER PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS episodes (
    rowid INTEGER PRIMARY KEY, step INTEGER NOT NULL, grp INTEGER NOT NULL, sample INTEGER NOT NULL,
    status INTEGER NOT NULL, reward REAL NOT NULL, num_turns INTEGER NOT NULL, response_tokens INTEGER NOT NULL,
    summary TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS episodes_by_step ON episodes (step);
CREATE TABLE IF NOT EXISTS calls (episode INTEGER NOT NULL, name TEXT NOT NULL, error_kind TEXT);
CREATE INDEX IF NOT EXISTS calls_by_name ON calls (name, error_kind, episode);
CREATE INDEX IF NOT EXISTS calls_by_error ON calls (error_kind, episode);
CREATE INDEX IF NOT EXISTS calls_by_episode ON calls (episode);
-- How many times a step was indexed anew (its rows deleted): a reader holding the rows in memory reads them again.
CREATE TABLE IF NOT EXISTS generation (count INTEGER NOT NULL);
INSERT INTO generation SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM generation);
CREATE VIRTUAL TABLE IF NOT EXISTS episode_text USING fts5(assistant, observation);
CREATE TABLE IF NOT EXISTS health (step INTEGER NOT NULL, code TEXT NOT NULL, PRIMARY KEY (step, code));
CREATE TABLE IF NOT EXISTS log (read_to INTEGER NOT NULL);
-- This file's token (a reader's snapshot of another file is never reused) and whether every step file is indexed.
CREATE TABLE IF NOT EXISTS build (token TEXT NOT NULL, whole INTEGER NOT NULL);
INSERT INTO build SELECT lower(hex(randomblob(8))), 0 WHERE NOT EXISTS (SELECT 1 FROM build);
-- Damaged lines skipped: a step's go with its rows; the log's with its health rows.
CREATE TABLE IF NOT EXISTS damage (file TEXT NOT NULL, problem TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS damage_by_file ON damage (file);
PRAGMA user_version = {_SCHEMA_VERSION};
COMMIT;
"""


class SearchUnavailable(Exception):
    """This Python's sqlite3 lacks FTS5 (rare: python.org's, Debian's, Ubuntu's and conda's builds have it)."""


class IndexDamaged(Exception):
    """SQLite found search.sqlite damaged (cut short, overwritten): the next sync moves it aside and builds anew."""


class Rebuilding(Exception):
    """The index is being built anew: `done` of the run's `total` step files are indexed."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__(f"the search index is being rebuilt: {done} of {total} steps indexed")
        self.done, self.total = done, total


@dataclass(frozen=True)
class Range:
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Filters:
    """What trajectory/search's parameters ask; every one given must hold."""

    text: str | None = None
    text_in: str | None = None  # assistant | observation; None: either
    tool: str | None = None
    error_kind: str | None = None
    status: str | None = None
    reward: Range = Range()
    step: Range = Range()
    turns: Range = Range()
    health_code: str | None = None


def fts_query(text: str, column: str | None) -> str:
    """The user's words as an FTS5 query that cannot be a syntax error: each word, or "a quoted phrase", matched as
    written (any case), all of them required; `column` limits them to one column. A NUL separates words, as a space
    does: FTS5 reads a query only up to its first NUL (an "unterminated string" otherwise)."""
    terms = [
        '"' + term.strip('"').replace('"', '""') + '"'
        for term in re.findall(r'"[^"]+"|[^\s"]+', text.replace("\x00", " "))
        if term.strip('"').strip()
    ]
    if not terms:
        raise ValueError("text: give at least one word to search for")
    query = " ".join(terms)
    return f"{column} : ({query})" if column else query


class EpisodeSearch:
    """The search index of one run folder. Each call opens its own connection: the trainer and the server's worker
    threads each use their own; one EpisodeSearch may serve several threads at once."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / SEARCH_FILE
        self._synced: tuple[int, int] | None = None  # the folder's and the log's state at the last sync
        self._gate = _gate_of(self.path)
        self._snapshot_lock = threading.Lock()  # the next snapshot is made by one search, from the last
        self._snapshot = _Snapshot("", -1, _empty_columns())
        self._damaged = False  # a search met IndexDamaged: the next sync moves the file aside first

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        gate = self._gate
        with gate.changed:
            gate.changed.wait_for(lambda: not gate.moving_aside)
            gate.connections += 1
        try:
            # SQLite follows a link and blocks on a FIFO: one in the index's place (or its journal's) is damage.
            if any(is_planted(self.path.with_name(SEARCH_FILE + suffix)) for suffix in ("", "-wal", "-shm")):
                raise IndexDamaged(f"{SEARCH_FILE} or its journal is not a regular file (a link, a FIFO, a folder)")
            with closing(sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None)) as db:
                db.execute("PRAGMA journal_mode = WAL")  # readers never wait for the writer
                db.execute("PRAGMA synchronous = NORMAL")
                if db.execute("PRAGMA user_version").fetchone()[0] != _SCHEMA_VERSION:
                    try:
                        db.executescript(_SCHEMA)
                    except sqlite3.OperationalError as err:
                        if "fts5" in str(err):
                            raise SearchUnavailable(
                                "episode search needs SQLite's FTS5, which this Python's sqlite3 module lacks"
                            ) from err
                        raise
                yield db
        except sqlite3.DatabaseError as err:
            if (getattr(err, "sqlite_errorcode", None) or 0) & 0xFF in _DAMAGE_CODES:  # not from SQLite: none
                raise IndexDamaged(f"{SEARCH_FILE} is damaged: {err}") from err
            raise
        finally:
            with gate.changed:
                gate.connections -= 1
                gate.changed.notify_all()

    def _move_aside(self) -> None:
        """The damaged index out of the way (kept as search.sqlite.damaged, replacing an older one), once this
        reader has no connection open to it; the next connection makes a new, empty one."""
        gate = self._gate
        with gate.changed:
            gate.moving_aside = True
            try:
                gate.changed.wait_for(lambda: gate.connections == 0)
                for suffix in ("", "-wal", "-shm"):
                    source = self.path.with_name(SEARCH_FILE + suffix)
                    if os.path.lexists(source):  # a link too, not what it leads to
                        source.replace(self.path.with_name(SEARCH_FILE + DAMAGED_SUFFIX + suffix))
            finally:
                gate.moving_aside = False
                gate.changed.notify_all()
        self._damaged, self._synced = False, None

    # --- writing: one step at a time ------------------------------------------------------------------------------
    def index_step(self, step: int, records: list[dict[str, Any]], file: Path) -> None:
        """The episodes of step file `file` (step `step`), replacing what the index had for that step."""
        episodes, damage = [], []
        for number, record in enumerate(records, 1):
            try:
                episodes.append(read_episode(record, f"{TRAJECTORIES_DIR}/{file.name}"))
            except ValueError as err:
                damage.append(f"line {number}: {err}")  # written a record per line
        with self._connect() as db:
            self._index(db, step, file.stat(), episodes, damage, f"{TRAJECTORIES_DIR}/{file.name}")
            if not db.execute("SELECT whole FROM build").fetchone()[0]:  # new: whole once it holds every step file
                indexed = {row[0] for row in db.execute("SELECT step FROM steps")}
                if indexed.issuperset(list_trajectory_files(self.run_dir)):
                    db.execute("UPDATE build SET whole = 1")

    def _index(
        self,
        db: sqlite3.Connection,
        step: int,
        stat: os.stat_result,
        episodes: list[Episode],
        damage: list[str],
        file: str,
        unless_current: bool = False,
    ) -> None:
        """The step's rows replaced by `episodes` and its damage by `damage`, in one transaction; `unless_current`:
        nothing done if the index already holds this copy of the file (another reader, or the trainer, indexed it
        since this one looked)."""
        db.execute("BEGIN IMMEDIATE")
        try:
            current = db.execute("SELECT size, mtime_ns FROM steps WHERE step = ?", (step,)).fetchone()
            if unless_current and current == (stat.st_size, stat.st_mtime_ns):
                db.execute("ROLLBACK")
                return
            old = [row[0] for row in db.execute("SELECT rowid FROM episodes WHERE step = ?", (step,))]
            if old:
                marks = ",".join("?" * len(old))
                db.execute(f"DELETE FROM episode_text WHERE rowid IN ({marks})", old)
                db.execute(f"DELETE FROM calls WHERE episode IN ({marks})", old)
                db.execute("DELETE FROM episodes WHERE step = ?", (step,))
                db.execute("UPDATE generation SET count = count + 1")
            for episode in episodes:
                summary = episode.summary
                rowid = db.execute(
                    "INSERT INTO episodes (step, grp, sample, status, reward, num_turns, response_tokens, summary) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        step,
                        summary["group"],
                        summary["sample"],
                        TRAJECTORY_STATUSES.index(summary["status"]),
                        summary["reward"],
                        summary["num_turns"],
                        summary["response_tokens"],
                        json.dumps(summary),
                    ),
                ).lastrowid
                db.executemany(
                    "INSERT INTO calls (episode, name, error_kind) VALUES (?, ?, ?)",
                    [(rowid, name, error_kind) for name, error_kind in episode.calls],
                )
                db.execute(
                    "INSERT INTO episode_text (rowid, assistant, observation) VALUES (?, ?, ?)",
                    (rowid, episode.assistant, episode.observation),
                )
            db.execute("DELETE FROM damage WHERE file = ?", (file,))
            db.executemany("INSERT INTO damage (file, problem) VALUES (?, ?)", [(file, what) for what in damage])
            db.execute(
                "INSERT OR REPLACE INTO steps (step, size, mtime_ns) VALUES (?, ?, ?)",
                (step, stat.st_size, stat.st_mtime_ns),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def sync(self) -> None:
        """Indexes the step files the index lacks or has another copy of, and the health events the log gained;
        nothing to do (no step file written or replaced, no event appended since the last sync) costs two stats.
        A damaged index (found now, or by a search) is moved aside and built anew, a step per transaction."""
        with self._gate.sync_lock:
            if self._damaged:
                self._move_aside()
            try:
                self._sync()
            except IndexDamaged:
                self._move_aside()
                self._sync()

    def _sync(self) -> None:
        folder, log = self.run_dir / TRAJECTORIES_DIR, self.run_dir / EVENTS_FILE
        state = (folder.stat().st_mtime_ns if folder.is_dir() else 0, log.stat().st_size if log.exists() else 0)
        if state == self._synced or not self.run_dir.is_dir():
            return
        with self._connect() as db:
            known = {step: (size, mtime) for step, size, mtime in db.execute("SELECT step, size, mtime_ns FROM steps")}
            for step, file in list_trajectory_files(self.run_dir).items():
                stat = file.stat()
                if known.get(step) != (stat.st_size, stat.st_mtime_ns):
                    stat, episodes, damage = read_step_file(file, stat)
                    self._index(db, step, stat, episodes, damage, f"{TRAJECTORIES_DIR}/{file.name}", True)
            self._read_health(db)
            db.execute("UPDATE build SET whole = 1 WHERE whole = 0")
        self._synced = state

    def _read_health(self, db: sqlite3.Connection) -> None:
        read_to = (db.execute("SELECT read_to FROM log").fetchone() or (0,))[0]
        damage: list[str] = []
        with open_log(self.run_dir) or closing(io.BytesIO()) as log:  # a link or FIFO refused: read as empty
            size = log.seek(0, 2)
            if size == read_to:
                return
            restart = size < read_to  # a log replaced by a shorter one: read it again
            read_to = 0 if restart else read_to
            found: list[tuple[int, str]] = []
            for line_start, length, line in complete_lines(log, read_to):  # each line bounded (run/log_lines.py)
                read_to = line_start + length
                if line is not None and b'"health"' not in line:
                    continue
                event = parse_event(line) if line is not None else overlong(length)  # what every reader checks
                if isinstance(event, str):
                    damage.append(f"at byte {line_start}: {event}")
                elif event["type"] == "health" and not event["data"]["resolved"]:
                    alert = event["data"]  # the streak of steps that raised it
                    first = max(alert["since_step"], alert["step"] - MAX_HEALTH_STREAK + 1)
                    found += [(step, alert["code"]) for step in range(first, alert["step"] + 1)]
        db.execute("BEGIN IMMEDIATE")
        if restart:
            db.execute("DELETE FROM health")
            db.execute("DELETE FROM damage WHERE file = ?", (EVENTS_FILE,))
        db.executemany("INSERT OR IGNORE INTO health (step, code) VALUES (?, ?)", found)
        db.executemany("INSERT INTO damage (file, problem) VALUES (?, ?)", [(EVENTS_FILE, what) for what in damage])
        db.execute("DELETE FROM log")
        db.execute("INSERT INTO log (read_to) VALUES (?)", (read_to,))
        db.execute("COMMIT")

    # --- reading ------------------------------------------------------------------------------------------------
    def search(self, filters: Filters, sort: str, start: int, limit: int) -> tuple[list[Match], int]:
        """The matches [start, start + limit) of the episodes that pass `filters`, in `sort`'s order (each with its
        sort key, which orders matches of several runs the same way), and how many pass; a run with no folder yet
        (queued) has none. Rebuilding while the index is not whole; IndexDamaged for a damaged one.

        The episodes' figures are numpy columns kept in memory (read from the index once, then only the rows added
        since, or all again after a step was indexed anew); what SQL answers is only which episodes a word, a tool
        or a health code selects. The filters and the order are numpy's, and SQL reads only the page's summaries,
        all in one read transaction: the snapshot the columns are of."""
        if not self.run_dir.is_dir():
            return [], 0
        try:
            with self._connect() as db:
                db.execute("BEGIN")
                columns = self._refreshed(db)
                order = _ordered(columns, self._selected(db, columns, filters), sort)
                page = order[start : start + limit]
                rowids = columns["rowid"][page].tolist()
                marks = ",".join("?" * len(rowids))
                summaries = dict(db.execute(f"SELECT rowid, summary FROM episodes WHERE rowid IN ({marks})", rowids))
                db.execute("COMMIT")
        except IndexDamaged:
            self._damaged, self._synced = True, None
            raise
        except Rebuilding:  # the file was made anew since the last sync (deleted, moved aside): sync it whole
            self._synced = None
            raise
        column, descending = EPISODE_SORTS[sort]
        sign = -1 if descending else 1
        matches = [
            Match(
                tuple(sign * columns[name][i].item() for name in (column, "step", "grp", "sample")),
                json.loads(summaries[rowid]),
            )
            for i, rowid in zip(page, rowids, strict=True)
        ]
        return matches, len(order)

    def damage(self) -> list[str]:
        """What the index skipped as damaged (the first MAX_DAMAGE_SHOWN), each with its file and where in it."""
        if not self.run_dir.is_dir():
            return []
        with self._connect() as db:
            found = db.execute("SELECT file, problem FROM damage ORDER BY file, rowid LIMIT ?", (MAX_DAMAGE_SHOWN,))
            return [f"{file} {problem}" for file, problem in found]

    def _refreshed(self, db: sqlite3.Connection) -> dict[str, np.ndarray]:
        """The columns as the index has them in `db`'s read transaction, which this begins: the last snapshot's and
        the rows added since, or all of them again when a step was indexed anew (its old rows deleted) or the file
        is another. Made under the lock, so each snapshot is made once, and from one no older than its own."""
        with self._snapshot_lock:
            token, whole = db.execute("SELECT token, whole FROM build").fetchone()
            if not whole:
                indexed = {row[0] for row in db.execute("SELECT step FROM steps")}
                step_files = list_trajectory_files(self.run_dir)
                if not indexed.issuperset(step_files):
                    raise Rebuilding(len(indexed & step_files.keys()), len(step_files))
            generation = db.execute("SELECT count FROM generation").fetchone()[0]
            last = self._snapshot
            if (last.token, last.generation) != (token, generation):
                last = _Snapshot(token, generation, _empty_columns())
            after = int(last.columns["rowid"][-1]) if len(last.columns["rowid"]) else 0
            rows = db.execute(f"SELECT {', '.join(COLUMNS)} FROM episodes WHERE rowid > ? ORDER BY rowid", (after,))
            new = np.array(rows.fetchall(), dtype=list(COLUMNS.items()))
            if len(new) or last is not self._snapshot:
                columns = {name: np.concatenate([last.columns[name], new[name]]) for name in COLUMNS}
                self._snapshot = _Snapshot(token, generation, columns)
            return self._snapshot.columns

    def _selected(self, db: sqlite3.Connection, columns: dict[str, np.ndarray], filters: Filters) -> np.ndarray:
        """The positions (in the columns) of the episodes that pass every filter."""
        keep = np.ones(len(columns["rowid"]), bool)
        if filters.text is not None:
            query = fts_query(filters.text, filters.text_in)
            found = db.execute("SELECT rowid FROM episode_text WHERE episode_text MATCH ?", (query,))
            keep &= np.isin(columns["rowid"], _int_array(found))
        calls = [(name, value) for name, value in (("name", filters.tool), ("error_kind", filters.error_kind)) if value]
        if calls:  # both given: one call of that tool failed with that kind
            where = " AND ".join(f"{name} = ?" for name, _ in calls)
            found = db.execute(f"SELECT DISTINCT episode FROM calls WHERE {where}", [value for _, value in calls])
            keep &= np.isin(columns["rowid"], _int_array(found))
        if filters.health_code is not None:
            steps = db.execute("SELECT step FROM health WHERE code = ?", (filters.health_code,))
            keep &= np.isin(columns["step"], _int_array(steps))
        if filters.status is not None:
            keep &= columns["status"] == TRAJECTORY_STATUSES.index(filters.status)
        for name, bounds in (("reward", filters.reward), ("step", filters.step), ("num_turns", filters.turns)):
            if bounds.low is not None:
                keep &= columns[name] >= bounds.low
            if bounds.high is not None:
                keep &= columns[name] <= bounds.high
        return np.flatnonzero(keep)


@dataclass(frozen=True)
class Match:
    key: tuple[float, ...]  # ascending in the search's order
    summary: dict[str, Any]


class _FileGate:
    """What every reader of one index file in this process shares: its one sync at a time (two would index the same
    steps twice), and its open connections, which must all be closed for the file to be moved aside (SQLite's
    connections to a file renamed under them delete the new file's WAL as they close)."""

    def __init__(self) -> None:
        self.sync_lock = threading.Lock()
        self.changed = threading.Condition()
        self.connections = 0
        self.moving_aside = False


_GATES: weakref.WeakValueDictionary[str, _FileGate] = weakref.WeakValueDictionary()  # by the file's absolute path
_GATES_LOCK = threading.Lock()


def _gate_of(path: Path) -> _FileGate:
    with _GATES_LOCK:
        gate = _GATES.get(os.path.abspath(path))
        if gate is None:
            gate = _GATES[os.path.abspath(path)] = _FileGate()
        return gate


@dataclass(frozen=True)
class _Snapshot:
    """The episodes' figures as index file `token` held them at `generation`; never changed once made: a search
    keeps the one it took while another makes the next."""

    token: str
    generation: int
    columns: dict[str, np.ndarray]


def _empty_columns() -> dict[str, np.ndarray]:
    return {name: np.empty(0, kind) for name, kind in COLUMNS.items()}


def _int_array(cursor: sqlite3.Cursor) -> np.ndarray:
    return np.fromiter((row[0] for row in cursor), np.int64)


def _ordered(columns: dict[str, np.ndarray], chosen: np.ndarray, sort: str) -> np.ndarray:
    """`chosen` in `sort`'s order, ties by id (step, group, sample) in the sort's direction."""
    column, descending = EPISODE_SORTS[sort]
    keys = [columns[name][chosen] for name in ("sample", "grp", "step")]  # np.lexsort: the last key sorts first
    if column != "step":
        keys.append(columns[column][chosen])
    if descending:
        keys = [-key for key in keys]
    return chosen[np.lexsort(keys)]

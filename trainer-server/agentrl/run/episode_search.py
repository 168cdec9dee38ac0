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
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agentrl.run.runstore import (
    EPISODE_SORTS,
    EVENTS_FILE,
    STEP_FILE_PATTERN,
    TRAJECTORIES_DIR,
    TRAJECTORY_STATUSES,
    trajectory_summary,
)

SEARCH_FILE = "search.sqlite"
_SCHEMA_VERSION = 1
_BUSY_TIMEOUT_MS = 10_000  # a writer (the trainer, or a reader's sync) holds the lock for one step at most
# The episodes' figures a search filters and sorts by, as numpy reads them (status: its index in
# TRAJECTORY_STATUSES).
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
PRAGMA user_version = {_SCHEMA_VERSION};
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
"""


class SearchUnavailable(Exception):
    """This Python's sqlite3 lacks FTS5 (rare: python.org's, Debian's, Ubuntu's and conda's builds have it)."""


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
    written (any case), all of them required; `column` limits them to one column."""
    terms = [
        '"' + term.strip('"').replace('"', '""') + '"'
        for term in re.findall(r'"[^"]+"|[^\s"]+', text)
        if term.strip('"').strip()
    ]
    if not terms:
        raise ValueError("text: give at least one word to search for")
    query = " ".join(terms)
    return f"{column} : ({query})" if column else query


class EpisodeSearch:
    """The search index of one run folder. Each call opens its own connection: the trainer and the server's worker
    threads each use their own."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / SEARCH_FILE
        self._synced: tuple[int, int] | None = None  # the folder's and the log's state at the last sync
        self._columns = _empty_columns()  # the episodes' figures, in rowid order
        self._generation = -1

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
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

    # --- writing: one step at a time ------------------------------------------------------------------------------
    def index_step(self, step: int, records: list[dict[str, Any]], file: Path) -> None:
        """The episodes of step file `file` (step `step`), replacing what the index had for that step."""
        with self._connect() as db:
            self._index(db, step, records, file)

    def _index(self, db: sqlite3.Connection, step: int, records: list[dict[str, Any]], file: Path) -> None:
        stat = file.stat()
        db.execute("BEGIN IMMEDIATE")
        try:
            old = [row[0] for row in db.execute("SELECT rowid FROM episodes WHERE step = ?", (step,))]
            if old:
                marks = ",".join("?" * len(old))
                db.execute(f"DELETE FROM episode_text WHERE rowid IN ({marks})", old)
                db.execute(f"DELETE FROM calls WHERE episode IN ({marks})", old)
                db.execute("DELETE FROM episodes WHERE step = ?", (step,))
                db.execute("UPDATE generation SET count = count + 1")
            for record in records:
                summary = trajectory_summary(record, f"trajectories/{file.name}")
                rowid = db.execute(
                    "INSERT INTO episodes (step, grp, sample, status, reward, num_turns, response_tokens, summary) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        step,
                        record["group"],
                        record["sample"],
                        TRAJECTORY_STATUSES.index(record["status"]),
                        record["reward"],
                        summary["num_turns"],
                        summary["response_tokens"],
                        json.dumps(summary),
                    ),
                ).lastrowid
                turns = record["turns"]
                db.executemany(
                    "INSERT INTO calls (episode, name, error_kind) VALUES (?, ?, ?)",
                    [(rowid, call["name"], call.get("error_kind")) for turn in turns for call in turn["tool_calls"]],
                )
                db.execute(
                    "INSERT INTO episode_text (rowid, assistant, observation) VALUES (?, ?, ?)",
                    (
                        rowid,
                        "\n".join(turn["assistant"] for turn in turns),
                        "\n".join(turn["observation"] or "" for turn in turns),
                    ),
                )
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
        nothing to do (no step file written or replaced, no event appended since the last sync) costs two stats."""
        folder, log = self.run_dir / TRAJECTORIES_DIR, self.run_dir / EVENTS_FILE
        state = (folder.stat().st_mtime_ns if folder.is_dir() else 0, log.stat().st_size if log.exists() else 0)
        if state == self._synced:
            return
        with self._connect() as db:
            known = {step: (size, mtime) for step, size, mtime in db.execute("SELECT step, size, mtime_ns FROM steps")}
            for file in sorted(folder.glob("step-*.jsonl")) if folder.is_dir() else []:
                match = STEP_FILE_PATTERN.fullmatch(file.name)
                if match is None:
                    continue
                stat = file.stat()
                step = int(match.group(1))
                if known.get(step) != (stat.st_size, stat.st_mtime_ns):
                    self._index(db, step, list(_records(file)), file)
            self._read_health(db)
        self._synced = state

    def _read_health(self, db: sqlite3.Connection) -> None:
        log = self.run_dir / EVENTS_FILE
        row = db.execute("SELECT read_to FROM log").fetchone()
        read_to = row[0] if row else 0
        size = log.stat().st_size if log.exists() else 0
        if size < read_to:  # a log replaced by a shorter one: read it again
            db.execute("DELETE FROM health")
            read_to = 0
        if size == read_to:
            return
        found: list[tuple[int, str]] = []
        with log.open("rb") as handle:
            handle.seek(read_to)
            for line in handle:
                if not line.endswith(b"\n"):
                    break  # an event being written: read it next time
                read_to += len(line)
                if b'"health"' not in line:
                    continue
                event = json.loads(line)
                if event.get("type") == "health" and not event["data"]["resolved"]:
                    alert = event["data"]  # the streak of steps that raised it
                    found += [(step, alert["code"]) for step in range(alert["since_step"], alert["step"] + 1)]
        db.execute("BEGIN IMMEDIATE")
        db.executemany("INSERT OR IGNORE INTO health (step, code) VALUES (?, ?)", found)
        db.execute("DELETE FROM log")
        db.execute("INSERT INTO log (read_to) VALUES (?)", (read_to,))
        db.execute("COMMIT")

    # --- reading ------------------------------------------------------------------------------------------------
    def search(self, filters: Filters, sort: str, start: int, limit: int) -> tuple[list[Match], int]:
        """The matches [start, start + limit) of the episodes that pass `filters`, in `sort`'s order (each with its
        sort key, which orders matches of several runs the same way), and how many pass.

        The episodes' figures are numpy columns kept in memory (read from the index once, then only the rows added
        since, or all again after a step was indexed anew); what SQL answers is only which episodes a word, a tool
        or a health code selects. The filters and the order are numpy's, and SQL reads only the page's summaries."""
        with self._connect() as db:
            self._refresh(db)
            columns = self._columns
            order = _ordered(columns, self._selected(db, filters), sort)
            page = order[start : start + limit]
            rowids = columns["rowid"][page].tolist()
            marks = ",".join("?" * len(rowids))
            summaries = dict(db.execute(f"SELECT rowid, summary FROM episodes WHERE rowid IN ({marks})", rowids))
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

    def _refresh(self, db: sqlite3.Connection) -> None:
        """The columns as the index has them now: the rows added since the last read, or all of them again when a
        step was indexed anew (its old rows deleted) since."""
        generation = db.execute("SELECT count FROM generation").fetchone()[0]
        if generation != self._generation:
            self._columns = _empty_columns()
            self._generation = generation
        after = int(self._columns["rowid"][-1]) if len(self._columns["rowid"]) else 0
        rows = db.execute(f"SELECT {', '.join(COLUMNS)} FROM episodes WHERE rowid > ? ORDER BY rowid", (after,))
        new = np.array(rows.fetchall(), dtype=list(COLUMNS.items()))
        if len(new):
            self._columns = {name: np.concatenate([self._columns[name], new[name]]) for name in COLUMNS}

    def _selected(self, db: sqlite3.Connection, filters: Filters) -> np.ndarray:
        """The positions (in the columns) of the episodes that pass every filter."""
        columns = self._columns
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


def _records(file: Path) -> Iterable[dict[str, Any]]:
    with file.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)

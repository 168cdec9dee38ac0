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

from agentrl.run.runstore import EVENTS_FILE, STEP_FILE_PATTERN, trajectory_summary

SEARCH_FILE = "search.sqlite"
_SCHEMA_VERSION = 1
_BUSY_TIMEOUT_MS = 10_000  # a writer (the trainer, or a reader's sync) holds the lock for one step at most
# trajectory/search's sorts (trajectory/query's): the SQL order of each, and its column and direction. Ties go by id
# (step, group, sample), in the sort's direction.
SORT_KEYS = {
    "step": ("step", False),
    "reward": ("reward", False),
    "-reward": ("reward", True),
    "response_tokens": ("response_tokens", False),
    "-response_tokens": ("response_tokens", True),
}
SORTS = {
    "step": "step, grp, sample",
    "reward": "reward, step, grp, sample",
    "-reward": "reward DESC, step DESC, grp DESC, sample DESC",
    "response_tokens": "response_tokens, step, grp, sample",
    "-response_tokens": "response_tokens DESC, step DESC, grp DESC, sample DESC",
}
_SCHEMA = f"""
PRAGMA user_version = {_SCHEMA_VERSION};
CREATE TABLE IF NOT EXISTS steps (step INTEGER PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS episodes (
    rowid INTEGER PRIMARY KEY, step INTEGER NOT NULL, grp INTEGER NOT NULL, sample INTEGER NOT NULL,
    status TEXT NOT NULL, reward REAL NOT NULL, num_turns INTEGER NOT NULL, response_tokens INTEGER NOT NULL,
    summary TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS episodes_by_step ON episodes (step, grp, sample);
CREATE INDEX IF NOT EXISTS episodes_by_reward ON episodes (reward);
CREATE TABLE IF NOT EXISTS calls (episode INTEGER NOT NULL, name TEXT NOT NULL, error_kind TEXT);
CREATE INDEX IF NOT EXISTS calls_by_name ON calls (name, episode);
CREATE INDEX IF NOT EXISTS calls_by_error ON calls (error_kind, episode);
CREATE INDEX IF NOT EXISTS calls_by_episode ON calls (episode);
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

    def sql(self, column: str) -> tuple[list[str], list[Any]]:
        clauses, values = [], []
        if self.low is not None:
            clauses.append(f"{column} >= ?")
            values.append(self.low)
        if self.high is not None:
            clauses.append(f"{column} <= ?")
            values.append(self.high)
        return clauses, values


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
            for record in records:
                summary = trajectory_summary(record, f"trajectories/{file.name}")
                rowid = db.execute(
                    "INSERT INTO episodes (step, grp, sample, status, reward, num_turns, response_tokens, summary) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        step,
                        record["group"],
                        record["sample"],
                        record["status"],
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
        folder, log = self.run_dir / "trajectories", self.run_dir / EVENTS_FILE
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
        sort key, which orders matches of several runs the same way), and how many pass."""
        where, values = _where(filters)
        column, descending = SORT_KEYS[sort]
        sign = -1 if descending else 1
        with self._connect() as db:
            total = db.execute(f"SELECT count(*) FROM episodes WHERE {where}", values).fetchone()[0]
            rows = db.execute(
                f"SELECT {column}, step, grp, sample, summary FROM episodes WHERE {where} "
                f"ORDER BY {SORTS[sort]} LIMIT ? OFFSET ?",
                [*values, limit, start],
            ).fetchall()
        matches = [
            Match(tuple(sign * value for value in (key, step, grp, sample)), json.loads(summary))
            for key, step, grp, sample, summary in rows
        ]
        return matches, total


@dataclass(frozen=True)
class Match:
    key: tuple[float, ...]  # ascending in the search's order
    summary: dict[str, Any]


def _where(filters: Filters) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    values: list[Any] = []
    if filters.text is not None:
        clauses.append("rowid IN (SELECT rowid FROM episode_text WHERE episode_text MATCH ?)")
        values.append(fts_query(filters.text, filters.text_in))
    if filters.tool is not None:
        clauses.append("rowid IN (SELECT episode FROM calls WHERE name = ?)")
        values.append(filters.tool)
    if filters.error_kind is not None:
        clauses.append("rowid IN (SELECT episode FROM calls WHERE error_kind = ?)")
        values.append(filters.error_kind)
    if filters.status is not None:
        clauses.append("status = ?")
        values.append(filters.status)
    if filters.health_code is not None:
        clauses.append("step IN (SELECT step FROM health WHERE code = ?)")
        values.append(filters.health_code)
    for column, bounds in (("reward", filters.reward), ("step", filters.step), ("num_turns", filters.turns)):
        more, more_values = bounds.sql(column)
        clauses += more
        values += more_values
    return " AND ".join(clauses) or "1", values


def _records(file: Path) -> Iterable[dict[str, Any]]:
    with file.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)

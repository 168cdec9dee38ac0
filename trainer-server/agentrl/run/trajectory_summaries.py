"""A run's trajectory summaries as trajectory/query lists them, kept in memory as columns and read from the run's
trajectory index (runstore.TRAJECTORY_INDEX_FILE: a fixed-size row per `trajectory` event, written beside the log), so
a query filters and sorts small numbers and reads from events.jsonl only the lines of the page it returns.

The index only grows, and so do the columns: each query reads the rows written since the last one, then scans the
log past the last row's line (the events a trainer wrote after it, or all of them for a run begun before the index
existed: once, then never again). A row that cannot be right (its line not after the one before, past the log's
end, an unknown status) ends the use of the index file: the log is scanned from there. A page line that is not the
trajectory event its row says (a hand or a disk changed the log under it) makes the query start over from the log
alone. A resumed run writes a superseded trajectory again: the latest row of an id (step, group, sample) is its
summary, as `read_events` readers keep the latest event of an id.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from agentrl.contract.files_inside import open_inside
from agentrl.run.runstore import (
    EPISODE_SORTS,
    TRAJECTORY_INDEX_FILE,
    TRAJECTORY_INDEX_ROW,
    TRAJECTORY_STATUSES,
    open_log,
    parse_event,
    trajectory_index_values,
    trajectory_lines,
)

# An index row (runstore.TRAJECTORY_INDEX_ROW) as numpy reads a whole file of them at once.
ROW = np.dtype(
    [
        (name, "<i8")
        for name in ("position", "offset", "length", "step", "group", "sample", "status", "errors", "response_tokens")
    ]
    + [("reward", "<f8")]
)
assert ROW.itemsize == TRAJECTORY_INDEX_ROW.size
_ROWS_PER_READ = 1 << 20  # index rows read at a time (80 MB): memory stays bounded whatever the file's size


class IndexMismatch(Exception):
    """A page line is not the trajectory event its row names."""


class TrajectorySummaries:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self._lock = threading.Lock()  # queries run in worker threads
        self._start_over(use_index_file=True)

    def _start_over(self, use_index_file: bool) -> None:
        self._use_index_file = use_index_file
        self._index_rows = 0  # rows of the index file taken in
        self._index_end = 0  # the end of the line of the last of them
        self._log_scanned = 0  # the log's bytes whose trajectory events are all in the rows
        self._rows = np.empty(0, ROW)
        self._orders: dict[str, np.ndarray] = {}  # sort -> the latest row of each id in that order

    def query(
        self,
        *,
        step: int | None = None,
        status: str | None = None,
        has_tool_error: bool | None = None,
        sort: str = "step",
        start: int = 0,
        limit: int = 100,
    ) -> tuple[list[dict[str, Any]], int]:
        """The page [start, start + limit) of the summaries that pass the filters, in `sort`'s order, and how many
        pass."""
        for _ in range(2):
            with self._lock:
                self._extend()
                chosen = self._matching(step, status, has_tool_error, sort)
                page = self._rows[chosen[start : start + limit]]
            try:
                return self._read(page), len(chosen)
            except IndexMismatch:
                with self._lock:
                    self._start_over(use_index_file=False)
        raise AssertionError("rows scanned from the log alone cannot mismatch it")

    # --- the rows: from the index file, then from the log past its last row ------------------------------------
    def _extend(self) -> None:
        log = open_log(self.run_dir)  # a link or a FIFO in its place reads as no log
        log_size = 0
        if log is not None:
            with log:
                log_size = log.seek(0, 2)
        if log_size < self._log_scanned:  # the log was replaced by a shorter one: nothing known holds
            self._start_over(use_index_file=self._use_index_file)
        chunks = self._rows_from_index(log_size) if self._use_index_file else []
        scanned = []
        for offset, length, summary in trajectory_lines(self.run_dir, self._log_scanned):
            if summary is not None:
                scanned.append(_row_of(offset, length, summary))
            self._log_scanned = offset + length
        if scanned:
            chunks.append(np.array(scanned, ROW))
        if chunks:
            self._rows = np.concatenate([self._rows, *chunks])
            self._orders.clear()

    def _rows_from_index(self, log_size: int) -> list[np.ndarray]:
        """The index file's rows written since the last read, in chunks, up to the first that cannot be right."""
        chunks: list[np.ndarray] = []
        try:
            index = open_inside(self.run_dir, TRAJECTORY_INDEX_FILE, None)  # no link, no FIFO
        except FileNotFoundError:
            return chunks
        except OSError:  # refused or unreadable: the log says it all
            self._use_index_file = False
            return chunks
        with index:
            index.seek(self._index_rows * ROW.itemsize)
            while chunk := index.read(ROW.itemsize * _ROWS_PER_READ):
                rows = np.frombuffer(chunk, ROW, count=len(chunk) // ROW.itemsize)  # the rest: a row being written
                ends = rows["offset"] + rows["length"]
                sound = (
                    (rows["position"] == np.arange(self._index_rows, self._index_rows + len(rows)))
                    & (rows["offset"] >= np.concatenate(([self._index_end], ends[:-1])))  # each line after the last
                    & (rows["length"] > 0)
                    & (ends <= log_size)
                    & (rows["status"] >= 0)
                    & (rows["status"] < len(TRAJECTORY_STATUSES))
                )
                good = len(rows) if sound.all() else int(np.argmin(sound))
                if good:
                    taken = rows[:good]
                    new = taken[taken["offset"] >= self._log_scanned]  # not those this reader scanned itself
                    chunks.append(new)
                    self._index_rows += good
                    self._index_end = int(ends[good - 1])
                    self._log_scanned = max(self._log_scanned, self._index_end)
                if good < len(rows):  # a row that cannot be right: the log says the rest
                    self._use_index_file = False
                    return chunks
                if len(chunk) % ROW.itemsize:
                    return chunks
        return chunks

    # --- a query over the rows ---------------------------------------------------------------------------------
    def _order(self, sort: str) -> np.ndarray:
        """The latest row of each id, in `sort`'s order; sorted once per growth of the rows."""
        if sort not in self._orders:
            rows = self._rows
            if sort == "step":
                # Rows come mostly in id order already: a stable sort of one key (the id packed in 64 bits when it
                # fits, as ever but in a hand-made log) costs little; ties keep the order the rows were written.
                step, group, sample = (rows[name] for name in ("step", "group", "sample"))
                if (
                    len(rows)
                    and min(step.min(), group.min(), sample.min()) >= 0
                    and max(group.max(), sample.max()) < 1 << 16
                    and step.max() < 1 << 31
                ):
                    by_id = np.argsort((step << 32) | (group << 16) | sample, kind="stable")
                else:
                    by_id = np.lexsort((np.arange(len(rows)), sample, group, step))
                ids = rows[["step", "group", "sample"]][by_id]
                latest = np.ones(len(by_id), bool)
                latest[:-1] = ids[:-1] != ids[1:]  # the last (latest written) row of each id
                self._orders[sort] = by_id[latest]
            else:
                self._orders[sort] = self._sorted(self._order("step"), sort)
        return self._orders[sort]

    def _sorted(self, by_id: np.ndarray, sort: str) -> np.ndarray:
        """Rows given in id order, in `sort`'s order; a stable sort, so ties keep the id order (reversed with a
        descending sort)."""
        column, descending = EPISODE_SORTS[sort]
        if descending:
            by_id = by_id[::-1]
            return by_id[np.argsort(-self._rows[column][by_id], kind="stable")]
        return by_id[np.argsort(self._rows[column][by_id], kind="stable")]

    def _matching(self, step: int | None, status: str | None, has_tool_error: bool | None, sort: str) -> np.ndarray:
        if step is not None:  # a step's rows lie together in id order
            by_id = self._order("step")
            first, last = np.searchsorted(self._rows["step"][by_id], [step, step + 1])
            chosen = self._sorted(by_id[first:last], sort)
        else:
            chosen = self._order(sort)
        if status is not None:
            chosen = chosen[self._rows["status"][chosen] == TRAJECTORY_STATUSES.index(status)]
        if has_tool_error is not None:
            chosen = chosen[(self._rows["errors"][chosen] > 0) == has_tool_error]
        return chosen

    def _read(self, page: np.ndarray) -> list[dict[str, Any]]:
        """The summaries of the page's rows, read from the log where the rows say."""
        if not len(page):
            return []
        items = []
        log = open_log(self.run_dir)
        if log is None:  # gone or replaced by a link or FIFO since its rows were read
            raise IndexMismatch
        with log:
            for row in page:
                event = parse_event(os.pread(log.fileno(), int(row["length"]), int(row["offset"])))
                names = (int(row["step"]), int(row["group"]), int(row["sample"]))
                if not (isinstance(event, dict) and event["type"] == "trajectory" and _id_of(event["data"]) == names):
                    raise IndexMismatch
                items.append(event["data"])
        return items


def _id_of(summary: dict[str, Any]) -> tuple[int, int, int]:
    return summary["step"], summary["group"], summary["sample"]


def _row_of(offset: int, length: int, summary: dict[str, Any]) -> tuple[Any, ...]:
    return trajectory_index_values(-1, offset, length, summary)  # a row scanned from the log has no position

"""trajectory/search over the runs' search indexes (run/episode_search.py).

The runs searched lately keep their reader, and with it their episodes' figures in memory. A run's catch-up (its
index extended to the step files and health events it lacks, or built anew when it was deleted or found damaged) runs
in a thread of its own, never in one of the query slots that searches share with trajectory/query: a rebuild of
minutes never keeps another client's query waiting. A search waits CATCH_UP_WAIT_S at most for its runs' catch-ups,
then answers from their indexes in a query slot; a run whose index is still being built makes the answer say how far
(`rebuilding`: done of total steps) and list nothing, rather than count part of the run. What the indexes skipped as
damaged is said in `damage`, each line with its run.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from agentrl.run.episode_search import (
    MAX_DAMAGE_SHOWN,
    EpisodeSearch,
    Filters,
    IndexDamaged,
    Range,
    Rebuilding,
    SearchUnavailable,
    fts_query,
)
from agentrl.run.runstore import list_trajectory_files
from agentrl.server import protocol as p

log = logging.getLogger("agentrl.server")

# How long a search waits for its runs' indexes to catch up before it answers from them as they are: a live run's
# catch-up (a step file, the log's new health events) takes milliseconds; a rebuild, seconds to minutes.
CATCH_UP_WAIT_S = 1.0
# Runs whose reader stays in memory (about 70 bytes an episode); the least recently searched is dropped unless its
# catch-up is at work.
SEARCH_CACHE_RUNS = 8


class RunIndex:
    """One run's reader, and its catch-up: one at a time, each in a thread of its own."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.search = EpisodeSearch(run_dir)
        self.failure: Exception | None = None  # why the last catch-up ended before the index was up to date
        self._catching_up: Future[None] = Future()
        self._catching_up.set_result(None)
        self._lock = threading.Lock()

    def catch_up(self) -> Future[None]:
        """The catch-up at work, or one started now; its future never holds an exception (see `failure`)."""
        with self._lock:
            if self._catching_up.done():
                self._catching_up = Future()
                threading.Thread(target=self._sync, name=f"search-index {self.run_dir.name}", daemon=True).start()
            return self._catching_up

    def busy(self) -> bool:
        return not self._catching_up.done()

    def _sync(self) -> None:
        try:
            self.search.sync()
            self.failure = None
        except Exception as err:  # noqa: BLE001 - said to the searches that cannot answer without it, and logged
            self.failure = err
            log.warning("run %s: its search index could not be brought up to date: %s", self.run_dir.name, err)
        self._catching_up.set_result(None)


class EpisodeSearches:
    def __init__(self, query_slots: asyncio.Semaphore) -> None:
        self._query_slots = query_slots
        self._runs: OrderedDict[str, RunIndex] = OrderedDict()
        self._lock = threading.Lock()

    def forget(self, run_id: str) -> None:
        """Drops the reader of a run that was deleted (run/delete)."""
        with self._lock:
            self._runs.pop(run_id, None)

    async def search(self, params: dict[str, Any], start: int, run_dir_of: Callable[[str], Path]) -> dict[str, Any]:
        """trajectory/search's answer; `start`: its decoded cursor, `run_dir_of`: a run id's folder (RUN_NOT_FOUND
        for an id that names none), each checked before any work."""
        run_dirs = await asyncio.to_thread(lambda: [run_dir_of(run_id) for run_id in params["runIds"]])
        filters = _filters(params)
        runs = [self._run(run_dir) for run_dir in run_dirs]
        await asyncio.wait([asyncio.wrap_future(run.catch_up()) for run in runs], timeout=CATCH_UP_WAIT_S)
        sort, limit = params.get("sort", "step"), params.get("limit", 100)
        async with self._query_slots:
            return await asyncio.to_thread(self._answer, runs, filters, sort, start, limit)

    def _run(self, run_dir: Path) -> RunIndex:
        """The run's reader (made if missing), now the most recently used."""
        with self._lock:
            found = self._runs.pop(run_dir.name, None) or RunIndex(run_dir)
            self._runs[run_dir.name] = found
            idle = [run_id for run_id, run in self._runs.items() if run is not found and not run.busy()]
            while len(self._runs) > SEARCH_CACHE_RUNS and idle:
                del self._runs[idle.pop(0)]  # the least recently used first
            return found

    def _answer(self, runs: list[RunIndex], filters: Filters, sort: str, start: int, limit: int) -> dict[str, Any]:
        # One run: its page. Several: each run's first start + limit matches, merged in the sort's order.
        first = (start, limit) if len(runs) == 1 else (0, start + limit)
        matches, total, damage, rebuilding = [], 0, [], []
        for order, run in enumerate(runs):
            try:
                found, count = run.search.search(filters, sort, *first)
                damage += [f"{run.run_dir.name}: {what}" for what in run.search.damage()]
            except (Rebuilding, IndexDamaged) as err:
                rebuilding.append(self._rebuilding(run, err))
                continue
            except SearchUnavailable as err:
                raise p.RpcError(p.INTERNAL_ERROR, f"trajectory/search: {err}") from None
            matches += [(match.key, order, run.run_dir.name, match.summary) for match in found]
            total += count
        if rebuilding:  # never a part of a run counted as the whole of it
            done, steps = sum(r.done for r in rebuilding), sum(r.total for r in rebuilding)
            return {"items": [], "total": 0, "nextCursor": None, "rebuilding": {"done": done, "total": steps}}
        if len(runs) > 1:
            matches = sorted(matches, key=lambda match: match[:2])[start : start + limit]
        return {
            "items": [{"runId": run_id, "summary": summary} for _, _, run_id, summary in matches],
            "total": total,
            "nextCursor": str(start + limit) if start + limit < total else None,
            **({"damage": damage[:MAX_DAMAGE_SHOWN]} if damage else {}),
        }

    @staticmethod
    def _rebuilding(run: RunIndex, err: Rebuilding | IndexDamaged) -> Rebuilding:
        """How far the run's index is built; its catch-up (which moves a damaged index aside) started if it is not at
        work. A catch-up that failed is said, not waited for again in silence."""
        if run.failure is not None and not run.busy():
            failure, run.failure = run.failure, None  # the next search tries again
            raise p.RpcError(
                p.RUN_STATE_CONFLICT,
                f"trajectory/search: run {run.run_dir.name}'s search index cannot be built: {failure}",
            ) from None
        run.catch_up()
        return err if isinstance(err, Rebuilding) else Rebuilding(0, len(list_trajectory_files(run.run_dir)))


def _filters(params: dict[str, Any]) -> Filters:
    """The search's filters; INVALID_PARAMS for a text with no word in it, before any work."""
    filters = Filters(
        text=params.get("text"),
        text_in=params.get("textIn"),
        tool=params.get("tool"),
        error_kind=params.get("errorKind"),
        status=params.get("status"),
        reward=_range(params, "reward"),
        step=_range(params, "step"),
        turns=_range(params, "turns"),
        health_code=params.get("healthCode"),
    )
    if filters.text is not None:
        try:
            fts_query(filters.text, filters.text_in)
        except ValueError as err:
            raise p.RpcError(p.INVALID_PARAMS, f"trajectory/search: {err}") from None
    return filters


def _range(params: dict[str, Any], key: str) -> Range:
    bounds = params.get(key, {})
    return Range(bounds.get("min"), bounds.get("max"))

"""The trajectory/ methods: a run's trajectory summaries filtered and sorted (query), its episodes searched (search),
and whole records by id or by step (get)."""

from __future__ import annotations

import asyncio
from typing import Any

from agentrl.run.runstore import TRAJECTORIES_DIR, trajectory_file_name
from agentrl.server import protocol as p
from agentrl.server.client import Client
from agentrl.server.state import Handler, ServerState


async def trajectory_query(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    async with state.query_slots:
        return await asyncio.to_thread(query_page, state, params)


def query_page(state: ServerState, params: dict[str, Any]) -> dict[str, Any]:
    """trajectory/query's answer, read in the calling thread."""
    summaries = state.recent_summaries(state.runs.run_dir(params["runId"]))
    start = _decode_cursor(params.get("cursor"))
    limit = params.get("limit", 100)
    items, total = summaries.query(
        step=params.get("step"),
        status=params.get("status"),
        has_tool_error=params.get("hasToolError"),
        sort=params.get("sort", "step"),
        start=start,
        limit=limit,
    )
    return {"items": items, "total": total, "nextCursor": str(start + limit) if start + limit < total else None}


async def trajectory_search(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    return await state.episode_searches.search(params, _decode_cursor(params.get("cursor")), state.runs.run_dir)


async def trajectory_get(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    return await asyncio.to_thread(trajectory_records, state, params)


def trajectory_records(state: ServerState, params: dict[str, Any]) -> dict[str, Any]:
    """trajectory/get's answer, read in the calling thread."""
    ids, step = params.get("ids"), params.get("step")
    if (ids is None) == (step is None):
        raise p.RpcError(p.INVALID_PARAMS, "trajectory/get takes either ids or a step, not both or neither")
    trajectories = state.runs.run_dir(params["runId"]) / TRAJECTORIES_DIR
    if step is not None:
        path = trajectories / trajectory_file_name(step)
        return {"records": state.trajectory_index.all_records(path) if path.is_file() else []}
    by_step: dict[int, list[str]] = {}
    for trajectory_id in ids:  # an id starts with its step: "3-0-1"
        step_of_id = _ascii_int(trajectory_id.split("-", 1)[0])
        if step_of_id is not None:
            by_step.setdefault(step_of_id, []).append(trajectory_id)
    found: dict[str, dict[str, Any]] = {}
    for step_of_ids, wanted in by_step.items():
        path = trajectories / trajectory_file_name(step_of_ids)
        if path.is_file():
            found.update(state.trajectory_index.records(path, wanted))
    missing = [trajectory_id for trajectory_id in dict.fromkeys(ids) if trajectory_id not in found]
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise p.RpcError(
            p.TRAJECTORY_NOT_FOUND,
            f"run {params['runId']} has no trajectory {', '.join(map(repr, missing[:5]))}{more}",
        )
    return {"records": [found[trajectory_id] for trajectory_id in ids]}


def _decode_cursor(cursor: str | None) -> int:
    if cursor is None:
        return 0
    start = _ascii_int(cursor)
    if start is None:
        raise p.RpcError(
            p.INVALID_PARAMS, f"invalid cursor {cursor[:40]!r}: pass back the nextCursor of a previous page"
        )
    return start


def _ascii_int(text: str, max_digits: int = 18) -> int | None:
    """A non-negative integer written in ASCII digits, or None (str.isdigit also accepts '²' and other
    digits int() refuses, and int() refuses more than 4,300 digits)."""
    return int(text) if 0 < len(text) <= max_digits and text.isascii() and text.isdigit() else None


HANDLERS: dict[str, Handler] = {
    "trajectory/query": trajectory_query,
    "trajectory/search": trajectory_search,
    "trajectory/get": trajectory_get,
}

"""The methods that play a recorded trajectory again: one tool call re-run (tool/rerun), the episode edited at a turn
and played on (episode/reroll), and the re-rolls a run has stored (reroll/list, reroll/get)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from websockets.exceptions import ConnectionClosed

from agentrl.rollout.branch import CannotBranch, NoSuchTurn, branch_point
from agentrl.run.reroll_store import new_reroll_id
from agentrl.run.runstore import checkpoints_by_step
from agentrl.server import protocol as p
from agentrl.server.client import Client
from agentrl.server.handlers_trajectories import trajectory_records
from agentrl.server.reroll import reroll_episode, reroll_listing, stored_reroll
from agentrl.server.state import Handler, ServerState
from agentrl.server.toolrerun import recorded_call, rerun_call, wire_outcome
from agentrl.server.trajectory_index import replayable


async def _replayable_record(state: ServerState, run_id: str, trajectory_id: str) -> dict[str, Any]:
    """The trajectory's record, checked whole before it is played again (trajectory_index.replayable)."""
    found = await asyncio.to_thread(trajectory_records, state, {"runId": run_id, "ids": [trajectory_id]})
    return replayable(found["records"][0])


async def tool_rerun(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    """The recorded call, read from the run's trajectory (a client names a call, never its arguments), run
    again with today's code or the run's snapshot in a child process (rpc.md, `tool/rerun`)."""
    run_id, trajectory_id = params["runId"], params["trajectoryId"]
    record = await _replayable_record(state, run_id, trajectory_id)
    call = recorded_call(record, params["turn"], params["call"])
    code = params.get("code", "current")
    async with state.rerun_slots:
        rerun, timeout_s = await rerun_call(state.runs.run_dir(run_id), call, code)
    return {
        "runId": run_id,
        "trajectoryId": trajectory_id,
        "turn": params["turn"],
        "call": params["call"],
        "name": call["name"],
        "arguments": call["arguments"],
        "timeoutS": timeout_s,
        "recorded": wire_outcome(call),
        "rerun": rerun,
        "code": code,
    }


async def episode_reroll(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    """The trajectory, edited at one turn and played on `samples` times, in a child process (rpc.md,
    `episode/reroll`). What can be refused without loading anything is refused here."""
    run_id = params["runId"]
    run_dir = state.runs.run_dir(run_id)
    record = await _replayable_record(state, run_id, params["trajectoryId"])
    try:
        branch_point(record, params["turn"], params["edit"], params["text"])
    except NoSuchTurn as err:
        raise p.RpcError(p.TRAJECTORY_NOT_FOUND, str(err)) from None
    except CannotBranch as err:
        raise p.RpcError(p.INVALID_PARAMS, f"cannot re-roll from there: {err}") from None
    if (await asyncio.to_thread(state.runs.config, run_id)).get("env") is None:
        raise p.RpcError(
            p.RUN_STATE_CONFLICT,
            f"run {run_id} trains an agent (agent:): its own code plays its episodes and cannot be started again "
            "at a turn; a re-roll needs a ToolEnv run",
        )
    steps = sorted(checkpoints_by_step(run_dir))
    if params["policy"] == "base":
        policy_step = None
    elif params["policy"] == "latest":
        policy_step = steps[-1] if steps else None  # a run with no checkpoint yet (a Try run): its base model
    else:
        policy_step = int(params["policy"])
        if policy_step not in steps:
            raise p.RpcError(
                p.RUN_STATE_CONFLICT,
                f"run {run_id} has no checkpoint at step {policy_step}; it has "
                + (", ".join(map(str, steps)) if steps else "none (pick the base model)"),
            )
    token = params.get("progressToken")

    async def progress(message: str) -> None:
        if token is not None:
            with contextlib.suppress(ConnectionClosed):  # a client gone does not end its re-roll: it is stored
                await client.notify("episode/rerollProgress", {"progressToken": token, "message": message})

    request = {
        "reroll_id": new_reroll_id(),
        "record": record,
        "turn": params["turn"],
        "edit": params["edit"],
        "text": params["text"],
        "policy_step": policy_step,
        "samples": params["samples"],
        "temperature": params["temperature"],
        "seed": params.get("seed", 0),
        "code": params.get("code", "current"),
    }
    if state.reroll_slots.locked():
        await progress("waiting for another re-roll to end: one runs at a time")
    async with state.reroll_slots:
        await reroll_episode(run_dir, request, progress)
    return await asyncio.to_thread(_stored_reroll, state, {"runId": run_id, "rerollId": request["reroll_id"]})


async def reroll_list(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    return await asyncio.to_thread(_reroll_listing, state, params)


def _reroll_listing(state: ServerState, params: dict[str, Any]) -> dict[str, Any]:
    run_id = params["runId"]
    return reroll_listing(state.runs.run_dir(run_id), run_id, params.get("trajectoryId"), state.runs.config(run_id))


async def reroll_get(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    return await asyncio.to_thread(_stored_reroll, state, params)


def _stored_reroll(state: ServerState, params: dict[str, Any]) -> dict[str, Any]:
    return stored_reroll(state.runs.run_dir(params["runId"]), params["runId"], params["rerollId"])


HANDLERS: dict[str, Handler] = {
    "tool/rerun": tool_rerun,
    "episode/reroll": episode_reroll,
    "reroll/list": reroll_list,
    "reroll/get": reroll_get,
}

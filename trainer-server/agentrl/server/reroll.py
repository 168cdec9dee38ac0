"""`episode/reroll`: a recorded episode edited at one turn and played on from there, in a child process
(`agentrl.run.reroll`) as `tool/rerun` runs a call: the server's event loop only waits on pipes, the user's code never
runs here, and whatever the child started ends with the call. `reroll/list` and `reroll/get` read what it stored
(run/reroll_store.py): a damaged re-roll is listed under `damage`, and asked for alone is a run state conflict."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentrl.contract.files_inside import remove_staged
from agentrl.run.reroll_store import DamagedReroll, list_rerolls, read_reroll, reroll_files
from agentrl.run.runstore import checkpoints_by_step
from agentrl.server import protocol as p
from agentrl.server.children import PIPES_CLOSE_S, end_group, how_it_ended, keep_tail, read_answer, start_child
from agentrl.server.run_info import MAX_DAMAGE_SHOWN

# A re-roll loads the model and plays up to samples x rollout.max_turns turns with their Tools; past this it is ended.
REROLL_TIMEOUT_S = 1800.0


async def reroll_episode(run_dir: Path, request: dict[str, Any], progress: Callable[[str], Awaitable[None]]) -> None:
    """Runs the re-roll `request` (agentrl/run/reroll.py says what it holds) in a child process, passing on what it says
    of its progress; returns once it is stored, or raises REROLL_FAILED with why not."""
    process = await start_child(
        "agentrl.run.reroll",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None and process.stderr is not None
    stderr_tail = bytearray()
    draining = asyncio.get_running_loop().create_task(keep_tail(process.stderr, stderr_tail))
    deadline = asyncio.get_running_loop().time() + REROLL_TIMEOUT_S
    try:
        process.stdin.write(json.dumps({"run_dir": str(run_dir), **request}).encode())
        await process.stdin.drain()
        process.stdin.close()
        while True:
            answer = await read_answer(process, deadline - asyncio.get_running_loop().time())
            if answer is None:
                said = await how_it_ended("re-roll", "before it was stored", process, draining, stderr_tail)
                raise p.RpcError(p.REROLL_FAILED, said)
            if "progress" in answer:
                await progress(answer["progress"])
            elif "failed" in answer:
                raise p.RpcError(p.REROLL_FAILED, f"cannot re-roll: {answer['failed']}")
            else:
                return
    except TimeoutError:
        raise p.RpcError(
            p.REROLL_FAILED, f"the re-roll took longer than {REROLL_TIMEOUT_S:g} s; it was ended"
        ) from None
    finally:
        await end_group(process)  # the child, and whatever the env's Tools started in the background
        await process.wait()
        await asyncio.wait([draining], timeout=PIPES_CLOSE_S)
        draining.cancel()
        for path in reroll_files(run_dir, request["reroll_id"]):  # what a re-roll ended while writing left
            remove_staged(path.parent, path.name)


def wire_reroll(stored: dict[str, Any], run_id: str) -> dict[str, Any]:
    """A stored re-roll (snake_case, run-folder.schema.json's reroll) as `$defs/rerollSummary`."""
    return {
        "rerollId": stored["reroll_id"],
        "runId": run_id,
        "trajectoryId": stored["trajectory_id"],
        "turn": stored["turn"],
        "edit": stored["edit"],
        "text": stored["text"],
        "recordedText": stored["recorded_text"],
        "policyStep": stored["policy_step"],
        "samples": stored["samples"],
        "temperature": stored["temperature"],
        "seed": stored["seed"],
        "code": stored["code"],
        "differences": stored["differences"],
        "rewards": stored["rewards"],
        "createdAt": stored["created_at"],
        "elapsedS": stored["elapsed_s"],
    }


def reroll_listing(run_dir: Path, run_id: str, trajectory_id: str | None, config: dict[str, Any]) -> dict[str, Any]:
    """`reroll/list`'s result: the run's whole re-rolls (of `trajectory_id`, given one), each damaged one named under
    `damage`, and what a new re-roll may choose from (`config`: the run's frozen config)."""
    temperature = (config.get("rollout") or {}).get("temperature")
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or temperature < 0:
        raise p.RpcError(
            p.CONFIG_INVALID, f"run {run_id}'s config.yaml is damaged: rollout.temperature {temperature!r}"
        )
    damage: list[str] = []
    rerolls = [
        wire_reroll(stored, run_id)
        for stored in list_rerolls(run_dir, damage)
        if trajectory_id is None or stored["trajectory_id"] == trajectory_id
    ]
    return {
        "runId": run_id,
        "rerolls": rerolls,
        "checkpoints": sorted(checkpoints_by_step(run_dir)),
        "temperature": temperature,
        **({"damage": damage[:MAX_DAMAGE_SHOWN]} if damage else {}),
    }


def stored_reroll(run_dir: Path, run_id: str, reroll_id: str) -> dict[str, Any]:
    """`reroll/get`'s result: the re-roll and its records."""
    try:
        stored, records = read_reroll(run_dir, reroll_id)
    except FileNotFoundError:
        raise p.RpcError(p.TRAJECTORY_NOT_FOUND, f"run {run_id} has no re-roll {reroll_id}") from None
    except DamagedReroll as err:
        raise p.RpcError(p.RUN_STATE_CONFLICT, f"run {run_id}'s re-roll {reroll_id} is damaged: {err}") from None
    return {"reroll": wire_reroll(stored, run_id), "records": records}

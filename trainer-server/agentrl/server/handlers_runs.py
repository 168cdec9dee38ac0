"""The run/ methods: start, stop, resume, list, get, delete, a run's config and code, its export, and the
subscription to its events."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

from agentrl.contract.files_inside import folder_to_write, is_plain_folder
from agentrl.run.runstore import EXPORTS_DIR, last_seq
from agentrl.server import protocol as p
from agentrl.server.children import run_child
from agentrl.server.client import Client
from agentrl.server.event_stream import stream_events
from agentrl.server.state import Handler, ServerState

# An export loads the whole model: one at a time, and never longer than this.
EXPORT_TIMEOUT_S = 1800


async def run_start(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    # The folder a run config's relative paths resolve against (rpc.md, `run/start`).
    base = state.env_folder(params, "run/start", "envBundle") or Path.cwd()
    run_id = await state.runs.start(params["config"], base, params.get("mode", "train"), params.get("episodes"))
    return {"runId": run_id}


async def run_stop(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    status = await state.runs.stop(params["runId"], params["mode"])
    return {"runId": params["runId"], "status": status}


async def run_resume(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    return {"runId": params["runId"], "status": await state.runs.resume(params["runId"])}


# Methods that read run folders (event logs of any length) do it in a worker thread: the event loop
# keeps answering every other client meanwhile (initialize, pings, streams).
async def run_list(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    runs = await asyncio.to_thread(state.runs.list)
    state.runs.adopt_unwatched(runs)
    return {"runs": runs}


async def run_get(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    info = await asyncio.to_thread(state.runs.info, params["runId"])
    state.runs.adopt_unwatched([info])
    return info


async def run_delete(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    run_id = params["runId"]
    await state.runs.delete(run_id)
    state.forget_trajectories(run_id)
    return {"runId": run_id}


async def run_config(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    return {"runId": params["runId"], "config": await asyncio.to_thread(state.runs.config, params["runId"])}


async def run_code(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    return {"runId": params["runId"], "manifest": await asyncio.to_thread(state.runs.code, params["runId"])}


async def run_code_file(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    return await asyncio.to_thread(state.runs.code_file, params["runId"], params["path"])


async def run_export(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    """`agentrl export` in a child process (it loads the model: seconds of CPU, never on this loop), into the
    run's own folder, so a client names no path on the server's disk."""
    run_id = params["runId"]
    run_dir = state.runs.run_dir(run_id)
    merge = params.get("mergeLora", False)
    suffix = "-merged" if merge else ""
    async with state.export_slot:
        try:  # written inside the run folder only: never through a link planted as its exports/
            exports = folder_to_write(run_dir, EXPORTS_DIR)
        except OSError as err:
            raise p.RpcError(p.RUN_STATE_CONFLICT, f"cannot export {run_id}: {err}") from None
        staging = exports / f".tmp-{secrets.token_hex(4)}"
        try:
            exported = await run_child(
                "agentrl.cli",
                "export",
                str(run_dir),
                "--out",
                str(staging),
                *(["--step", str(params["step"])] if "step" in params else []),
                *(["--merge-lora"] if merge else []),
                timeout_s=EXPORT_TIMEOUT_S,
            )
            if exported.timed_out:
                raise p.RpcError(p.INTERNAL_ERROR, f"exporting {run_id} took longer than {EXPORT_TIMEOUT_S} s")
            if exported.returncode != 0:
                said = exported.stderr_tail.strip().splitlines()
                reason = said[-1].removeprefix("agentrl export: ") if said else exported.how_it_ended()
                raise p.RpcError(
                    p.RUN_STATE_CONFLICT if exported.returncode == 2 else p.INTERNAL_ERROR,
                    f"cannot export {run_id}: {reason}",
                )
            result = json.loads(exported.stdout.decode().strip().splitlines()[-1])
            final = exports / f"step-{result['step']:06d}{suffix}"
            if os.path.lexists(final) and not is_plain_folder(final):  # a link in its place: removed, not followed
                final.unlink()
            if not final.exists():  # exported before: the same checkpoint gives the same files
                staging.rename(final)
        finally:  # whatever ended the export (an error, the server shutting down), no half export is left
            await asyncio.to_thread(shutil.rmtree, staging, True)
    return {"runId": run_id, "step": result["step"], "path": str(final), "weights": result["weights"]}


async def run_subscribe(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    run_id = params["runId"]
    run_dir = state.runs.run_dir(run_id)
    since = params.get("since", 0)
    previous = client.subscriptions.pop(run_id, None)
    if previous is not None:
        previous.cancel()
    client.subscriptions[run_id] = asyncio.get_running_loop().create_task(
        stream_events(state.runs, client, run_id, run_dir, since)
    )
    return {"runId": run_id, "lastSeq": await asyncio.to_thread(last_seq, run_dir)}


async def run_unsubscribe(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    task = client.subscriptions.pop(params["runId"], None)
    if task is not None:
        task.cancel()
    return {"runId": params["runId"]}


HANDLERS: dict[str, Handler] = {
    "run/start": run_start,
    "run/stop": run_stop,
    "run/resume": run_resume,
    "run/list": run_list,
    "run/get": run_get,
    "run/delete": run_delete,
    "run/config": run_config,
    "run/code": run_code,
    "run/codeFile": run_code_file,
    "run/export": run_export,
    "run/subscribe": run_subscribe,
    "run/unsubscribe": run_unsubscribe,
}

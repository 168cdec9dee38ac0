"""The methods about an environment before it trains: a bundle uploaded (env/upload), the env checked (env/check),
an MCP server's tools listed (mcp/listTools), and a run config's memory planned (config/memoryPlan). What runs the
user's code or an MCP server does it in a child process, never in the server."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pydantic

from agentrl.contract.config import ConfigError, load_config_dict, resolve_paths
from agentrl.contract.env_sources import MCP_LISTING_FAILED_EXIT, McpServerConfig
from agentrl.learning.memory_advice import plan_longest_and_shortest, ways_to_fit
from agentrl.server import protocol as p
from agentrl.server.children import run_child
from agentrl.server.client import Client
from agentrl.server.state import Handler, ServerState

log = logging.getLogger("agentrl.server")

ENV_CHECK_TIMEOUT_S = 300.0
MCP_LIST_TIMEOUT_S = 75.0  # the listing's own start timeout (60 s), and the child's start-up
MCP_LISTING_MAX_BYTES = 4 << 20


async def env_upload(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    async with state.upload_slots:  # one per connection already: a connection's requests run in turn
        digest, files = await asyncio.to_thread(state.bundles.add, params["archive"])
    log.info("stored env bundle %s (%s, %d files)", digest[:12], params["name"], files)
    return {"bundleId": digest, "sha256": digest, "files": files}


async def env_check(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    folder = state.env_folder(params, "env/check", "bundleId")
    if folder is None:
        raise p.RpcError(p.INVALID_PARAMS, "env/check: give bundleId or configDir")
    target = folder / params["configFile"] if "configFile" in params else folder
    # The user's code runs in a child process, never in the server; what it starts ends with the check.
    checked = await run_child("agentrl.cli", "env", "check", str(target), "--json", timeout_s=ENV_CHECK_TIMEOUT_S)
    if checked.timed_out:
        raise p.RpcError(p.INTERNAL_ERROR, f"env check took longer than {ENV_CHECK_TIMEOUT_S:g} s") from None
    try:
        diagnostics = json.loads(checked.stdout)
    except json.JSONDecodeError:
        said = checked.stderr_tail.strip()[-2000:]
        diagnostics = [
            {
                "severity": "error",
                "message": f"env check {checked.how_it_ended()} before reporting (the env's code may have ended "
                f"the process, e.g. os._exit)" + (f": {said}" if said else ""),
            }
        ]
    return {
        "ok": not any(d["severity"] == "error" for d in diagnostics),
        "diagnostics": [_relative_to(folder, d) for d in diagnostics],
    }


def _relative_to(folder: Path, diagnostic: dict[str, Any]) -> dict[str, Any]:
    """A diagnostic whose file lies in the checked env folder names it relative to that folder: the client maps it
    onto its own copy of the folder (an uploaded bundle's path on the server means nothing to it)."""
    file = diagnostic.get("file")
    if file is None:
        return diagnostic
    try:
        inside = Path(file).resolve().relative_to(folder.resolve())
    except ValueError:
        return diagnostic
    return {**diagnostic, "file": inside.as_posix()}


async def config_memory_plan(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    base = state.env_folder(params, "config/memoryPlan", "envBundle") or Path.cwd()
    try:
        config = resolve_paths(load_config_dict(params["config"]), base)
    except ConfigError as err:
        raise p.RpcError(p.CONFIG_INVALID, str(err)) from None

    def plan() -> dict[str, Any]:
        planned = plan_longest_and_shortest(config, base)
        if isinstance(planned, str):
            return {"unavailable": planned}
        longest, shortest = planned
        wire = longest.to_wire()
        if shortest is not None:
            wire["shortestPeakBytes"] = shortest.peak_bytes
            wire["waysToFit"] = [
                {"text": way.text, "settings": way.settings, "peakBytes": way.peak_bytes}
                for way in ways_to_fit(config, base, longest)
            ]
        return {"plan": wire}

    return await asyncio.to_thread(plan)  # a tiny model's tokenizer is built, a config.json read


async def mcp_list_tools(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    try:
        entry = McpServerConfig.model_validate(params["server"])
    except pydantic.ValidationError as err:
        problem = err.errors()[0]
        where = ".".join(str(part) for part in ("server", *problem["loc"]))
        raise p.RpcError(p.INVALID_PARAMS, f"{where}: {problem['msg']}") from None
    # In a child process the server can end with everything it started (the MCP server's own process tree), a
    # few at a time, its output bounded: a hanging or endless server costs a slot for MCP_LIST_TIMEOUT_S at most.
    async with state.mcp_listing_slots:
        listed = await run_child(
            "agentrl.cli",
            "env",
            "mcp-tools",
            stdin=entry.model_dump_json().encode(),
            timeout_s=MCP_LIST_TIMEOUT_S,
            max_stdout=MCP_LISTING_MAX_BYTES,
        )
    where = f'MCP server "{entry.name}"'
    if listed.timed_out:
        reason = f"{where} did not start and list its tools within {MCP_LIST_TIMEOUT_S:g} s; it was ended"
    elif listed.too_large:
        reason = f"{where} listed more than {MCP_LISTING_MAX_BYTES >> 20} MiB of tools; it was ended"
    elif listed.returncode != 0:
        said = listed.stderr_tail.strip()
        reason = (
            said[-2000:]
            if listed.returncode == MCP_LISTING_FAILED_EXIT
            else f"the listing {listed.how_it_ended()}: {said[-2000:]}"
        )
    else:
        return {"server": entry.name, "tools": json.loads(listed.stdout)}
    raise p.RpcError(p.MCP_SERVER_UNAVAILABLE, reason)


HANDLERS: dict[str, Handler] = {
    "env/upload": env_upload,
    "env/check": env_check,
    "config/memoryPlan": config_memory_plan,
    "mcp/listTools": mcp_list_tools,
}

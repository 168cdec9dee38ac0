"""initialize and the server/ methods: the handshake that agrees on the protocol and says what this server can do,
the heartbeat, and shutdown."""

from __future__ import annotations

import logging
import time
from typing import Any

from agentrl import __version__
from agentrl.contract.training_config import ALGORITHM_NAMES
from agentrl.server import protocol as p
from agentrl.server.bundles import MAX_ARCHIVE_BYTES
from agentrl.server.client import MAX_MESSAGE_BYTES, Client
from agentrl.server.state import Handler, ServerState

log = logging.getLogger("agentrl.server")


async def initialize(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    major = params["protocolVersion"].split(".")[0]
    if major != p.PROTOCOL_VERSION.split(".")[0]:
        raise p.RpcError(
            p.INCOMPATIBLE_PROTOCOL,
            f"client speaks protocol {params['protocolVersion']}, this server {p.PROTOCOL_VERSION}; "
            f"update the extension or the trainer so their major versions match",
        )
    client.initialized = True
    return {
        "serverVersion": __version__,
        "protocolVersion": p.PROTOCOL_VERSION,
        "capabilities": {
            "algorithms": list(ALGORITHM_NAMES),
            "tryRuns": True,
            "envUpload": True,
            "maxMessageBytes": MAX_MESSAGE_BYTES,
            "maxBundleBytes": MAX_ARCHIVE_BYTES,
            "runsCode": state.options.runs_code,
        },
        "devices": state.devices,
    }


async def ping(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    return {"time": time.time()}


async def shutdown(state: ServerState, client: Client, params: dict[str, Any]) -> dict[str, Any]:
    log.info("shutdown requested; runs keep going in their own processes")
    state.shutdown_requested.set()
    return {}


HANDLERS: dict[str, Handler] = {
    "initialize": initialize,
    "server/ping": ping,
    "server/shutdown": shutdown,
}

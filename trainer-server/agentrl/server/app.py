"""The WebSocket server: authentication on the upgrade, then each connection's JSON-RPC requests checked and
dispatched to the method handlers (handlers_*.py, one module per namespace), whose results and errors it answers."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import signal
from collections.abc import Awaitable
from http import HTTPStatus
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from agentrl.models.devices import describe_devices
from agentrl.server import handlers_env, handlers_rerolls, handlers_runs, handlers_server, handlers_trajectories
from agentrl.server import protocol as p
from agentrl.server.children import end_all
from agentrl.server.client import MAX_MESSAGE_BYTES, Client
from agentrl.server.run_holds import RUN_HOLDING_METHODS
from agentrl.server.state import Handler, ServerOptions, ServerState

log = logging.getLogger("agentrl.server")

MAX_REQUEST_BYTES = 1 * 2**20  # every request but an env/upload (MAX_MESSAGE_BYTES)
# Frames a connection may have received and not yet handled (each up to MAX_MESSAGE_BYTES): a client that
# sends faster than its requests are answered waits on TCP instead of growing the server's memory.
MAX_QUEUED_FRAMES = 4


def origin_allowed(origin: str | None, allowed: tuple[str, ...]) -> bool:
    """Non-browser clients (the extension host, scripts) send no Origin. A browser always does, so a
    web page cannot drive a local server unless its origin was allowed explicitly."""
    return origin is None or origin in allowed


def make_request_check(options: ServerOptions, open_connections: Any) -> Any:
    def check(connection: ServerConnection, request: Request) -> Response | None:
        if open_connections() >= options.max_connections:
            log.warning("refused a connection: %d are open, the limit", options.max_connections)
            return connection.respond(
                HTTPStatus.SERVICE_UNAVAILABLE, f"{options.max_connections} connections are open, the server's limit\n"
            )
        headers: Headers = request.headers
        repeated = [name for name in ("Origin", "Authorization") if len(headers.get_all(name)) > 1]
        if repeated:
            log.warning("rejected a connection with several %s headers", repeated[0])
            return connection.respond(HTTPStatus.BAD_REQUEST, f"several {repeated[0]} headers; send one\n")
        if not origin_allowed(headers.get("Origin"), options.allowed_origins):
            log.warning("rejected a connection from origin %s", headers.get("Origin"))
            return connection.respond(HTTPStatus.FORBIDDEN, "origin not allowed\n")
        if options.token is not None:
            supplied = headers.get("Authorization", "")
            expected = f"Bearer {options.token}"
            if not hmac.compare_digest(supplied.encode(), expected.encode()):
                log.warning("rejected a connection with a missing or wrong token")
                return connection.respond(HTTPStatus.UNAUTHORIZED, "missing or wrong bearer token\n")
        return None

    return check


# Methods whose answer waits on a child process, for seconds to minutes: each is answered from a task of its own, so the
# connection's next requests are answered meanwhile. The editor's heartbeat (server/ping every 15 s, dropped after 15 s
# unanswered) would otherwise end the connection under a re-roll or an export that takes longer.
ANSWERED_IN_BACKGROUND = frozenset({"env/check", "mcp/listTools", "run/export", "tool/rerun", "episode/reroll"})


class TrainerServer:
    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self.state = ServerState(options)  # what the handlers share
        self.open_connections = 0
        self.server: Server | None = None
        self.handlers: dict[str, Handler] = {
            **handlers_server.HANDLERS,
            **handlers_runs.HANDLERS,
            **handlers_trajectories.HANDLERS,
            **handlers_rerolls.HANDLERS,
            **handlers_env.HANDLERS,
        }
        assert set(self.handlers) == set(p.METHODS), "handlers and rpc.schema.json x-methods drifted"

    async def serve_forever(self, on_listening: Any) -> None:
        self.state.runs.recover()
        # Describing the devices imports torch (1-2 s): done once, before the server says it listens, so the first
        # client's initialize does not wait for it. The devices of a machine do not change while it serves.
        self.state.devices = await asyncio.to_thread(describe_devices)
        async with serve(
            self.connection_handler,
            self.options.host,
            self.options.port,
            process_request=make_request_check(self.options, lambda: self.open_connections),
            max_size=MAX_MESSAGE_BYTES,
            max_queue=MAX_QUEUED_FRAMES,
            ping_interval=20,
            ping_timeout=20,
            ssl=self.options.ssl,
        ) as server:
            self.server = server
            port = next(iter(server.sockets)).getsockname()[1]
            # SIGTERM shuts down as server/shutdown does: the children answering calls (an export, a check) end
            # with the server, and what they leave is cleaned up; runs go on in their own processes.
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self.state.shutdown_requested.set)
            on_listening(port)
            await self.state.shutdown_requested.wait()
            await asyncio.sleep(0.05)  # let the shutdown response reach its client
            await end_all()  # before the connections close: a call waiting on its child then answers at once

    # --- connection -------------------------------------------------------------------------
    async def connection_handler(self, connection: ServerConnection) -> None:
        client = Client(connection)
        self.open_connections += 1
        try:
            async for raw in connection:
                response = await self.handle_message(client, raw)
                if response is not None:
                    await client.send(response)
        except ConnectionClosed:
            pass
        finally:
            self.open_connections -= 1
            for task in client.subscriptions.values():
                task.cancel()  # the runs go on; only this client's streams end

    async def handle_message(self, client: Client, raw: str | bytes) -> dict[str, Any] | None:
        if isinstance(raw, bytes):
            return _error(None, p.INVALID_REQUEST, "binary frames are not JSON-RPC; send text frames")
        try:
            message = json.loads(raw)
        except (ValueError, RecursionError) as err:  # ValueError: bad JSON, or an integer over Python's digit limit
            return _error(None, p.PARSE_ERROR, f"parse error: {err}")
        if isinstance(message, list):
            return _error(None, p.INVALID_REQUEST, "batch requests are not supported; send one request per frame")
        if (
            not isinstance(message, dict)
            or message.get("jsonrpc") != "2.0"
            or not isinstance(message.get("method"), str)
        ):
            request_id = message.get("id") if isinstance(message, dict) else None
            return _error(
                _valid_id(request_id),
                p.INVALID_REQUEST,
                'invalid request: expected an object with "jsonrpc": "2.0" and a string "method"',
            )
        request_id = message.get("id")
        if "id" in message and not _is_valid_id(request_id):
            return _error(None, p.INVALID_REQUEST, "invalid request: id must be a string or an integer")
        is_notification = "id" not in message
        method = message["method"]
        if method != "env/upload" and len(raw) > MAX_REQUEST_BYTES:
            return (
                None
                if is_notification
                else _error(
                    request_id, p.MESSAGE_TOO_LARGE, f"request of {len(raw)} bytes over the {MAX_REQUEST_BYTES} limit"
                )
            )
        params = message.get("params", {})
        try:
            handler = self.handlers.get(method)
            if handler is None:
                raise p.RpcError(p.METHOD_NOT_FOUND, f"method not found: {method!r}")
            if not isinstance(params, dict):
                raise p.RpcError(p.INVALID_PARAMS, "params must be an object")
            p.check_params(method, params)
            if method != "initialize" and not client.initialized:
                raise p.RpcError(p.NOT_INITIALIZED, f"{method}: send initialize first")
            if method in p.CODE_RUNNING_METHODS and not self.options.runs_code:
                raise p.RpcError(
                    p.CODE_NOT_ALLOWED,
                    f"{method} runs code on the server's machine, and this server listens on {self.options.host}, not "
                    f"loopback; restart it with `agentrl serve --allow-code` to allow it (whoever holds its token can "
                    f"then run any code as its user)",
                )
        except p.RpcError as err:
            return None if is_notification else _error(request_id, err.code, err.message, err.data)
        work = handler(self.state, client, params)
        if method in RUN_HOLDING_METHODS:  # run/delete is refused while it works on the run (server/run_holds.py)
            work = self.state.runs.holds.while_held(params["runId"], RUN_HOLDING_METHODS[method], work)
        answer = self._answer(method, request_id, work)
        if method in ANSWERED_IN_BACKGROUND and not is_notification:
            await client.answer_in_background(answer)
            return None
        response = await answer
        return None if is_notification else response

    async def _answer(self, method: str, request_id: Any, work: Awaitable[dict[str, Any]]) -> dict[str, Any]:
        """The response to a request that passed the checks: its handler's result, or the error it raised."""
        try:
            return {"jsonrpc": "2.0", "id": request_id, "result": await work}
        except p.RpcError as err:
            return _error(request_id, err.code, err.message, err.data)
        except Exception as err:  # noqa: BLE001 - one bad request never takes the server down
            log.exception("internal error in %s", method)
            return _error(request_id, p.INTERNAL_ERROR, f"internal error: {err}")


def _is_valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _valid_id(value: Any) -> Any:
    return value if _is_valid_id(value) else None


def _error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}

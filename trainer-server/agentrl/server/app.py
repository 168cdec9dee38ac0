"""The WebSocket server: authentication on the upgrade, JSON-RPC dispatch, run event streaming."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import re
import secrets
import shutil
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pydantic
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from agentrl import __version__
from agentrl.contract.config import ConfigError, load_config_dict, resolve_paths
from agentrl.contract.env_sources import MCP_LISTING_FAILED_EXIT, McpServerConfig
from agentrl.contract.files_inside import folder_to_write, is_plain_folder
from agentrl.contract.training_config import ALGORITHM_NAMES
from agentrl.learning.memory_advice import plan_longest_and_shortest, ways_to_fit
from agentrl.models.devices import describe_devices
from agentrl.rollout.branch import CannotBranch, NoSuchTurn, branch_point
from agentrl.run.log_lines import complete_lines, overlong
from agentrl.run.reroll_store import new_reroll_id
from agentrl.run.runstore import (
    EVENTS_FILE,
    EXPORTS_DIR,
    TRAJECTORIES_DIR,
    checkpoints_by_step,
    last_seq,
    open_log,
    parse_event,
    trajectory_file_name,
)
from agentrl.run.trajectory_summaries import TrajectorySummaries
from agentrl.server import protocol as p
from agentrl.server.bundles import MAX_ARCHIVE_BYTES, BundleStore
from agentrl.server.children import end_all, run_child
from agentrl.server.episode_searches import EpisodeSearches
from agentrl.server.reroll import reroll_episode, reroll_listing, stored_reroll
from agentrl.server.run_holds import RUN_HOLDING_METHODS
from agentrl.server.run_info import status_run_info
from agentrl.server.runs import RunManager
from agentrl.server.toolrerun import recorded_call, rerun_call, wire_outcome
from agentrl.server.trajectory_index import TrajectoryIndex, replayable

log = logging.getLogger("agentrl.server")

MAX_MESSAGE_BYTES = 48 * 2**20  # an env/upload carries a base64 archive
MAX_REQUEST_BYTES = 1 * 2**20  # every other request
BEHIND_THRESHOLD = 5_000  # events a subscriber may lag before it is told it fell behind
EVENTS_PER_TURN = 16  # events a subscriber's stream sends before it lets the server's other work run
STREAM_READ_BYTES = 1 << 18  # of the event log, read and parsed at a time for one subscriber
POLL_SECONDS = 0.1
# How often a subscription to a run no process of this server runs reads its log: only another program (an
# `agentrl train --resume` outside the server) can add to it. 600 such subscriptions polled at POLL_SECONDS took 35%
# of a core.
IDLE_POLL_SECONDS = 10.0


@dataclass
class ServerOptions:
    host: str
    port: int
    runs_dir: Path
    bundles_dir: Path
    token: str | None
    allowed_origins: tuple[str, ...] = ()
    max_connections: int = 32
    max_runs: int | None = None  # run processes at once (the rest wait, queued); None: runs.default_max_runs()
    # Whether the methods that run code on this machine at a client's request (p.CODE_RUNNING_METHODS) are allowed:
    # on loopback, or when asked for (agentrl serve --allow-code).
    runs_code: bool = False
    ray_address: str | None = None  # --ray: the Ray cluster every run started here runs on


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
# Of those, at most this many wait on one connection; its next request waits for one, as unread frames wait on TCP.
MAX_BACKGROUND_ANSWERS = 4


@dataclass
class Client:
    connection: ServerConnection
    initialized: bool = False
    subscriptions: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    send_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    background: set[asyncio.Task[None]] = field(default_factory=set)  # answers it waits for (answer_in_background)

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_text(json.dumps(message, allow_nan=False))

    async def send_text(self, frame: str) -> None:
        async with self.send_lock:
            await self.connection.send(frame)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def answer_in_background(self, response: Awaitable[dict[str, Any]]) -> None:
        """Sends `response` once it is ready, from a task of its own, while this connection's next requests are
        answered; past MAX_BACKGROUND_ANSWERS waiting, first waits for one. A client gone by then misses its answer,
        and the work (a re-roll) is done all the same."""
        while len(self.background) >= MAX_BACKGROUND_ANSWERS:
            await asyncio.wait(self.background, return_when=asyncio.FIRST_COMPLETED)

        async def send_when_ready() -> None:
            answer = await response
            with contextlib.suppress(ConnectionClosed):
                await self.send(answer)

        task = asyncio.get_running_loop().create_task(send_when_ready())
        self.background.add(task)
        task.add_done_callback(self.background.discard)


MAX_CONCURRENT_UPLOADS = 2
MAX_CONCURRENT_RERUNS = 2  # each is a child process building the user's env
MAX_CONCURRENT_REROLLS = 1  # each is a child process loading the model as well: the rest wait
MAX_CONCURRENT_MCP_LISTINGS = 2  # each is a child process with an MCP server of the client's choosing
MCP_LIST_TIMEOUT_S = 75.0  # the listing's own start timeout (60 s), and the child's start-up
MCP_LISTING_MAX_BYTES = 4 << 20
ENV_CHECK_TIMEOUT_S = 300.0
# An export loads the whole model: one at a time, and never longer than this.
EXPORT_TIMEOUT_S = 1800
# Frames a connection may have received and not yet handled (each up to MAX_MESSAGE_BYTES): a client that
# sends faster than its requests are answered waits on TCP instead of growing the server's memory.
MAX_QUEUED_FRAMES = 4
# trajectory/query calls worked on at once (the rest wait): each is Python work that holds the interpreter's lock in
# turns, and eight at once made every other client's request wait for it (run/get: 290 ms at worst, 2 cores).
MAX_CONCURRENT_QUERIES = 2
# Runs whose trajectory summaries stay in memory for trajectory/query (about 25 MB for 300,000 trajectories); the
# least recently queried is dropped, and read from its index again if asked.
SUMMARY_CACHE_RUNS = 8


class TrainerServer:
    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self.runs = RunManager(options.runs_dir, options.ray_address, options.max_runs)
        self.bundles = BundleStore(options.bundles_dir)
        # Uploads run in worker threads; bounded, they never take every worker from the other requests.
        self.upload_slots = asyncio.Semaphore(MAX_CONCURRENT_UPLOADS)
        self.export_slot = asyncio.Semaphore(1)
        self.rerun_slots = asyncio.Semaphore(MAX_CONCURRENT_RERUNS)
        self.reroll_slots = asyncio.Semaphore(MAX_CONCURRENT_REROLLS)
        self.mcp_listing_slots = asyncio.Semaphore(MAX_CONCURRENT_MCP_LISTINGS)
        self.query_slots = asyncio.Semaphore(MAX_CONCURRENT_QUERIES)
        self.trajectory_index = TrajectoryIndex()
        self.summaries: OrderedDict[str, TrajectorySummaries] = OrderedDict()
        self.episode_searches = EpisodeSearches(self.query_slots)  # trajectory/search's, sharing the query slots
        self.cache_lock = threading.Lock()
        self.open_connections = 0
        self.devices: dict[str, Any] = {}  # described once, before the server listens (serve_forever)
        self.server: Server | None = None
        self.shutdown_requested = asyncio.Event()
        self.handlers = {
            "initialize": self.initialize,
            "run/start": self.run_start,
            "run/stop": self.run_stop,
            "run/resume": self.run_resume,
            "run/list": self.run_list,
            "run/get": self.run_get,
            "run/delete": self.run_delete,
            "run/config": self.run_config,
            "run/code": self.run_code,
            "run/codeFile": self.run_code_file,
            "run/export": self.run_export,
            "run/subscribe": self.run_subscribe,
            "run/unsubscribe": self.run_unsubscribe,
            "trajectory/query": self.trajectory_query,
            "trajectory/search": self.trajectory_search,
            "trajectory/get": self.trajectory_get,
            "tool/rerun": self.tool_rerun,
            "episode/reroll": self.episode_reroll,
            "reroll/list": self.reroll_list,
            "reroll/get": self.reroll_get,
            "env/upload": self.env_upload,
            "env/check": self.env_check,
            "config/memoryPlan": self.config_memory_plan,
            "mcp/listTools": self.mcp_list_tools,
            "server/ping": self.ping,
            "server/shutdown": self.shutdown,
        }
        assert set(self.handlers) == set(p.METHODS), "handlers and rpc.schema.json x-methods drifted"

    async def serve_forever(self, on_listening: Any) -> None:
        self.runs.recover()
        # Describing the devices imports torch (1-2 s): done once, before the server says it listens, so the first
        # client's initialize does not wait for it. The devices of a machine do not change while it serves.
        self.devices = await asyncio.to_thread(describe_devices)
        async with serve(
            self.connection_handler,
            self.options.host,
            self.options.port,
            process_request=make_request_check(self.options, lambda: self.open_connections),
            max_size=MAX_MESSAGE_BYTES,
            max_queue=MAX_QUEUED_FRAMES,
            ping_interval=20,
            ping_timeout=20,
        ) as server:
            self.server = server
            port = next(iter(server.sockets)).getsockname()[1]
            # SIGTERM shuts down as server/shutdown does: the children answering calls (an export, a check) end
            # with the server, and what they leave is cleaned up; runs go on in their own processes.
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self.shutdown_requested.set)
            on_listening(port)
            await self.shutdown_requested.wait()
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
        work = handler(client, params)
        if method in RUN_HOLDING_METHODS:  # run/delete is refused while it works on the run (server/run_holds.py)
            work = self.runs.holds.while_held(params["runId"], RUN_HOLDING_METHODS[method], work)
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

    # --- methods ----------------------------------------------------------------------------
    async def initialize(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
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
                "runsCode": self.options.runs_code,
            },
            "devices": self.devices,
        }

    async def run_start(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        base = self._config_base(params)
        run_id = await self.runs.start(params["config"], base, params.get("mode", "train"), params.get("episodes"))
        return {"runId": run_id}

    def _config_base(self, params: dict[str, Any]) -> Path:
        """The folder a run config's relative paths resolve against (rpc.md, `run/start`)."""
        return self._env_folder(params, "run/start", "envBundle") or Path.cwd()

    def _env_folder(self, params: dict[str, Any], method: str, bundle_key: str) -> Path | None:
        """The env folder a request names: `configDir`, a folder on the server's machine (a client sharing its
        filesystem), or an uploaded bundle's (`bundle_key`); None when it names neither."""
        if "configDir" in params:
            if bundle_key in params:
                raise p.RpcError(p.INVALID_PARAMS, f"{method}: give configDir or {bundle_key}, not both")
            folder = Path(params["configDir"])
            if not folder.is_absolute() or not folder.is_dir():
                raise p.RpcError(
                    p.INVALID_PARAMS,
                    f"{method}: configDir {params['configDir']!r} is not an absolute folder on the server's machine",
                )
            return folder
        return self.bundles.path(params[bundle_key]) if bundle_key in params else None

    async def run_stop(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        status = await self.runs.stop(params["runId"], params["mode"])
        return {"runId": params["runId"], "status": status}

    async def run_resume(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        return {"runId": params["runId"], "status": await self.runs.resume(params["runId"])}

    # Methods that read run folders (event logs of any length) do it in a worker thread: the event loop
    # keeps answering every other client meanwhile (initialize, pings, streams).
    async def run_list(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        runs = await asyncio.to_thread(self.runs.list)
        self.runs.adopt_unwatched(runs)
        return {"runs": runs}

    async def run_get(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        info = await asyncio.to_thread(self.runs.info, params["runId"])
        self.runs.adopt_unwatched([info])
        return info

    async def run_delete(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        run_id = params["runId"]
        await self.runs.delete(run_id)
        with self.cache_lock:  # what the trajectory methods know of it goes too
            self.summaries.pop(run_id, None)
        self.episode_searches.forget(run_id)
        self.trajectory_index.forget(self.options.runs_dir / run_id)
        return {"runId": run_id}

    async def run_config(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        return {"runId": params["runId"], "config": await asyncio.to_thread(self.runs.config, params["runId"])}

    async def run_code(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        return {"runId": params["runId"], "manifest": await asyncio.to_thread(self.runs.code, params["runId"])}

    async def run_code_file(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        return await asyncio.to_thread(self.runs.code_file, params["runId"], params["path"])

    async def run_export(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """`agentrl export` in a child process (it loads the model: seconds of CPU, never on this loop), into the
        run's own folder, so a client names no path on the server's disk."""
        run_id = params["runId"]
        run_dir = self.runs.run_dir(run_id)
        merge = params.get("mergeLora", False)
        suffix = "-merged" if merge else ""
        async with self.export_slot:
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

    async def run_subscribe(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        run_id = params["runId"]
        run_dir = self.runs.run_dir(run_id)
        since = params.get("since", 0)
        previous = client.subscriptions.pop(run_id, None)
        if previous is not None:
            previous.cancel()
        client.subscriptions[run_id] = asyncio.get_running_loop().create_task(
            self._stream(client, run_id, run_dir, since)
        )
        return {"runId": run_id, "lastSeq": await asyncio.to_thread(last_seq, run_dir)}

    async def _stream(self, client: Client, run_id: str, run_dir: Path, since: int) -> None:
        """Every event with seq > since, from the log, then new ones as they are appended. The cursor
        is the last seq sent, so a reconnecting client gets no gap and no duplicate; the log on disk
        is the buffer, so a slow client costs the training process nothing."""
        sent = since
        offset = 0
        told_behind = False
        path = run_dir / EVENTS_FILE
        try:
            while True:
                events, offset, latest = await asyncio.to_thread(_read_new_events, path, offset, run_id)
                fresh = [(seq, frame) for seq, frame in events if seq > sent]
                if latest - sent > BEHIND_THRESHOLD and not told_behind:
                    await client.notify("run/behind", {"runId": run_id, "sentSeq": sent, "latestSeq": latest})
                    told_behind = True
                for count, (seq, frame) in enumerate(fresh, 1):
                    await client.send_text(frame)
                    sent = seq
                    if count % EVENTS_PER_TURN == 0:
                        # A send into a socket with room does not suspend; without this a subscriber replaying a
                        # long log would keep the loop (and every other client's handshake) until its buffers fill.
                        await asyncio.sleep(0)
                if not fresh:
                    told_behind = False
                    if run_id in self.runs.live:
                        await asyncio.sleep(POLL_SECONDS)
                    elif not run_dir.is_dir():  # deleted (run/delete): nothing will ever be added
                        return
                    else:  # no process of this server writes it: woken when one starts (a resume), else rarely read
                        await self.runs.started_again(run_id, IDLE_POLL_SECONDS)
        except ConnectionClosed:
            pass

    async def run_unsubscribe(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        task = client.subscriptions.pop(params["runId"], None)
        if task is not None:
            task.cancel()
        return {"runId": params["runId"]}

    async def trajectory_query(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        async with self.query_slots:
            return await asyncio.to_thread(self._trajectory_query, params)

    def _recent(self, cache: OrderedDict[str, Any], run_dir: Path, make: Any) -> Any:
        """The run's entry of `cache` (made if missing), now its most recently used; the least recently used beyond
        SUMMARY_CACHE_RUNS are dropped."""
        with self.cache_lock:
            found = cache.pop(run_dir.name, None) or make(run_dir)
            cache[run_dir.name] = found
            while len(cache) > SUMMARY_CACHE_RUNS:
                cache.popitem(last=False)
            return found

    def _trajectory_query(self, params: dict[str, Any]) -> dict[str, Any]:
        summaries = self._recent(self.summaries, self.runs.run_dir(params["runId"]), TrajectorySummaries)
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

    async def trajectory_search(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        return await self.episode_searches.search(params, _decode_cursor(params.get("cursor")), self.runs.run_dir)

    async def trajectory_get(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        return await asyncio.to_thread(self._trajectory_get, params)

    def _trajectory_get(self, params: dict[str, Any]) -> dict[str, Any]:
        ids, step = params.get("ids"), params.get("step")
        if (ids is None) == (step is None):
            raise p.RpcError(p.INVALID_PARAMS, "trajectory/get takes either ids or a step, not both or neither")
        trajectories = self.runs.run_dir(params["runId"]) / TRAJECTORIES_DIR
        if step is not None:
            path = trajectories / trajectory_file_name(step)
            return {"records": self.trajectory_index.all_records(path) if path.is_file() else []}
        by_step: dict[int, list[str]] = {}
        for trajectory_id in ids:  # an id starts with its step: "3-0-1"
            step_of_id = _ascii_int(trajectory_id.split("-", 1)[0])
            if step_of_id is not None:
                by_step.setdefault(step_of_id, []).append(trajectory_id)
        found: dict[str, dict[str, Any]] = {}
        for step_of_ids, wanted in by_step.items():
            path = trajectories / trajectory_file_name(step_of_ids)
            if path.is_file():
                found.update(self.trajectory_index.records(path, wanted))
        missing = [trajectory_id for trajectory_id in dict.fromkeys(ids) if trajectory_id not in found]
        if missing:
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            raise p.RpcError(
                p.TRAJECTORY_NOT_FOUND,
                f"run {params['runId']} has no trajectory {', '.join(map(repr, missing[:5]))}{more}",
            )
        return {"records": [found[trajectory_id] for trajectory_id in ids]}

    async def _replayable_record(self, run_id: str, trajectory_id: str) -> dict[str, Any]:
        """The trajectory's record, checked whole before it is played again (trajectory_index.replayable)."""
        found = await asyncio.to_thread(self._trajectory_get, {"runId": run_id, "ids": [trajectory_id]})
        return replayable(found["records"][0])

    async def tool_rerun(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """The recorded call, read from the run's trajectory (a client names a call, never its arguments), run
        again with today's code or the run's snapshot in a child process (rpc.md, `tool/rerun`)."""
        run_id, trajectory_id = params["runId"], params["trajectoryId"]
        record = await self._replayable_record(run_id, trajectory_id)
        call = recorded_call(record, params["turn"], params["call"])
        code = params.get("code", "current")
        async with self.rerun_slots:
            rerun, timeout_s = await rerun_call(self.runs.run_dir(run_id), call, code)
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

    async def episode_reroll(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """The trajectory, edited at one turn and played on `samples` times, in a child process (rpc.md,
        `episode/reroll`). What can be refused without loading anything is refused here."""
        run_id = params["runId"]
        run_dir = self.runs.run_dir(run_id)
        record = await self._replayable_record(run_id, params["trajectoryId"])
        try:
            branch_point(record, params["turn"], params["edit"], params["text"])
        except NoSuchTurn as err:
            raise p.RpcError(p.TRAJECTORY_NOT_FOUND, str(err)) from None
        except CannotBranch as err:
            raise p.RpcError(p.INVALID_PARAMS, f"cannot re-roll from there: {err}") from None
        if (await asyncio.to_thread(self.runs.config, run_id)).get("env") is None:
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
        if self.reroll_slots.locked():
            await progress("waiting for another re-roll to end: one runs at a time")
        async with self.reroll_slots:
            await reroll_episode(run_dir, request, progress)
        return await asyncio.to_thread(self._reroll_get, {"runId": run_id, "rerollId": request["reroll_id"]})

    async def reroll_list(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        return await asyncio.to_thread(self._reroll_list, params)

    def _reroll_list(self, params: dict[str, Any]) -> dict[str, Any]:
        run_id = params["runId"]
        return reroll_listing(self.runs.run_dir(run_id), run_id, params.get("trajectoryId"), self.runs.config(run_id))

    async def reroll_get(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        return await asyncio.to_thread(self._reroll_get, params)

    def _reroll_get(self, params: dict[str, Any]) -> dict[str, Any]:
        return stored_reroll(self.runs.run_dir(params["runId"]), params["runId"], params["rerollId"])

    async def env_upload(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        async with self.upload_slots:  # one per connection already: a connection's requests run in turn
            digest, files = await asyncio.to_thread(self.bundles.add, params["archive"])
        log.info("stored env bundle %s (%s, %d files)", digest[:12], params["name"], files)
        return {"bundleId": digest, "sha256": digest, "files": files}

    async def env_check(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        folder = self._env_folder(params, "env/check", "bundleId")
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

    async def config_memory_plan(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        base = self._env_folder(params, "config/memoryPlan", "envBundle") or Path.cwd()
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
                wire["waysToFit"] = [way.text for way in ways_to_fit(config, base, longest)]
            return {"plan": wire}

        return await asyncio.to_thread(plan)  # a tiny model's tokenizer is built, a config.json read

    async def mcp_list_tools(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        try:
            entry = McpServerConfig.model_validate(params["server"])
        except pydantic.ValidationError as err:
            problem = err.errors()[0]
            where = ".".join(str(part) for part in ("server", *problem["loc"]))
            raise p.RpcError(p.INVALID_PARAMS, f"{where}: {problem['msg']}") from None
        # In a child process the server can end with everything it started (the MCP server's own process tree), a
        # few at a time, its output bounded: a hanging or endless server costs a slot for MCP_LIST_TIMEOUT_S at most.
        async with self.mcp_listing_slots:
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

    async def ping(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        return {"time": time.time()}

    async def shutdown(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        log.info("shutdown requested; runs keep going in their own processes")
        self.shutdown_requested.set()
        return {}


_EVENT_PREFIX = re.compile(
    rb'\{"seq": (\d+), "time": [^,]*, "type": "(\w+)", '
)  # how RunStore.append_event begins every line


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


def _read_new_events(path: Path, offset: int, run_id: str) -> tuple[list[tuple[int, str]], int, int]:
    """The complete events after `offset`, about STREAM_READ_BYTES of them (more only when one event is longer),
    each as (seq, its `run/event` notification frame), the offset after them, and the seq of the log's last event
    (how far behind the log a subscriber is). Each line is checked (runstore.parse_event): a damaged one is skipped
    and logged, the events around it stream. The frame is the log line itself inside the envelope, not serialized
    again; a status event's frame also carries the RunInfo fields it sets."""
    handle = open_log(path.parent)  # a log that is a link or a FIFO reads as none (run/get names it as damage)
    if handle is None:
        return [], offset, 0
    envelope = '{"jsonrpc": "2.0", "method": "run/event", "params": {"runId": ' + json.dumps(run_id) + ", "
    events = []
    end = offset
    with handle:
        for line_start, length, line in complete_lines(handle, offset):  # each line bounded (run/log_lines.py)
            end = line_start + length
            if end - offset > STREAM_READ_BYTES and line_start > offset:
                end = line_start  # this line is read next time
                break
            event = overlong(length) if line is None else parse_event(line)
            if isinstance(event, str):
                if line is None or line.strip():
                    log.warning(
                        "run %s: skipped the damaged line at byte %d of %s: %s", run_id, line_start, path, event
                    )
                continue
            text = (
                line.decode("utf-8").strip() if line and _EVENT_PREFIX.match(line) else json.dumps(event)
            )  # as written
            run_info = (
                '"runInfo": ' + json.dumps(status_run_info(event["data"])) + ", " if event["type"] == "status" else ""
            )
            events.append((event["seq"], envelope + run_info + text[1:] + "}"))
        more_after_chunk = end < handle.seek(0, 2)
    # Only a subscriber still replaying the log has more of it than this read: then the log's tail says its end.
    latest = last_seq(path.parent) if more_after_chunk or not events else events[-1][0]
    return events, end, latest


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


def _is_valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _valid_id(value: Any) -> Any:
    return value if _is_valid_id(value) else None


def _error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}

"""MCP servers as Tools (`env.mcp_servers` in the run config), through the official `mcp` SDK.

Each configured server is one long-lived connection per process (a stdio child process, or a streamable HTTP
session), shared by every episode that process runs. Its tools are listed when it starts and again whenever it
restarts; every episode is offered the current listing beside the ToolEnv's own Tools, under the server's tool
names (or `server__tool` where two names collide). A call goes through the same path as any Tool's (argument
validation against the listed schema, the timeout, the error the model reads). A server that crashes or stops
answering fails the calls in flight with an error naming the server, is marked broken, and is restarted when the
next episode starts; the restarts are counted for the step's metrics (`tools/mcp_restarts`).

The connections live on one event-loop thread (the SDK's sessions are asyncio objects that must be entered and
left in one task); a call from a Tool thread waits on its future there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import jsonschema

from agentrl.environment.tool import Tool, ToolFailure, describe_exception

if TYPE_CHECKING:
    from agentrl.contract.env_sources import McpServerConfig

# The grace beyond a server's timeout_s for the rollout's own timeout on the call: the connection's timeout fires
# first, so the model reads that the server is restarted rather than a bare timeout.
_CALL_TIMEOUT_GRACE_S = 5.0
_START_TIMEOUT_S = 60.0  # spawning, the handshake and the first listing
_STOP_TIMEOUT_S = 10.0  # the SDK's own shutdown waits are bounded well below this
_CLOSE_WAIT_S = 2.0  # for a connection told to close, before its task is cancelled
# A server whose restart failed is tried again after this long, not at each of the step's episode starts.
_RESTART_BACKOFF_S = 10.0
_STDERR_TAIL_BYTES = 1500  # of a stdio server's stderr, in the reason it did not start
# The step metric that counts the servers restarted during its rollout (summed over a cluster's rollout workers).
MCP_RESTARTS = "tools/mcp_restarts"


def _innermost(err: BaseException) -> BaseException:
    """The first leaf of an exception group: the SDK's task groups wrap a server's failure ("unhandled errors in a
    TaskGroup (1 sub-exception)"), which says nothing of it."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return err


class McpUnavailableError(RuntimeError):
    """A server could not be started at all (at the run's start); the message says which and why."""


def _import_sdk() -> Any:
    try:
        import mcp
    except ImportError:
        raise McpUnavailableError(
            "env.mcp_servers needs the official MCP SDK: pip install 'agentrl[mcp]' (or: pip install mcp)"
        ) from None
    return mcp


@dataclass
class _Server:
    config: McpServerConfig
    listing: list[Any] = field(default_factory=list)  # the SDK's Tool definitions, from the last (re)start
    client: Any = None  # the SDK's Client while the connection is up
    broken: str | None = None  # why its connection is not to be used any more; None while healthy
    closing: asyncio.Event | None = None  # set to end the connection's task
    stopped: concurrent.futures.Future[None] | None = None  # settled when the connection's task has ended
    task: asyncio.Task[None] | None = None  # the connection's task, cancelled when it does not end when told
    starts: int = 0
    failed_at: float | None = None  # when its last restart failed (the next try waits _RESTART_BACKOFF_S)


class McpTool(Tool):
    """One tool of an MCP server, offered to the model like any Tool; its call goes to the server."""

    def __init__(self, servers: McpServers, server: str, remote_name: str, offered_name: str, definition: Any) -> None:
        self._servers, self.server, self.remote_name = servers, server, remote_name
        self.name = offered_name  # type: ignore[misc] - a per-instance name, where class Tools set a class one
        self.description = definition.description or ""  # type: ignore[misc]
        self.parameters = dict(definition.input_schema or {"type": "object", "properties": {}})  # type: ignore[misc]
        self.timeout_s = servers.config(server).timeout_s + _CALL_TIMEOUT_GRACE_S  # type: ignore[misc]

    def execute(self, **arguments: Any) -> Any:
        return self._servers.call(self.server, self.remote_name, self.name, arguments)


def _result_value(result: Any) -> Any:
    """A CallToolResult as the model reads it: the structured content when the server gives one, else its text
    (one string), else every content block as JSON."""
    if result.structured_content is not None:
        return result.structured_content
    texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
    if len(texts) == len(result.content):
        return "\n".join(texts)
    return [block.model_dump(mode="json", exclude_none=True) for block in result.content]


class McpServers:
    """The MCP servers of one run config in this process: started on first use, restarted when broken, stopped
    by `close()` (the run's end). Safe to use from any thread."""

    def __init__(self, configs: Sequence[McpServerConfig], log_dir: str | Path | None = None) -> None:
        self._servers = {config.name: _Server(config) for config in configs}
        self._log_dir = Path(log_dir) if log_dir is not None else None
        self._logs: list[IO[str]] = []
        self._lock = threading.Lock()  # starts and restarts: one at a time
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._restarts = 0  # since the last `take_restarts`

    def __bool__(self) -> bool:
        return bool(self._servers)

    def config(self, server: str) -> McpServerConfig:
        return self._servers[server].config

    # --- the episode side -------------------------------------------------------------------------------------

    def tools(self, taken: Iterable[str] = ()) -> list[McpTool]:
        """Every server's tools for a new episode: a broken server is restarted first (and counted); one that
        cannot be restarted keeps its last listing, whose calls then fail with the reason. `taken` are the names
        of the ToolEnv's own Tools, which keep their names."""
        if not self._servers:
            return []
        with self._lock:
            for server in self._servers.values():
                due = server.failed_at is None or time.monotonic() - server.failed_at >= _RESTART_BACKOFF_S
                if (server.client is None or server.broken is not None) and due:
                    self._start(server)
            listings = [
                (server.config.name, definition) for server in self._servers.values() for definition in server.listing
            ]
        counts: dict[str, int] = {}
        for name in [*taken, *(definition.name for _, definition in listings)]:
            counts[name] = counts.get(name, 0) + 1
        return [
            McpTool(
                self,
                server,
                definition.name,
                definition.name if counts[definition.name] == 1 else f"{server}__{definition.name}",
                definition,
            )
            for server, definition in listings
        ]

    def take_restarts(self) -> int:
        """Restarts since the last call (for one step's metrics)."""
        with self._lock:
            restarts, self._restarts = self._restarts, 0
        return restarts

    # --- the call side ----------------------------------------------------------------------------------------

    def call(self, server_name: str, remote_name: str, offered_name: str, arguments: dict[str, Any]) -> Any:
        server = self._servers[server_name]
        config = server.config
        where = f'MCP server "{server_name}"'
        client, broken = server.client, server.broken
        if client is None or broken is not None:
            raise ToolFailure(
                f"{offered_name} not called: {where} is down ({broken}); it is restarted for the next episode"
            )
        assert self._loop is not None
        running = asyncio.run_coroutine_threadsafe(client.call_tool(remote_name, arguments), self._loop)
        try:
            result = running.result(timeout=config.timeout_s)
        except concurrent.futures.TimeoutError:
            running.cancel()
            self._mark_broken(server, f"it did not answer a call within {config.timeout_s:g} s")
            raise ToolFailure(
                f"{offered_name} timed out after {config.timeout_s:g} s: {where} is restarted for the next episode"
            ) from None
        except Exception as err:  # noqa: BLE001 - the connection is gone (a crash) or the server broke the protocol
            self._mark_broken(server, describe_exception(err))
            raise ToolFailure(
                f"{offered_name} failed: {where} stopped answering ({describe_exception(err)}); "
                "it is restarted for the next episode"
            ) from None
        if result.is_error:  # the tool itself failed; the server is fine
            text = " ".join(getattr(block, "text", "") for block in result.content).strip() or "no message"
            raise ToolFailure(f"{offered_name} failed on {where}: {text}")
        return _result_value(result)

    def _mark_broken(self, server: _Server, reason: str) -> None:
        with self._lock:
            if server.broken is None:
                server.broken = reason

    # --- connections, on the loop thread ----------------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=loop.run_forever, name="agentrl-mcp", daemon=True)
            self._thread.start()
            self._loop = loop
        return self._loop

    def _transport(self, config: McpServerConfig) -> Any:
        _import_sdk()
        if config.url is not None:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(config.url, http_client=httpx2.AsyncClient(headers=config.headers))
        from mcp.client.stdio import StdioServerParameters, stdio_client

        errlog: IO[str] | Any = None
        if self._log_dir is not None:
            errlog = (self._log_dir / f"mcp-{config.name}.log").open("a", encoding="utf-8")
            self._logs.append(errlog)
        parameters = StdioServerParameters(
            command=config.command, args=config.args, env=config.env or None, cwd=config.cwd
        )
        return stdio_client(parameters, errlog=errlog) if errlog is not None else stdio_client(parameters)

    async def _hold(self, server: _Server, transport: Any, ready: asyncio.Future[list[Any]]) -> None:
        """The connection's task: connect, list the tools, then keep the connection until told to close."""
        from mcp import Client

        closing = asyncio.Event()
        server.closing = closing
        try:
            async with Client(transport, cache=None) as client:
                listing = await client.list_tools()
                definitions = list(listing.tools)
                while listing.next_cursor:
                    listing = await client.list_tools(cursor=listing.next_cursor)
                    definitions += listing.tools
                server.client = client
                ready.set_result(definitions)
                await closing.wait()
        except BaseException as err:  # noqa: BLE001 - reported to whoever waits for the start
            if not ready.done():
                ready.set_exception(err)
            elif not isinstance(err, asyncio.CancelledError):
                server.broken = server.broken or f"its connection ended: {describe_exception(err)}"
        finally:
            server.client = None

    def _start(self, server: _Server) -> None:
        """(Re)start one server and take its listing; the caller holds the lock."""
        config = server.config
        if server.starts:
            self._stop(server)
            self._restarts += 1
        server.starts += 1
        loop = self._ensure_loop()
        try:
            transport = self._transport(config)

            stopped: concurrent.futures.Future[None] = concurrent.futures.Future()
            server.stopped = stopped

            async def start() -> list[Any]:
                ready: asyncio.Future[list[Any]] = loop.create_future()
                task = loop.create_task(self._hold(server, transport, ready))
                task.add_done_callback(lambda _: stopped.set_result(None))
                server.task = task
                return await ready

            definitions = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=_START_TIMEOUT_S)
            for definition in definitions:
                jsonschema.Draft202012Validator.check_schema(definition.input_schema or {})
        except Exception as err:  # noqa: BLE001 - a server that does not start is told, with its reason
            reason = (
                f"it did not start within {_START_TIMEOUT_S:g} s"
                if isinstance(err, concurrent.futures.TimeoutError)
                else describe_exception(_innermost(err))
            ) + self._stderr_tail(config)
            self._stop(server)
            if server.starts == 1:  # the first start: a configuration to fix, not a fault to ride out
                raise McpUnavailableError(
                    f'env.mcp_servers: server "{config.name}" could not start: {reason}'
                ) from None
            server.broken, server.failed_at = f"restart failed: {reason}", time.monotonic()
            return
        server.listing, server.broken, server.failed_at = definitions, None, None

    def _stderr_tail(self, config: McpServerConfig) -> str:
        """The end of what a stdio server wrote on stderr (its log in the run's folder), to say why it failed."""
        path = self._log_dir / f"mcp-{config.name}.log" if self._log_dir is not None else None
        if path is None or not path.is_file():
            return ""
        for log in self._logs:
            log.flush()
        with path.open("rb") as handle:
            handle.seek(max(0, handle.seek(0, 2) - _STDERR_TAIL_BYTES))
            tail = handle.read().decode(errors="replace").strip()
        return f"; its stderr ends: {tail}" if tail else ""

    def _stop(self, server: _Server) -> None:
        """Ends the connection: told to close, and cancelled if it does not (a server still starting, or one that
        never answered its handshake, holds its task before the close is awaited). Either way the SDK's clean-up
        ends the server's process tree."""
        loop, closing, stopped, task = self._loop, server.closing, server.stopped, server.task
        server.client, server.closing, server.stopped, server.task = None, None, None, None
        if loop is None or closing is None:
            return
        loop.call_soon_threadsafe(closing.set)
        if stopped is None:
            return
        try:
            stopped.result(timeout=_CLOSE_WAIT_S)
        except concurrent.futures.TimeoutError:
            if task is not None:
                loop.call_soon_threadsafe(task.cancel)
            with contextlib.suppress(concurrent.futures.TimeoutError):
                stopped.result(timeout=_STOP_TIMEOUT_S)

    def close(self) -> None:
        """Stop every server (the run's end); idempotent."""
        with self._lock:
            for server in self._servers.values():
                self._stop(server)
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
                if self._thread is not None:
                    self._thread.join(timeout=_STOP_TIMEOUT_S)
                if not self._loop.is_running():
                    self._loop.close()
                self._loop, self._thread = None, None
            for log in self._logs:
                log.close()
            self._logs.clear()


def list_server_tools(config: McpServerConfig) -> list[dict[str, Any]]:
    """One server started on its own, its tools as it names them ({name, description, parameters}), then stopped:
    the server's `mcp/listTools`, for the editor's New Tool > From an MCP server."""
    servers = McpServers([config])
    try:
        return [
            {"name": tool.remote_name, "description": tool.description, "parameters": tool.parameters}
            for tool in servers.tools()
        ]
    finally:
        servers.close()

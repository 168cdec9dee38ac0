"""`rollout.tool_isolation: process`: Tools run in a worker process, so a Tool that ends its process
(`os._exit`, a crash in native code, a signal) fails only its own call, never the run.

The worker builds its own ToolEnv instance per episode from the same factory as the trainer, and resets it with the
episode's task and seed (so a Tool that keeps per-episode state, or reads what `reset` set up, has it there), and
runs every call in a daemon thread, as in-process calls run. The trainer's
ToolEnv sees only the outcomes, which is all the Tool contract gives it anyway. When the worker dies, every call
in flight becomes a Tool error that names the Tool and how the process ended, and the next call starts a new
worker (with fresh Tool state: the episodes that lost theirs are told so by that error).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import multiprocessing
import pickle
import signal
import threading
from collections.abc import Callable
from typing import Any

from agentrl.environment.env import ToolEnv
from agentrl.environment.mcp import McpTool
from agentrl.environment.tool import Tool, ToolFailure, describe_exception, invoke_tool, run_in_thread

# How the worker answers one call: (call id, kind, payload).
_RESULT = "result"  # payload: the value the Tool returned
_FAILED = "failed"  # payload: the whole message the model reads (an exception, an attempt to exit, a bad value)


def _serve(connection: Any, make_env: Callable[[], ToolEnv]) -> None:
    """The worker's main loop: build envs on demand, run each call in its own daemon thread, answer in any order."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the terminal is for the trainer, which closes us
    tools_by_episode: dict[int, dict[str, Tool]] = {}
    send_lock = threading.Lock()

    def answer(call_id: int, kind: str, payload: Any) -> None:
        with send_lock:
            try:
                connection.send((call_id, kind, payload))
            except (pickle.PicklingError, TypeError, AttributeError) as err:  # pickled before anything is written
                connection.send(
                    (
                        call_id,
                        _FAILED,
                        f"returned a value that cannot leave the tool worker process: {describe_exception(err)}",
                    )
                )

    def run(call_id: int, tool: Tool, arguments: dict[str, Any]) -> None:
        try:
            value = invoke_tool(tool, arguments)
        except ToolFailure as err:
            answer(call_id, _FAILED, str(err))
        except BaseException as err:  # noqa: BLE001 - any failure of user code is reported to the model
            answer(call_id, _FAILED, f"{tool.name} raised {describe_exception(err)}")
        else:
            answer(call_id, _RESULT, value)

    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return  # the trainer is gone
        if message[0] == "call":
            _, call_id, episode, name, arguments, setup = message
            try:
                if episode not in tools_by_episode:
                    env = make_env()
                    if setup is not None:  # (task, seed): the episode's, as the trainer's env was reset with
                        env.episode_seed = setup[1]
                        env.reset(setup[0])
                    tools_by_episode[episode] = env.tool_map()
                tool = tools_by_episode[episode][name]
            except Exception as err:  # noqa: BLE001 - the user's constructor
                answer(
                    call_id,
                    _FAILED,
                    f"{name} could not be set up in the tool worker process: building the "
                    f"env raised {describe_exception(err)}",
                )
                continue
            threading.Thread(target=run, args=(call_id, tool, arguments), name=f"tool-{name}", daemon=True).start()
        elif message[0] == "release":
            for episode in message[1]:
                tools_by_episode.pop(episode, None)
        else:  # "close"
            return


class ToolWorker:
    """The trainer's side of one worker process: `runner(episode)` gives `execute_calls` a way to run that
    episode's calls there. Thread-safe; the process starts on the first call and again after it dies."""

    def __init__(self, make_env: Callable[[], ToolEnv]) -> None:
        self._make_env = make_env  # sent to the worker, so it must pickle (envloader.EnvFactory does)
        self._lock = threading.Lock()
        self._process: Any = None
        self._connection: Any = None
        self._pending: dict[int, tuple[concurrent.futures.Future[Any], str]] = {}
        self._call_ids = itertools.count()
        self._episode_ids = itertools.count()
        self._setups: dict[int, tuple[dict[str, Any], int]] = {}  # episode -> (task, seed) for the worker's reset
        self._set_up: set[int] = set()  # episodes whose env the current worker process has built

    def new_episode(self, task: dict[str, Any] | None = None, seed: int = 0) -> int:
        """An episode id for `runner`; with a task, the worker resets its env with it (and the episode's seed)."""
        episode = next(self._episode_ids)
        if task is not None:
            with self._lock:
                self._setups[episode] = (task, seed)
        return episode

    def runner(self, episode: int) -> Callable[[Tool, dict[str, Any]], concurrent.futures.Future[Any]]:
        """An MCP server's tool already runs in a process of its own, which the trainer's connection to it
        watches (environment/mcp.py), so its calls stay here; every other Tool's go to the worker."""

        def run(tool: Tool, arguments: dict[str, Any]) -> concurrent.futures.Future[Any]:
            if isinstance(tool, McpTool):
                return run_in_thread(tool, arguments)
            return self._submit(episode, tool.name, arguments)

        return run

    def release(self, episodes: list[int]) -> None:
        """These episodes ended: the worker drops their env instances."""
        with self._lock:
            for episode in episodes:
                self._setups.pop(episode, None)
                self._set_up.discard(episode)
            if self._process is not None and episodes:
                self._connection.send(("release", episodes))

    def close(self) -> None:
        with self._lock:
            process, connection, self._process = self._process, self._connection, None
        if process is None:
            return
        try:
            connection.send(("close",))
        except OSError:
            pass
        process.join(timeout=5)
        if process.is_alive():
            process.kill()  # a Tool thread still running keeps nothing alive we need
            process.join()
        connection.close()

    def _submit(self, episode: int, name: str, arguments: dict[str, Any]) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        future.set_running_or_notify_cancel()  # it runs in the worker now: a caller that stops waiting cannot cancel it
        with self._lock:
            if self._process is None:
                self._start()
            call_id = next(self._call_ids)
            self._pending[call_id] = (future, name)
            setup = None if episode in self._set_up else self._setups.get(episode)  # sent with the first call only
            self._set_up.add(episode)
            try:
                self._connection.send(("call", call_id, episode, name, arguments, setup))
            except (OSError, ValueError):
                pass  # the worker just died: its reader fails this call with how it ended
        return future

    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")  # never fork a trainer that holds threads and a model
        ours, theirs = context.Pipe()
        process = context.Process(target=_serve, args=(theirs, self._make_env), name="agentrl-tools", daemon=True)
        process.start()
        theirs.close()
        self._process, self._connection = process, ours
        self._set_up.clear()  # a new process has built no env yet
        threading.Thread(target=self._read, args=(process, ours), name="tool-worker-reader", daemon=True).start()

    def _read(self, process: Any, connection: Any) -> None:
        while True:
            try:
                call_id, kind, payload = connection.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                future, name = self._pending.pop(call_id)
            if kind == _RESULT:
                future.set_result(payload)
            else:
                future.set_exception(ToolFailure(payload))
        process.join(timeout=5)
        code = process.exitcode
        how = (
            f"exit code {code}"
            if code is not None and code >= 0
            else f"signal {-code}"
            if code is not None
            else "no exit code"
        )
        with self._lock:
            if self._process is process:
                self._process = None  # the next call starts a new worker
            lost, self._pending = self._pending, {}
        in_flight = ", ".join(sorted({name for _, name in lost.values()}))
        for future, name in lost.values():
            future.set_exception(
                ToolFailure(
                    f"{name} did not answer: the tool worker process ended ({how}) while these tools ran: {in_flight}. "
                    "A Tool returns or raises; it never ends its process"
                )
            )

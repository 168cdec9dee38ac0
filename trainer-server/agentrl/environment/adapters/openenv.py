"""env.openenv: an OpenEnv environment server (openenv-core's `create_app`), one WebSocket session per episode.

Only the `/ws` session keeps an episode's state (plain HTTP /step gets a fresh environment), so each episode holds
one session from its reset to its end: `{"type": "reset", "data": {"seed": ...}}`, then `{"type": "step", "data":
ACTION}` per turn, each answered `{"type": "observation", "data": {"observation", "reward", "done"}}` or
`{"type": "error", "data": {"message", "code"}}`. The action's JSON Schema comes from `/schema` and is the `act`
tool's parameters (tool form), or its one string field takes the reply (text form).

Capacity: a server takes at most `max_concurrent_envs` sessions and turns the next one away (CAPACITY_REACHED).
This process opens at most env.openenv.max_sessions at once; an episode that finds no room while this process holds
sessions raises `EnvFull`, and the rollout plays the episodes it has started before starting it again (loop.py); one
turned away while this process holds none (another client fills the server) waits and tries again.

A server the trainer starts (`command`) is shared by every episode of this process, started on first use with its
stderr in a log file, checked at /health, and ended when the process exits or the factory closes. A server that
dies mid-episode fails that episode with the tail of its log; the next episode starts it again.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.sync.client import ClientConnection, connect

from agentrl.contract.env_sources import OpenEnvConfig
from agentrl.environment.adapters.external import EnvOutcome, ExternalEnv
from agentrl.environment.env import EnvFull

CAPACITY_REACHED = "CAPACITY_REACHED"
BUSY_RETRY_S = 0.5  # between tries while another client fills the server
LOG_TAIL_CHARS = 2000
# How long a broken session waits for the server's process to show it has ended: its connections close (and the
# session breaks) a moment before its exit can be seen.
EXIT_WAIT_S = 2.0
OBSERVATION_META = ("done", "reward", "metadata")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """A server this process started from env.openenv.command: its URL, process and log."""

    def __init__(self, cfg: OpenEnvConfig) -> None:
        assert cfg.command is not None
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = Path(tempfile.mkstemp(prefix="agentrl-openenv-", suffix=".log")[1])
        argv = [part.replace("{port}", str(port)) for part in cfg.command]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(  # noqa: S603 - the user's own command, from their run config
                argv, cwd=cfg.cwd, env={**os.environ, **cfg.env}, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + cfg.startup_timeout_s
        while not healthy(self.url):
            if self.process.poll() is not None:
                message = f"the OpenEnv server exited with {self.process.returncode}: {self.tail()}"
                self.stop()
                raise RuntimeError(message)
            if time.monotonic() > deadline:
                message = (
                    f"the OpenEnv server did not answer {self.url}/health within {cfg.startup_timeout_s:g} s "
                    f"(env.openenv.startup_timeout_s): {self.tail()}"
                )
                self.stop()
                raise RuntimeError(message)
            time.sleep(0.2)

    def alive(self) -> bool:
        return self.process.poll() is None

    def ended(self, within_s: float) -> bool:
        """Whether the process has exited, or does within `within_s`."""
        try:
            self.process.wait(timeout=within_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def tail(self) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text[-LOG_TAIL_CHARS:].strip() or "(it wrote nothing)"

    def stop(self) -> None:
        """End the process (if it still runs) and remove its log."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.unlink(missing_ok=True)


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:  # noqa: S310 - http(s) by the config
            return answer.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


class _Servers:
    """This process's started servers (by command), those that died and were started again (their logs kept for
    the episodes that read their tails), and its open sessions (by URL)."""

    def __init__(self) -> None:
        self.started: dict[str, Server] = {}
        self.dead: list[Server] = []
        self.sessions: dict[str, int] = {}
        self.lock = threading.Lock()

    def url_for(self, cfg: OpenEnvConfig) -> tuple[str, Server | None]:
        if cfg.url is not None:
            return cfg.url.rstrip("/"), None
        key = json.dumps([cfg.command, cfg.cwd, cfg.env])
        with self.lock:
            server = self.started.get(key)
            if server is None or not server.alive():
                if server is not None:
                    self.dead.append(server)
                server = self.started[key] = Server(cfg)
        return server.url, server

    def open_session(self, url: str, limit: int) -> bool:
        with self.lock:
            if self.sessions.get(url, 0) >= limit:
                return False
            self.sessions[url] = self.sessions.get(url, 0) + 1
            return True

    def close_session(self, url: str) -> None:
        with self.lock:
            self.sessions[url] = max(0, self.sessions.get(url, 0) - 1)

    def held(self, url: str) -> int:
        with self.lock:
            return self.sessions.get(url, 0)

    def stop_all(self) -> None:
        with self.lock:
            servers = [*self.started.values(), *self.dead]
            self.started.clear()
            self.dead.clear()
        for server in servers:
            server.stop()


SERVERS = _Servers()
atexit.register(SERVERS.stop_all)


class ServerError(RuntimeError):
    """The server answered a message with an error."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(f"the OpenEnv server answered {code}: {message}")
        self.code = code


class OpenEnvEnv(ExternalEnv):
    """The ToolEnv env.openenv builds; `section` is the config's env.openenv as a dict."""

    def __init__(self, section: dict[str, Any]) -> None:
        super().__init__(section=section)
        self.cfg = OpenEnvConfig.model_validate(section)
        self.action_form = self.cfg.action
        self.system_prompt = self.cfg.system_prompt
        self.score_keys = tuple(self.cfg.score_keys)
        self.url = ""
        self.server: Server | None = None
        self.connection: ClientConnection | None = None
        self.action_schema: dict[str, Any] = {}

    # The session.
    def _send(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        assert self.connection is not None
        try:
            try:
                self.connection.send(json.dumps({"type": kind, "data": data}))
            except ConnectionClosed:
                # A server that turns a session away (CAPACITY_REACHED) says so as it accepts it, and closes at once:
                # its answer may be waiting though the message could no longer be sent.
                pass
            answer = json.loads(self.connection.recv(timeout=self.cfg.step_timeout_s))
        except (WebSocketException, OSError, TimeoutError) as err:
            raise RuntimeError(self._gone(f"{kind} failed: {type(err).__name__}: {err}")) from err
        if answer.get("type") == "error":
            data = answer.get("data") or {}
            raise ServerError(str(data.get("message", "")), str(data.get("code", "UNKNOWN")))
        return dict(answer.get("data") or {})

    def _gone(self, what: str) -> str:
        if self.server is not None and self.server.ended(EXIT_WAIT_S):
            return f"the OpenEnv server died ({what}); its log ends: {self.server.tail()}"
        return f"the OpenEnv session at {self.url} broke ({what})"

    def _connect(self) -> None:
        """Open this episode's session: wait while another client fills the server, raise EnvFull while this
        process's own episodes do."""
        deadline = time.monotonic() + self.cfg.startup_timeout_s
        while True:
            if not SERVERS.open_session(self.url, self.cfg.max_sessions):
                raise EnvFull(f"{self.url} already holds env.openenv.max_sessions ({self.cfg.max_sessions}) episodes")
            ws_url = "ws" + self.url[len("http") :] + "/ws"
            try:
                connection = connect(ws_url, open_timeout=self.cfg.step_timeout_s, max_size=None)
                # Entered as `with connect(...)` would (websockets 17.1 warns of a connection used without it); the
                # episode's end closes it.
                self.connection = connection.__enter__()
                return
            except (WebSocketException, OSError, TimeoutError) as err:
                SERVERS.close_session(self.url)
                if time.monotonic() > deadline:
                    raise RuntimeError(self._gone(f"connecting to {ws_url}: {type(err).__name__}: {err}")) from err
            time.sleep(BUSY_RETRY_S)

    def _start_session(self, seed: int, reset_args: dict[str, Any]) -> dict[str, Any]:
        deadline = time.monotonic() + self.cfg.startup_timeout_s
        while True:
            self._connect()
            try:
                return self._send("reset", {"seed": seed, **reset_args})
            except ServerError as err:
                self.end()
                if err.code != CAPACITY_REACHED:
                    raise
                if SERVERS.held(self.url) > 0:
                    raise EnvFull(f"the OpenEnv server at {self.url} is full") from err
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the OpenEnv server at {self.url} stayed full for {self.cfg.startup_timeout_s:g} s "
                        "(env.openenv.startup_timeout_s) with no episode of this run in it"
                    ) from err
            time.sleep(BUSY_RETRY_S)

    def _schema(self) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(f"{self.url}/schema", timeout=self.cfg.step_timeout_s) as answer:  # noqa: S310
                schema = json.loads(answer.read())
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise RuntimeError(self._gone(f"GET /schema: {err}")) from err
        action = schema.get("action") if isinstance(schema, dict) else None
        if not isinstance(action, dict):
            raise RuntimeError(f"{self.url}/schema has no action schema")
        properties = {k: v for k, v in (action.get("properties") or {}).items() if k != "metadata"}
        return {"type": "object", "properties": properties, "required": list(action.get("required") or [])}

    def _text_field(self) -> str:
        required = self.action_schema["required"] or list(self.action_schema["properties"])
        strings = [k for k in required if self.action_schema["properties"].get(k, {}).get("type") == "string"]
        if len(required) != 1 or len(strings) != 1:
            raise ValueError(
                "env.openenv.action: text needs an action with one required string field; this server's action "
                f"needs {required}: use action: tool"
            )
        return strings[0]

    # The adapter's side.
    def begin(self, task: dict[str, Any], seed: int) -> EnvOutcome:
        self.end()
        self.url, self.server = SERVERS.url_for(self.cfg)
        self.action_schema = self._schema()
        if self.action_form == "text":
            self._text_field()
        return self._outcome(self._start_session(seed, dict(task.get("reset_args") or {})))

    def act_in_env(self, action: Any) -> EnvOutcome:
        if self.connection is None:
            raise RuntimeError("the episode's OpenEnv session is closed")
        data = {self._text_field(): action} if isinstance(action, str) else dict(action)
        return self._outcome(self._send("step", data))

    def _outcome(self, data: dict[str, Any]) -> EnvOutcome:
        observation = data.get("observation") or {}
        fields = (
            {k: v for k, v in observation.items() if k not in OBSERVATION_META} if isinstance(observation, dict) else {}
        )
        if self.cfg.observation_key is not None:
            if self.cfg.observation_key not in fields:
                raise ValueError(f"env.openenv.observation_key: the observation has no {self.cfg.observation_key!r}")
            text = fields[self.cfg.observation_key]
        elif len(fields) == 1:
            text = next(iter(fields.values()))
        else:
            text = json.dumps(fields, ensure_ascii=False)
        info = dict(fields)  # openenv-core sends no metadata over a session
        return EnvOutcome(
            text if isinstance(text, str) else json.dumps(text, ensure_ascii=False),
            float(data.get("reward") or 0.0),
            bool(data.get("done")),
            info,
        )

    def action_parameters(self) -> dict[str, Any]:
        return self.action_schema

    def end(self) -> None:
        connection, self.connection = self.connection, None
        if connection is None:
            return
        try:
            connection.send(json.dumps({"type": "close", "data": {}}))
            connection.close()
        except (WebSocketException, OSError):
            pass
        finally:
            SERVERS.close_session(self.url)


def stop_servers() -> None:
    """End the servers this process started (a run's end; EnvFactory.close)."""
    SERVERS.stop_all()

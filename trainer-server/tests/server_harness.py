"""A real `agentrl serve` process and a real WebSocket client that checks every message it receives
against protocol/schemas/rpc.schema.json."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agentrl.server.protocol import PROTOCOL_VERSION, validator_for
from conftest import EXAMPLE_CONFIG
from websockets.sync.client import connect


def example_config(**train: Any) -> dict:
    import yaml

    config = yaml.safe_load(EXAMPLE_CONFIG.read_text())
    config["env"]["module"] = str(EXAMPLE_CONFIG.parent / "env.py")
    config["data"]["train"] = str(EXAMPLE_CONFIG.parent / "tasks.jsonl")
    config["train"].update(train)
    return config


class ServerProcess:
    def __init__(self, runs_dir: Path, *extra: str, python: str = sys.executable, cwd: Path | None = None) -> None:
        self.runs_dir = runs_dir
        self.process = subprocess.Popen(
            [python, "-m", "agentrl.cli", "serve", "--port", "0", "--runs-dir", str(runs_dir), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
        )
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"server did not start: {self.process.stderr.read()}")
        self.ready = json.loads(line)
        self.url = self.ready["url"]
        # Without --token-file the server generated a token (the editor always passes its own file).
        self.token = Path(self.ready["token_file"]).read_text().strip() if "token_file" in self.ready else None

    def client(self, initialize: bool = True, **connect_args: Any) -> Client:
        """A client that presents the server's generated token."""
        headers = {"Authorization": f"Bearer {self.token}", **connect_args.pop("additional_headers", {})}
        return Client(self.url, initialize, additional_headers=headers, **connect_args)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


class Client:
    def __init__(self, url: str, initialize: bool = True, **connect_args: Any) -> None:
        self._connection = contextlib.ExitStack()  # websockets wants its sync client used as a context manager
        self.ws = self._connection.enter_context(connect(url, open_timeout=10, max_size=None, **connect_args))
        self.ids = itertools.count(1)
        self.notifications: list[dict] = []
        self.pending_methods: dict[int, str] = {}
        if initialize:
            self.request("initialize", {"protocolVersion": PROTOCOL_VERSION, "clientInfo": {"name": "pytest"}})

    def _receive(self, timeout: float) -> dict:
        message = json.loads(self.ws.recv(timeout=timeout))
        if "method" in message:  # a notification: its params must match the schema
            validator_for(f"{message['method']}.params").validate(message["params"])
        return message

    def call(self, method: str, params: dict | None = None, timeout: float = 30) -> dict:
        request_id = next(self.ids)
        self.ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}))
        deadline = time.time() + timeout
        while True:
            message = self._receive(max(0.1, deadline - time.time()))
            if "method" in message:
                self.notifications.append(message)
                continue
            assert message["id"] == request_id
            if "result" in message:
                validator_for(f"{method}.result").validate(message["result"])
            return message

    def request(self, method: str, params: dict | None = None, timeout: float = 30) -> Any:
        response = self.call(method, params, timeout)
        if "error" in response:
            raise AssertionError(f"{method} failed: {response['error']}")
        return response["result"]

    def next_notification(self, timeout: float = 60) -> dict:
        if self.notifications:
            return self.notifications.pop(0)
        return self._receive(timeout)

    def events_until(self, run_id: str, predicate, timeout: float = 120) -> list[dict]:
        """run/event params received until one satisfies `predicate` (included)."""
        events = []
        deadline = time.time() + timeout
        while time.time() < deadline:
            message = self.next_notification(timeout=max(0.1, deadline - time.time()))
            if message["method"] == "run/event" and message["params"]["runId"] == run_id:
                events.append(message["params"])
                if predicate(message["params"]):
                    return events
        raise TimeoutError(f"no matching event within {timeout} s; got {len(events)}")

    def close(self) -> None:
        self._connection.close()


def is_final_status(event: dict) -> bool:
    return event["type"] == "status" and event["data"]["status"] in ("completed", "stopped", "failed", "interrupted")


def kill_run_process(run_dir: Path) -> None:
    pid = int((run_dir / "pid").read_text().split()[0])  # "PID START"
    os.kill(pid, signal.SIGKILL)


def command_lines_with(text: str) -> list[str]:
    """The command lines of this machine's processes that hold `text`: what a test's marker finds still running."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            line = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in line:
            found.append(line)
    return found

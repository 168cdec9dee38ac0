"""How the server starts a child process of agentrl's (a run, an env check, an MCP listing, an export, a Tool
re-run), and ends it.

`python -P -m agentrl...`: without -P, `python -m` puts the working folder first on the child's import path, so an
`agentrl/` planted in the folder the server was started from would run as the server's user in place of agentrl.

A child that answers a call runs in a process group of its own (`start_new_session`), and the whole group is ended
when the call is (`end_group`: SIGTERM, then SIGKILL after a grace): whatever the user's code started in the
background (a Tool's `sleep 300`) ends with it, and never holds the call open by keeping the child's pipes. A child
that starts processes in sessions of their own (the MCP SDK starts each stdio server so) ends them itself on SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from dataclasses import dataclass
from typing import Any

# After the group is ended, how long its pipes may take to close (a process that left the group keeps them open).
PIPES_CLOSE_S = 5.0
# Between SIGTERM and SIGKILL: time for a child to end what it started outside its group (an MCP server).
TERM_GRACE_S = 12.0
# How often a child's exit is looked for (its exit code, not its pipes: see exit_code).
EXIT_POLL_S = 0.05
_answering: set[asyncio.subprocess.Process] = set()  # children answering calls now: ended with the server too
STDERR_TAIL_BYTES = 4000


def agentrl_command(module: str, *args: str) -> list[str]:
    """The command line that runs agentrl module `module` (`agentrl.cli`, ...) with `args` in a child process."""
    return [sys.executable, "-P", "-m", module, *args]


async def start_child(module: str, *args: str, **streams: Any) -> asyncio.subprocess.Process:
    """`agentrl_command(module, *args)` in a new session and process group of its own; `streams`: stdin, stdout,
    stderr and limit, as asyncio.create_subprocess_exec takes them."""
    process = await asyncio.create_subprocess_exec(*agentrl_command(module, *args), start_new_session=True, **streams)
    _answering.add(process)
    return process


async def exit_code(process: asyncio.subprocess.Process) -> int:
    """The child's exit code as soon as it exits. asyncio's `wait()` also waits for the child's pipes to close, which
    a background process the user's code started keeps open (an env check waited 45 s for a Tool's `sleep`)."""
    while process.returncode is None:
        await asyncio.sleep(EXIT_POLL_S)
    return process.returncode


async def end_group(process: asyncio.subprocess.Process, grace_s: float = TERM_GRACE_S) -> None:
    """Ends the child and everything in its process group: SIGTERM, and SIGKILL to whatever is left once the child
    has exited or `grace_s` has passed (idempotent)."""
    _answering.discard(process)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), grace_s)
        os.killpg(process.pid, signal.SIGKILL)


async def end_all() -> None:
    """Ends every child still answering a call, with what it started: the server is shutting down (runs, which are
    not such children, go on)."""
    await asyncio.gather(*(end_group(process) for process in list(_answering)))


async def keep_tail(stream: asyncio.StreamReader, tail: bytearray) -> None:
    """Reads `stream` to its end, keeping its last STDERR_TAIL_BYTES in `tail`: a child that prints a lot must not
    fill its pipe and stall."""
    while chunk := await stream.read(1 << 16):
        tail.extend(chunk)
        del tail[:-STDERR_TAIL_BYTES]


async def read_answer(process: asyncio.subprocess.Process, timeout_s: float) -> dict[str, Any] | None:
    """The next JSON line a child answering a call wrote on its stdout (agentrl.environment.rerun's `say`), or None
    when it ended without one; TimeoutError when none came within `timeout_s`."""
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), timeout_s)
    return json.loads(line) if line.strip() else None


async def how_it_ended(
    name: str, when: str, process: asyncio.subprocess.Process, draining: asyncio.Task[None], stderr_tail: bytearray
) -> str:
    """How the `name` child (re-run, re-roll) that answers a call ended `when`, with the last line it wrote on stderr
    (a traceback's, usually); `draining` reads its stderr into `stderr_tail` (keep_tail)."""
    code = await exit_code(process)
    await end_group(process)  # a background process the user's code started would keep stderr open
    await asyncio.wait([draining], timeout=PIPES_CLOSE_S)
    how = f"exit code {code}" if code >= 0 else f"signal {-code}"
    said = stderr_tail.decode(errors="replace").strip().splitlines()
    return f"the {name} process ended ({how}) {when}" + (f": {said[-1]}" if said else "")


@dataclass
class ChildResult:
    returncode: int | None  # None: it was ended (timed out, or it wrote more than it may)
    stdout: bytes
    stderr_tail: str  # the last STDERR_TAIL_BYTES it wrote, decoded
    timed_out: bool = False
    too_large: bool = False  # it wrote more than max_stdout bytes

    def how_it_ended(self) -> str:
        if self.returncode is None:
            return "was ended"
        return (
            f"exited with code {self.returncode}"
            if self.returncode >= 0
            else f"was killed by signal {-self.returncode}"
        )


async def run_child(
    module: str, *args: str, stdin: bytes = b"", timeout_s: float, max_stdout: int = 64 << 20
) -> ChildResult:
    """Runs an agentrl child to its end, at most `timeout_s`, reading at most `max_stdout` bytes of its output; then
    ends its process group, whatever it started included."""
    process = await start_child(
        module, *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    stdout, stderr_tail = bytearray(), bytearray()
    too_large = asyncio.Event()

    async def read_stdout() -> None:
        assert process.stdout is not None
        while chunk := await process.stdout.read(1 << 16):
            stdout.extend(chunk)
            if len(stdout) > max_stdout:
                too_large.set()
                return

    readers = [asyncio.ensure_future(read_stdout()), asyncio.ensure_future(keep_tail(process.stderr, stderr_tail))]
    exited, stdout_read = asyncio.ensure_future(exit_code(process)), readers[0]
    timed_out = False
    try:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            process.stdin.write(stdin)
            await process.stdin.drain()
            process.stdin.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        # Until the child exits, its output passes the bound, or its time is up.
        while not exited.done() and not too_large.is_set() and loop.time() < deadline:
            watched = [exited] if stdout_read.done() else [exited, stdout_read]
            await asyncio.wait(watched, timeout=deadline - loop.time(), return_when=asyncio.FIRST_COMPLETED)
        timed_out = not exited.done() and not too_large.is_set()
    finally:
        exited.cancel()
        await end_group(process)
        await process.wait()
        _, pending = await asyncio.wait(readers, timeout=PIPES_CLOSE_S)
        for reader in pending:
            reader.cancel()
    ended = timed_out or too_large.is_set()
    return ChildResult(
        None if ended else process.returncode,
        bytes(stdout),
        stderr_tail.decode(errors="replace"),
        timed_out=timed_out,
        too_large=too_large.is_set(),
    )

"""A run's child process as the server knows it: started by this server, adopted from an earlier one, or waiting
for a slot (RunProcess); whether a pid still runs; where the process's stderr goes (RUNS_DIR/.logs); and the status
a run's end is recorded with when its process ended without writing one."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrl.contract.files_inside import open_inside

STDERR_TAIL_BYTES = 20_000


LOGS_DIR = ".logs"  # in the runs folder: each run's stderr log (run/stderr_log.py)


def stderr_log_path(runs_dir: Path, run_id: str) -> Path:
    return runs_dir / LOGS_DIR / f"{run_id}.stderr.log"


@dataclass
class RunProcess:
    run_id: str
    process: asyncio.subprocess.Process | None = None
    adopted_pid: int | None = None  # a run left running by an earlier server process
    adopted_start: str | None = None  # when that process started: its pid alone may name another process later
    stop_mode: str | None = None
    stderr_path: Path | None = None
    # What run.json will say, for the moments before the process writes it (a run/get right after run/start).
    queued_meta: dict[str, Any] | None = None
    # The command line of a run waiting for a slot (`agentrl serve --max-runs`); None once its process started.
    waiting_args: list[str] | None = None
    # Set once the process has exited and the server has recorded its end (RunManager._finish).
    finished: asyncio.Event = field(default_factory=asyncio.Event)


def unfinished_end(
    runs_dir: Path, status: dict[str, Any], proc: RunProcess | None, exit_code: int | None
) -> dict[str, Any]:
    """The status event data recorded for a run whose process ended without writing how it ended: stopped (by
    run/stop, immediately or before its first step) or failed, with the tail of its stderr log and its last line."""
    base = {"step": status.get("step", 0), "total_steps": status.get("total_steps", 0)}
    if proc is not None and proc.stop_mode == "immediate":
        data = {
            "status": "stopped",
            **base,
            "message": "stopped immediately; work since the last checkpoint is discarded on resume",
        }
    elif proc is not None and proc.stop_mode == "graceful":
        data = {
            "status": "stopped",
            **base,
            "message": "stopped before the trainer had started its first step; nothing was lost",
        }
    else:
        tail = ""
        if proc is not None and proc.stderr_path is not None:
            with (
                contextlib.suppress(OSError),
                open_inside(runs_dir, f"{LOGS_DIR}/{proc.stderr_path.name}", None) as log_file,
            ):
                log_file.seek(max(0, log_file.seek(0, 2) - STDERR_TAIL_BYTES))  # the tail only: it can be GBs
                tail = log_file.read().decode("utf-8", "replace")
        said = [line for line in tail.splitlines() if line.strip()]
        data = {
            "status": "failed",
            **base,
            # its last line says why (an exception's, an invalid frozen config's), beside the tail
            "message": f"the run's process exited with code {exit_code}" + (f": {said[-1][-500:]}" if said else ""),
            "traceback": tail,
        }
    return data

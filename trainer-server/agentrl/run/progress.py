"""What a run's process is doing, written as it happens, so the editor never shows a long silence: a `phase` event at
the start of each long stretch (loading the model, starting the rollout engine, restoring a checkpoint, a step's
rollouts with a count of the episodes ended, the update, the evaluation, a checkpoint), and the status the process
works under: `running`, or `stopping` from the moment a graceful stop is asked for, not when the step under way ends
(a minute later, on a slow machine). Protocol: rpc.schema.json's `phaseEvent` and `statusEvent`.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from agentrl.run.runstore import RunStore

# A step's episode count is written when it passes each quarter of the step's episodes: a handful of events a step,
# however many episodes it plays.
EPISODE_COUNTS_PER_STEP = 4


class ProgressReporter:
    """The one writer of a working run's status and phase events. A graceful stop (`request_stop`, from a signal
    handler, where nothing may wait on a lock the interrupted code holds) wakes a thread that writes the `stopping`
    status; a stop asked for by setting the event itself is said at the next phase or status."""

    def __init__(self, store: RunStore, total_steps: int, stop: threading.Event, stopping_message: str) -> None:
        self.store, self.total_steps, self._stop, self._stopping_message = store, total_steps, stop, stopping_message
        self._lock = threading.Lock()  # orders the stopping status against the status and phase of the main thread
        self._step = 0  # the last step whose update and events are recorded: what a status says
        self._stopping = False
        self._ended = False
        self._wake = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="agentrl-stop-request", daemon=True)
        self._watcher.start()

    def request_stop(self) -> None:
        """Ask for a graceful stop: the step under way finishes and the run ends `stopped`. Safe in a signal handler."""
        self._stop.set()
        self._wake.set()

    def working(self, step: int, **extra: Any) -> None:
        """A status while the process works: `running`, or `stopping` once a stop has been asked for."""
        with self._lock:
            self._step = step
            self._stopping = self._stopping or self._stop.is_set()
            status = "stopping" if self._stopping else "running"
            message = {"message": self._stopping_message} if self._stopping and "message" not in extra else {}
            self._write_status(status, step, **message, **extra)

    def end(self, status: str, step: int, **extra: Any) -> None:
        """The run's final status; nothing is written after it."""
        with self._lock:
            self._ended = True
            self._write_status(status, step, **extra)
        self._wake.set()  # the watcher ends

    def phase(self, name: str, step: int, done: int | None = None, total: int | None = None) -> None:
        counts = {"done": done, "total": total} if done is not None and total is not None else {}
        with self._lock:
            if self._ended:
                return
            self.store.append_event("phase", {"phase": name, "step": step, **counts})
        if self._stop.is_set():
            self._say_stopping()

    def episode_counter(self, step: int) -> Callable[[int, int], None]:
        """What a rollout engine calls with (episodes ended, episodes in all) as they end: a `rollouts` phase with the
        count each time it passes a quarter of the step's episodes (EPISODE_COUNTS_PER_STEP), never the same twice."""
        passed = [0]  # quarters already written; the engine may call from its own thread

        def count(done: int, total: int) -> None:
            quarter = done * EPISODE_COUNTS_PER_STEP // total if total else 0
            if quarter <= passed[0] or done >= total:  # the last count is the next phase's start: not worth a line
                return
            passed[0] = quarter
            self.phase("rollouts", step, done, total)

        return count

    def _say_stopping(self) -> None:
        with self._lock:
            if self._stopping or self._ended:
                return
            self._stopping = True
            self._write_status("stopping", self._step, message=self._stopping_message)

    def _watch(self) -> None:
        self._wake.wait()
        self._say_stopping()

    def _write_status(self, status: str, step: int, **extra: Any) -> None:
        data = {"status": status, "step": step, "total_steps": self.total_steps, **extra}
        self.store.append_event("status", data, durable=True)


@contextmanager
def graceful_signals(reporter: ProgressReporter) -> Iterator[None]:
    """SIGTERM/SIGINT ask for a graceful stop: finish the step, checkpoint, exit (the status says `stopping` at once)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in previous:
        signal.signal(sig, lambda *_: reporter.request_stop())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

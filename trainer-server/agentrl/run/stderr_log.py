"""A run's stderr log (RUNS_DIR/.logs/RUN.stderr.log, where a server sends a run's stderr): past its cap only its
tail is kept, behind a line that says earlier output was cut. A run that prints without end would otherwise fill the
disk. The server cuts the log while it watches the run; the run cuts its own every second (`cap_own_stderr`), so a
log stays bounded when no server watches (one reached 1.9 GB in 3 s)."""

from __future__ import annotations

import fcntl
import logging
import os
import stat
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger("agentrl.run")
STDERR_LOG_MAX_BYTES = 16 * 2**20
STDERR_LOG_KEEP_BYTES = 4 * 2**20
OWN_CAP_EVERY_S = 1.0


def cap_log(path: Path, max_bytes: int = STDERR_LOG_MAX_BYTES, keep_bytes: int = STDERR_LOG_KEEP_BYTES) -> bool:
    """Keep only the last `keep_bytes` (whole lines) of a log over `max_bytes`, after a line saying earlier output
    was cut. The run's process keeps writing: it opened the log for appending, so its next write lands at the new
    end; a line it writes in the instant between the read and the truncation is lost. True if the log was cut.
    A log that cannot be cut is left as it is, with a warning: watching the run matters more."""
    try:
        status = path.lstat()
        # A link or a FIFO planted in the log's place is never cut: that would cut the file it leads to.
        if not stat.S_ISREG(status.st_mode) or status.st_size <= max_bytes:
            return False
        with open(path, "r+b", opener=lambda name, flags: os.open(name, flags | os.O_NOFOLLOW)) as log_file:
            log_file.seek(-keep_bytes, os.SEEK_END)
            tail = log_file.read()
            tail = tail[tail.find(b"\n") + 1 :]
            when = datetime.now(UTC).isoformat(timespec="seconds")
            notice = (
                f"[agentrl: earlier output was cut at {when}; this log keeps the last {keep_bytes} bytes of a run's "
                f"stderr once it passes {max_bytes}]\n"
            )
            log_file.seek(0)
            log_file.write(notice.encode() + tail)
            log_file.truncate()
    except FileNotFoundError:
        return False
    except OSError as err:
        log.warning("cannot cut the run log %s: %s", path, err)
        return False
    return True


def cap_own_stderr(
    every_s: float = OWN_CAP_EVERY_S, max_bytes: int = STDERR_LOG_MAX_BYTES, keep_bytes: int = STDERR_LOG_KEEP_BYTES
) -> threading.Thread | None:
    """When this process's stderr is a file it appends to (a server's run log), a daemon thread that cuts it every
    `every_s`; None for a terminal or a pipe, which fill nothing."""
    try:
        regular = stat.S_ISREG(os.fstat(2).st_mode)
        appending = bool(fcntl.fcntl(2, fcntl.F_GETFL) & os.O_APPEND)  # cut under a writer that appends, only
        path = Path(os.readlink("/proc/self/fd/2"))  # Linux; elsewhere the server's cut alone holds
    except OSError:
        return None
    if not regular or not appending:
        return None

    def keep_cutting() -> None:
        while True:
            time.sleep(every_s)
            cap_log(path, max_bytes, keep_bytes)

    thread = threading.Thread(target=keep_cutting, name="stderr-cap", daemon=True)
    thread.start()
    return thread

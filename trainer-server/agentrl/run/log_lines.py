"""The complete lines of a run's event log, each read with a bound: the one way its readers go through it.

A line is at most MAX_EVENT_LINE_BYTES (RunStore.append_event writes none longer), so a reader never holds more than
that of one line: a longer one (a log damaged by hand, a runaway writer, a sparse file of zeros planted in its place)
is passed over in blocks and reported as damage, where reading it whole held hundreds of MB, and scanning the log
backwards joined its blocks again and again (quadratic: a 300 MB line without a newline kept the server from
starting). The last line without its newline is torn (being written, or never completed): left for a later read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

# An event is a status, metrics, a health alert, a trajectory's summary, a log message: KiB. The bound leaves room
# for any of them many times over.
MAX_EVENT_LINE_BYTES = 16 * 2**20
_PASS_OVER_BLOCK = 1 << 20


def overlong(length: int) -> str:
    """What a reader reports for a line over the bound."""
    return f"a line of {length:,} bytes, over the {MAX_EVENT_LINE_BYTES:,} an event may hold"


def complete_lines(handle: BinaryIO, start: int) -> Iterator[tuple[int, int, bytes | None]]:
    """(offset, length, line) of each complete line from byte `start` (a line's start), in order, the newline
    included in `line` and `length`; `line` is None for one over MAX_EVENT_LINE_BYTES, passed over without being
    held. Ends at a torn tail."""
    handle.seek(start)
    offset = start
    while True:
        line: bytes | None = handle.readline(MAX_EVENT_LINE_BYTES + 1)
        length = len(line)
        if not line.endswith(b"\n"):
            if length <= MAX_EVENT_LINE_BYTES:
                return  # the end, or a torn tail
            line = None
            while True:
                block = handle.readline(_PASS_OVER_BLOCK)
                length += len(block)
                if block.endswith(b"\n"):
                    break
                if len(block) < _PASS_OVER_BLOCK:
                    return  # an overlong torn tail
        yield offset, length, line
        offset += length

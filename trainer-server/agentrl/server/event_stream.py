"""A run's events streamed to a subscriber (`run/subscribe`): the log replayed from a seq, then its new events as they
are appended, each as its `run/event` notification frame."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from pathlib import Path

from websockets.exceptions import ConnectionClosed

from agentrl.run.log_lines import complete_lines, overlong
from agentrl.run.runstore import EVENTS_FILE, last_seq, open_log, parse_event
from agentrl.server.client import Client
from agentrl.server.run_info import status_run_info
from agentrl.server.runs import RunManager

log = logging.getLogger("agentrl.server")

BEHIND_THRESHOLD = 5_000  # events a subscriber may lag before it is told it fell behind
EVENTS_PER_TURN = 16  # events a subscriber's stream sends before it lets the server's other work run
STREAM_READ_BYTES = 1 << 18  # of the event log, read and parsed at a time for one subscriber
POLL_SECONDS = 0.1
# How often a subscription to a run no process of this server runs reads its log: only another program (an
# `agentrl train --resume` outside the server) can add to it. 600 such subscriptions polled at POLL_SECONDS took 35%
# of a core.
IDLE_POLL_SECONDS = 10.0

_EVENT_PREFIX = re.compile(
    rb'\{"seq": (\d+), "time": [^,]*, "type": "(\w+)", '
)  # how RunStore.append_event begins every line


async def stream_events(runs: RunManager, client: Client, run_id: str, run_dir: Path, since: int) -> None:
    """Every event with seq > since, from the log, then new ones as they are appended. The cursor
    is the last seq sent, so a reconnecting client gets no gap and no duplicate; the log on disk
    is the buffer, so a slow client costs the training process nothing."""
    sent = since
    offset = 0
    told_behind = False
    path = run_dir / EVENTS_FILE
    try:
        while True:
            events, offset, latest = await asyncio.to_thread(read_new_events, path, offset, run_id)
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
                if run_id in runs.live:
                    await asyncio.sleep(POLL_SECONDS)
                elif not run_dir.is_dir():  # deleted (run/delete): nothing will ever be added
                    return
                else:  # no process of this server writes it: woken when one starts (a resume), else rarely read
                    await runs.started_again(run_id, IDLE_POLL_SECONDS)
    except ConnectionClosed:
        pass


def read_new_events(path: Path, offset: int, run_id: str) -> tuple[list[tuple[int, str]], int, int]:
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

"""One client's connection as the handlers see it: its state (initialized, its run subscriptions), sending a response
or a notification, and answers sent from a task of their own while its next requests are answered."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

MAX_MESSAGE_BYTES = 48 * 2**20  # the largest frame a client may send: an env/upload carries a base64 archive
# Answers a connection may wait for at once (answer_in_background); its next request waits for one, as unread frames
# wait on TCP.
MAX_BACKGROUND_ANSWERS = 4


@dataclass
class Client:
    connection: ServerConnection
    initialized: bool = False
    subscriptions: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    send_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    background: set[asyncio.Task[None]] = field(default_factory=set)  # answers it waits for (answer_in_background)

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_text(json.dumps(message, allow_nan=False))

    async def send_text(self, frame: str) -> None:
        async with self.send_lock:
            await self.connection.send(frame)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def answer_in_background(self, response: Awaitable[dict[str, Any]]) -> None:
        """Sends `response` once it is ready, from a task of its own, while this connection's next requests are
        answered; past MAX_BACKGROUND_ANSWERS waiting, first waits for one. A client gone by then misses its answer,
        and the work (a re-roll) is done all the same."""
        while len(self.background) >= MAX_BACKGROUND_ANSWERS:
            await asyncio.wait(self.background, return_when=asyncio.FIRST_COMPLETED)

        async def send_when_ready() -> None:
            answer = await response
            with contextlib.suppress(ConnectionClosed):
                await self.send(answer)

        task = asyncio.get_running_loop().create_task(send_when_ready())
        self.background.add(task)
        task.add_done_callback(self.background.discard)

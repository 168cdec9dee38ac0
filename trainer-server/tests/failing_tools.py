"""Tools that fail in each way a run must survive; shared by the tool and train-loop tests."""

import sys
import time

from agentrl import Tool


class Boom(Tool):
    name = "boom"
    parameters = {"type": "object", "properties": {}}

    def execute(self):
        raise RuntimeError("kaput")


class Hang(Tool):
    name = "hang"
    timeout_s = 0.2

    def execute(self):
        time.sleep(5)  # far past its timeout, and short enough not to pile up threads across tests


class Garbage(Tool):
    name = "garbage"

    def execute(self):
        return object()


class NotANumber(Tool):
    name = "nan"

    def execute(self):
        return {"score": float("nan")}


class Exits(Tool):
    name = "exits"

    def execute(self):
        sys.exit(7)


class AsyncInterrupts(Tool):
    name = "ainterrupts"

    async def execute(self):
        raise KeyboardInterrupt


class AsyncBlocks(Tool):
    """Blocks inside async code, where an event loop's timeout could never fire."""

    name = "ablocks"
    timeout_s = 0.2

    async def execute(self):
        time.sleep(5)

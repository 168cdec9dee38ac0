"""Tools that fail in each way a run must survive; shared by the tool and train-loop tests."""

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
        time.sleep(30)


class Garbage(Tool):
    name = "garbage"

    def execute(self):
        return object()


class NotANumber(Tool):
    name = "nan"

    def execute(self):
        return {"score": float("nan")}

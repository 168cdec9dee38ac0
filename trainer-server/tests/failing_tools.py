"""Tools that fail in each way a run must survive: the one copy the tool, train-loop and env-check tests and the
replay fixtures' recorder (protocol/examples/trajectories/make_fixtures.py) use."""

import os
import sys
import time

from agentrl import EpisodeScore, Tool, ToolEnv


class Boom(Tool):
    name = "boom"
    description = "always raises"
    parameters = {"type": "object", "properties": {}}

    def execute(self):
        raise RuntimeError("kaput")


class Hang(Tool):
    name = "hang"
    description = "never returns"
    timeout_s = 0.2

    def execute(self):
        time.sleep(5)  # far past its timeout, and short enough not to pile up threads across tests


class Echo(Tool):
    """Works, when called as its schema says: the replay shows a schema error beside a good call."""

    name = "echo"
    description = "returns its text"
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

    def execute(self, text):
        return text


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


class EndsProcess(Tool):
    """Ends its process the way nothing in Python can catch."""

    name = "ends_process"

    def execute(self):
        os._exit(3)


class Counter(Tool):
    """Keeps state across calls, as a per-episode sandbox would."""

    name = "counter"

    def __init__(self):
        self.calls = 0

    def execute(self):
        self.calls += 1
        return self.calls


class FailingToolsEnv(ToolEnv):
    """Every tool above, for the runs and workers that build their tools from an env."""

    def __init__(self, **args):
        self.tools = [
            Boom(),
            Hang(),
            Garbage(),
            NotANumber(),
            Exits(),
            AsyncInterrupts(),
            AsyncBlocks(),
            EndsProcess(),
            Counter(),
        ]

    def reset(self, task):
        return [{"role": "user", "content": task["q"]}]

    def score(self, final_text):
        return EpisodeScore(reward=float("ok" in final_text), breakdown={"ok": float("ok" in final_text)})

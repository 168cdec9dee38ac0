"""What works on a run's folder besides its own process: an export, a re-roll, a tool re-run. Each holds the run for
as long as it works, and `run/delete` is refused while anything holds it, with what does: a delete under them made
an export fail with "has no checkpoint" and a re-roll with a missing file, neither naming the delete.

A method's hold is taken before its handler first looks at the run, and on the server's event loop, as the delete's
check is (with no await between that check and the delete's rename): a run is either deleted before a holder finds
it (which then answers "no run") or held while the delete is asked for (which is then refused)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Iterator
from typing import TypeVar

T = TypeVar("T")

# The methods that hold the run their `runId` names, and how a refused delete names each.
RUN_HOLDING_METHODS = {
    "run/export": "an export (run/export)",
    "episode/reroll": "a re-roll (episode/reroll)",
    "tool/rerun": "a tool re-run (tool/rerun)",
}


class RunHolds:
    def __init__(self) -> None:
        self._holders: dict[str, list[str]] = {}  # run id -> what holds it now, one entry per hold

    @contextlib.contextmanager
    def hold(self, run_id: str, holder: str) -> Iterator[None]:
        self._holders.setdefault(run_id, []).append(holder)
        try:
            yield
        finally:
            held = self._holders[run_id]
            held.remove(holder)
            if not held:
                del self._holders[run_id]

    async def while_held(self, run_id: str, holder: str, work: Awaitable[T]) -> T:
        """`work`'s result, the run held by `holder` until it ends, however it ends."""
        with self.hold(run_id, holder):
            return await work

    def holders(self, run_id: str) -> list[str]:
        """What holds the run now, each once, in the order they took it."""
        return list(dict.fromkeys(self._holders.get(run_id, [])))

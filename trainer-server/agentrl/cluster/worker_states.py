"""The state of each of a run's Ray workers, as the run's `workers` events report it (rpc.schema.json's
workersEvent): every change is reported with the whole list, so the latest event is the run's workers now."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def node_address() -> str:
    """The IP address of the Ray node the calling actor runs on (each worker class's `node_address` method)."""
    import ray

    return ray.util.get_node_ip_address()


class WorkerStates:
    def __init__(self, report: Callable[[list[dict[str, Any]]], None]) -> None:
        self._report = report
        self._workers: dict[tuple[str, int], dict[str, Any]] = {}
        self._max_restarts: dict[str, int] = {}

    def starting(self, role: str, count: int, max_restarts: int) -> None:
        """`count` actors of `role` were just created; Ray restarts each up to `max_restarts` times."""
        self._max_restarts[role] = max_restarts
        for index in range(count):
            self._workers[(role, index)] = {"role": role, "index": index, "state": "starting", "restarts": 0}
        self._changed()

    def ready(self, role: str, nodes: dict[int, str]) -> None:
        """The workers numbered in `nodes` answered, from the node each names."""
        for index, node in nodes.items():
            self._workers[(role, index)].update(state="ready", node=node)
        self._changed()

    def is_ready(self, role: str, index: int) -> bool:
        return self._workers[(role, index)]["state"] == "ready"

    def died(self, role: str, index: int) -> dict[str, Any] | None:
        """The worker's actor died: Ray restarts it while its role's max_restarts allow, else it is dead for good
        (and stays so: the calls it is sent after fail at once). Returns the worker as now reported; None when it was
        already restarting: a call sent to it meanwhile failed (ActorUnavailableError), which is the same death."""
        worker = self._workers[(role, index)]
        if worker["state"] == "restarting":
            return None
        if worker["state"] != "dead":
            if worker["restarts"] < self._max_restarts[role]:
                worker.update(state="restarting", restarts=worker["restarts"] + 1)
            else:
                worker["state"] = "dead"
            self._changed()
        return dict(worker)

    def _changed(self) -> None:
        self._report([dict(worker) for worker in self._workers.values()])  # as started: rollout, then learner

"""What one run holds on a Ray cluster: the connection, the weights in the object store, the rollout workers and,
once the run first updates (a Try run never does), the learner workers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrl.cluster.code_shipping import pack
from agentrl.cluster.connect import check_capacity, connect, require_ray
from agentrl.cluster.learner_workers import ClusterLearner
from agentrl.cluster.rollout_workers import ClusterRolloutEngine
from agentrl.cluster.weight_broadcast import WeightBroadcast
from agentrl.cluster.weights import SharedWeights
from agentrl.cluster.worker_states import WorkerStates
from agentrl.contract.config import RunConfig

if TYPE_CHECKING:
    from agentrl.rollout.scripted import ScriptedPolicy


class RayCluster:
    def __init__(
        self,
        config: RunConfig,
        driver_model: Any,
        run_id: str,
        runs_dir: Path | None,
        on_worker_restarted: Callable[[dict[str, Any]], None],
        on_workers_changed: Callable[[list[dict[str, Any]]], None],
        policy: ScriptedPolicy | None = None,
    ) -> None:
        self._ray = require_ray()
        self._config, self._run_id = config, run_id
        self._states = WorkerStates(on_workers_changed)
        self._started_ray = connect(config.cluster.address)
        self._learner: ClusterLearner | None = None
        self.rollout: ClusterRolloutEngine | None = None
        try:
            check_capacity(self._ray, config.cluster)
            # Put in the object store once; each node fetches it once, whichever of its workers asks first.
            self._shipped = self._ray.put(pack(config, runs_dir))
            self.weights = SharedWeights(self._ray, driver_model)
            self.weights.from_driver()
            self.rollout = ClusterRolloutEngine(
                self._ray, config, run_id, self.weights, on_worker_restarted, self._states, policy, self._shipped
            )
        except BaseException:
            self.close()
            raise

    @property
    def engine(self) -> ClusterRolloutEngine:
        assert self.rollout is not None
        return self.rollout

    def learner(self) -> ClusterLearner:
        if self._learner is None:
            self._learner = ClusterLearner(
                self._ray, self._config, self._run_id, self.weights, self._states, self._shipped
            )
            if self._config.cluster.weight_sync == "broadcast":
                self.engine.broadcast = WeightBroadcast(self._ray, self._learner.actors[0], self.engine.actors)
        return self._learner

    def update_driver_copy(self) -> None:
        """Bring the driver's model up to the learners' weights (before a checkpoint writes it)."""
        self.weights.update_driver_copy()

    def close(self) -> None:
        if self.rollout is not None:
            self.rollout.close()
        if self._learner is not None:
            self._learner.close()
        if self._started_ray:
            self._ray.shutdown()

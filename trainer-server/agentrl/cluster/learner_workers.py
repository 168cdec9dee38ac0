"""The learner workers: `cluster.learner_workers` Ray actors joined by torch.distributed (gloo on CPU, NCCL on
CUDA), each holding a Learner given a DataParallel distribution (data_parallel.py: every worker the whole model)
or, with `cluster.sharding: fsdp`, a Sharded one (sharded_learner.py: each worker a shard of it); and the driver's
learner in front of them, which the train loop uses as it uses a local Learner.
"""

from __future__ import annotations

import contextlib
import socket
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from agentrl.cluster.code_shipping import ShippedFiles, Unpacked
from agentrl.cluster.data_parallel import DataParallel
from agentrl.cluster.gloo_interface import use_node_interface
from agentrl.cluster.sharded_learner import Sharded
from agentrl.cluster.weight_broadcast import BroadcastGroup, Layout
from agentrl.cluster.worker_states import WorkerStates, node_address
from agentrl.contract.config import RunConfig
from agentrl.learning.learner import Learner
from agentrl.learning.update import Update

if TYPE_CHECKING:
    from agentrl.cluster.weights import SharedWeights
    from agentrl.rollout.episode import Episode

# How long a collective waits for a worker before it fails the step (a dead worker is noticed sooner: its actor's
# call fails and the driver ends the others).
COLLECTIVE_TIMEOUT = timedelta(minutes=10)


class LearnerWorker:
    """One learner actor (created with `ray.remote(...)(LearnerWorker)`)."""

    def __init__(self, config: dict[str, Any], rank: int, world_size: int, shipped: ShippedFiles | None) -> None:
        from agentrl.models.loading import load_policy

        self._unpacked = Unpacked(config, shipped)  # the driver's files (a model folder, an algorithm's file)
        self.config = RunConfig.model_validate(self._unpacked.config)
        self.rank, self.world_size = rank, world_size
        torch.manual_seed(self.config.seed)
        self.model, self.tokenizer, self.device = load_policy(self.config.model, self.config.seed)
        self.learner: Learner | None = None
        distribution = Sharded if self.config.cluster.sharding == "fsdp" else DataParallel
        self.distribution = distribution(rank, world_size, self.device)
        self._gathered: dict[str, torch.Tensor] | None = None  # worker 0's whole weights, until policy_state
        self._broadcast: BroadcastGroup | None = None  # worker 0, under cluster.weight_sync: broadcast

    def rendezvous(self) -> str:
        """Worker 0's address for the group: this node's IP and a port free now."""

        with socket.socket() as probe:
            probe.bind(("", 0))
            port = probe.getsockname()[1]
        return f"tcp://{node_address()}:{port}"

    def join(self, init_method: str) -> str:
        """Joins the group; returns the node it runs on (the run's `workers` events name it)."""
        backend = "nccl" if self.device.type == "cuda" else "gloo"
        use_node_interface(node_address())
        dist.init_process_group(
            backend, init_method=init_method, rank=self.rank, world_size=self.world_size, timeout=COLLECTIVE_TIMEOUT
        )
        self.learner = Learner(self.model, self.tokenizer, self.config, self.device, self.distribution)
        return node_address()

    def load(self, policy: dict[str, torch.Tensor], learner_state: dict[str, Any] | None) -> None:
        assert self.learner is not None
        self.distribution.load_policy(self.model, policy)
        if learner_state is not None:
            self.learner.load_state_dict(learner_state)

    def update(self, episodes: list[Episode]) -> Update | None:
        """Worker 0 returns the step's Update (metrics summed over the workers, advantages of every episode)."""
        assert self.learner is not None
        update = self.learner.update(episodes)
        return update if self.rank == 0 else None

    def gather_policy(self) -> None:
        """Every worker's part in gathering the step's weights (a collective when they are sharded); worker 0 keeps
        them for `policy_state`."""
        assert self.learner is not None
        self._gathered = self.distribution.policy_state(self.model)

    def policy_state(self) -> dict[str, torch.Tensor]:
        """Worker 0: the weights the last `gather_policy` gathered."""
        assert self._gathered is not None, "policy_state before gather_policy, or on a worker other than 0"
        state, self._gathered = self._gathered, None
        return state

    def join_weight_broadcast(self, address: str, rank: int, size: int, layout: Layout) -> None:
        """Worker 0: hosts and joins a new weight broadcast group with the rollout workers (weight_broadcast.py)."""
        self._broadcast = BroadcastGroup(address, rank, size, self.device, layout)

    def broadcast_weights(self, version: int) -> None:
        """Worker 0: sends the weights the last `gather_policy` gathered (kept for `policy_state`)."""
        assert self._broadcast is not None and self._gathered is not None
        self._broadcast.send(self._gathered, version)

    def learner_state(self) -> dict[str, Any] | None:
        """Every worker takes part (the optimizer state is gathered when sharded); worker 0 returns it."""
        assert self.learner is not None
        state = self.learner.state_dict()
        return state if self.rank == 0 else None


class LearnerWorkerDied(RuntimeError):
    """A learner worker died during a step: the step did not complete; the run resumes from its last checkpoint."""


class ClusterLearner:
    """The driver's learner: `update`, `state_dict` and `load_state_dict` as agentrl.learning.learner.Learner has
    them, over the learner actors."""

    def __init__(
        self, ray: Any, config: RunConfig, run_id: str, weights: SharedWeights, states: WorkerStates, shipped: Any
    ) -> None:
        """`shipped`: the ObjectRef of the run's ShippedFiles (code_shipping.py)."""
        self._ray = ray
        self._weights = weights
        self._states = states
        cluster = config.cluster
        self._broadcasts = cluster.weight_sync == "broadcast"
        actor_class = ray.remote(
            num_cpus=cluster.learner_resources.cpus, num_gpus=cluster.learner_resources.gpus, max_restarts=0
        )(LearnerWorker)
        config_json = config.model_dump(mode="json")
        self.actors = [
            actor_class.options(name=f"agentrl-learner-{run_id}-{rank}").remote(
                config_json, rank, cluster.learner_workers, shipped
            )
            for rank in range(cluster.learner_workers)
        ]
        states.starting("learner", len(self.actors), max_restarts=0)
        init_method = ray.get(self.actors[0].rendezvous.remote())
        nodes = self._call_all([actor.join.remote(init_method) for actor in self.actors], "joining the group")
        states.ready("learner", dict(enumerate(nodes)))
        self._load(None)  # the driver's weights, the ones the rollout workers sample with

    def _call_all(self, refs: list[Any], doing: str) -> list[Any]:
        """The results of one call on every worker; if one fails, the others are ended (they would wait for it in
        a collective) and the step fails."""
        from ray.exceptions import RayActorError, RayTaskError

        pending = list(refs)
        while pending:
            ready, pending = self._ray.wait(pending, num_returns=1)
            try:
                self._ray.get(ready[0])
            except (RayActorError, RayTaskError) as err:
                rank = refs.index(ready[0])
                if isinstance(err, RayActorError):  # its process is gone (a RayTaskError: its call raised)
                    self._states.died("learner", rank)
                self.close()
                raise LearnerWorkerDied(
                    f"learner worker {rank} failed while {doing} ({type(err).__name__}: {err}); the step's update "
                    "did not complete: resume the run to continue from its last checkpoint"
                ) from err
        return self._ray.get(refs)

    def _load(self, learner_state: dict[str, Any] | None) -> None:
        self._weights.from_driver()
        state_ref = self._ray.put(learner_state)
        self._call_all([actor.load.remote(self._weights.ref, state_ref) for actor in self.actors], "loading weights")

    def update(self, episodes: list[Episode]) -> Update:
        episodes_ref = self._ray.put(episodes)
        update = self._call_all([actor.update.remote(episodes_ref) for actor in self.actors], "updating")[0]
        self._call_all([actor.gather_policy.remote() for actor in self.actors], "gathering the weights")
        if self._broadcasts:
            self._weights.from_learner_by_broadcast(self.actors[0].policy_state.remote)
        else:
            self._weights.from_learner(self.actors[0].policy_state.remote())
        return update

    def state_dict(self) -> dict[str, Any]:
        return self._call_all([actor.learner_state.remote() for actor in self.actors], "gathering the optimizer")[0]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A restored checkpoint: the driver's model holds its weights, `state` its optimizer."""
        self._load(state)

    def close(self) -> None:
        for actor in self.actors:
            with contextlib.suppress(Exception):  # already gone
                self._ray.kill(actor)

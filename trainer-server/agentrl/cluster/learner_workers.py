"""The data-parallel learner: `cluster.learner_workers` Ray actors joined by torch.distributed (gloo on CPU, NCCL
on CUDA), and the driver's learner in front of them, which the train loop uses as it uses a local Learner.

Every worker gets the whole step and collates it, so advantages and the loss's normalisers are those of the whole
batch; each computes every W-th episode by length (W workers) in micro-batches of train.micro_batch_size, and
the gradients are summed across workers once per optimizer step, after the accumulation (what DDP's reducer does
under `no_sync`; here the workers may hold different numbers of micro-batches, which DDP cannot sync). Summed
gradients are the single-process gradient; every worker clips and steps the same gradient from the same weights,
so the weights stay equal on all of them and worker 0's are the run's.
"""

from __future__ import annotations

import contextlib
import socket
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from agentrl.cluster.worker_states import WorkerStates, node_address
from agentrl.contract.config import RunConfig
from agentrl.learning.batch import TrainBatch
from agentrl.learning.learner import Learner, Update

if TYPE_CHECKING:
    from agentrl.cluster.weights import SharedWeights
    from agentrl.rollout.episode import Episode

# How long a collective waits for a worker before it fails the step (a dead worker is noticed sooner: its actor's
# call fails and the driver ends the others).
COLLECTIVE_TIMEOUT = timedelta(minutes=10)


class DataParallelLearner(Learner):
    """A Learner that computes its share of each step's micro-batches and adds up the shares with the other
    workers of its torch.distributed group (see Learner._sum_rows and the two after it)."""

    def __init__(self, *args: Any, rank: int, world_size: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rank, self.world_size = rank, world_size

    def _micro_rows(self, batch: TrainBatch) -> list[torch.Tensor]:
        by_length = torch.argsort(batch.attention_mask.sum(1), stable=True)
        return list(by_length[self.rank :: self.world_size].split(self.config.train.micro_batch_size))

    def _sum_rows(self, per_row: torch.Tensor) -> torch.Tensor:
        summed = per_row.to(self.device)
        dist.all_reduce(summed)
        return summed.cpu()

    def _sum_gradients(self, params: list[torch.Tensor]) -> None:
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        dist.all_reduce(flat)
        offset = 0
        for p in params:
            p.grad = flat[offset : offset + p.numel()].view_as(p).clone()
            offset += p.numel()

    def _sum_totals(self, totals: dict[str, float]) -> dict[str, float]:
        # A worker whose share of the rows the update trains is empty (Learner._rows_to_train) has no loss parts.
        every: list[list[str]] = [[] for _ in range(self.world_size)]
        dist.all_gather_object(every, sorted(totals))
        names = sorted(set().union(*every))
        summed = torch.tensor([totals.get(name, 0.0) for name in names], dtype=torch.float64, device=self.device)
        dist.all_reduce(summed)
        return dict(zip(names, summed.tolist(), strict=True))


class LearnerWorker:
    """One learner actor (created with `ray.remote(...)(LearnerWorker)`)."""

    def __init__(self, config: dict[str, Any], rank: int, world_size: int) -> None:
        from agentrl.models.loading import load_policy

        self.config = RunConfig.model_validate(config)
        self.rank, self.world_size = rank, world_size
        torch.manual_seed(self.config.seed)
        self.model, self.tokenizer, self.device = load_policy(self.config.model, self.config.seed)
        self.learner: DataParallelLearner | None = None

    def rendezvous(self) -> str:
        """Worker 0's address for the group: this node's IP and a port free now."""

        with socket.socket() as probe:
            probe.bind(("", 0))
            port = probe.getsockname()[1]
        return f"tcp://{node_address()}:{port}"

    def join(self, init_method: str) -> str:
        """Joins the group; returns the node it runs on (the run's `workers` events name it)."""
        backend = "nccl" if self.device.type == "cuda" else "gloo"
        dist.init_process_group(
            backend, init_method=init_method, rank=self.rank, world_size=self.world_size, timeout=COLLECTIVE_TIMEOUT
        )
        self.learner = DataParallelLearner(
            self.model, self.tokenizer, self.config, self.device, rank=self.rank, world_size=self.world_size
        )
        return node_address()

    def load(self, policy: dict[str, torch.Tensor], learner_state: dict[str, Any] | None) -> None:
        assert self.learner is not None
        self.model.load_state_dict(policy)
        if learner_state is not None:
            self.learner.load_state_dict(learner_state)

    def update(self, episodes: list[Episode]) -> Update | None:
        """Worker 0 returns the step's Update (metrics summed over the workers, advantages of every episode)."""
        assert self.learner is not None
        update = self.learner.update(episodes)
        return update if self.rank == 0 else None

    def policy_state(self) -> dict[str, torch.Tensor]:
        from agentrl.cluster.weights import cpu_state_dict

        return cpu_state_dict(self.model)

    def learner_state(self) -> dict[str, Any]:
        assert self.learner is not None
        return self.learner.state_dict()


class LearnerWorkerDied(RuntimeError):
    """A learner worker died during a step: the step did not complete; the run resumes from its last checkpoint."""


class ClusterLearner:
    """The driver's learner: `update`, `state_dict` and `load_state_dict` as agentrl.learning.learner.Learner has
    them, over the learner actors."""

    def __init__(self, ray: Any, config: RunConfig, run_id: str, weights: SharedWeights, states: WorkerStates) -> None:
        self._ray = ray
        self._weights = weights
        self._states = states
        cluster = config.cluster
        actor_class = ray.remote(
            num_cpus=cluster.learner_resources.cpus, num_gpus=cluster.learner_resources.gpus, max_restarts=0
        )(LearnerWorker)
        config_json = config.model_dump(mode="json")
        self.actors = [
            actor_class.options(name=f"agentrl-learner-{run_id}-{rank}").remote(
                config_json, rank, cluster.learner_workers
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
        self._weights.from_learner(self.actors[0].policy_state.remote())
        return update

    def state_dict(self) -> dict[str, Any]:
        return self._ray.get(self.actors[0].learner_state.remote())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A restored checkpoint: the driver's model holds its weights, `state` its optimizer."""
        self._load(state)

    def close(self) -> None:
        for actor in self.actors:
            with contextlib.suppress(Exception):  # already gone
                self._ray.kill(actor)

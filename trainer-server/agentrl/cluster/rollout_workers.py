"""Rollout workers: Ray actors that each own a rollout engine and the ToolEnvs and Tools of the episodes they run,
and the driver's engine in front of them, which the train loop uses as it uses a local engine.

A step's groups are split into contiguous shares, one per worker; every episode samples from its own seed
(`episode_seed(seed, group, sample)`), so the episodes are those one process would have sampled, whichever worker
runs them. A worker that dies mid-step is restarted by Ray (`cluster.max_restarts`); its share runs again on
another worker, so each episode of the step is recorded once. So does the share of a worker whose answer never
comes (a straggler past its deadline: STRAGGLER_FACTOR), its worker killed and restarted. Each worker's state
(starting, ready, restarting, dead) goes to the run's `workers` events through agentrl/cluster/worker_states.py.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from agentrl.cluster.code_shipping import ShippedFiles, Unpacked
from agentrl.cluster.gloo_interface import use_node_interface
from agentrl.cluster.weight_broadcast import (
    BroadcastGroup,
    Layout,
    MissedWeights,
    WeightBroadcast,
    layout_of,
    synced_tensors,
)
from agentrl.cluster.worker_states import WorkerStates, node_address
from agentrl.contract.config import RunConfig
from agentrl.environment.mcp import MCP_RESTARTS
from agentrl.rollout.agent_capture import COUNTED_STATS
from agentrl.rollout.episode import Episode
from agentrl.rollout.loop import EpisodeCounter, count_nothing

# The step figures the rollout workers' shares add up (the others are means): what the agent engine counts, and the
# MCP servers each worker restarted.
SUMMED_STATS = (*COUNTED_STATS, MCP_RESTARTS)

# A share still out when STRAGGLER_FACTOR times the slowest of its step's answered shares has passed, and at least
# STRAGGLER_FLOOR_S, is taken for lost: its worker is killed (Ray restarts it) and the share runs again on another.
# A node cut off the network and back before Ray declared it dead left its share's answer lost: the step waited
# 301 s for Ray to notice (docs/ray.md). Shares of one step are alike in size, so three times the slowest is far past
# what a slow but live share takes; the floor keeps a step of short shares from killing a worker over a pause.
STRAGGLER_FACTOR = 3.0
STRAGGLER_FLOOR_S = 60.0

if TYPE_CHECKING:
    from agentrl.cluster.weights import SharedWeights
    from agentrl.rollout.scripted import ScriptedPolicy


class RolloutWorker:
    """One rollout actor (created with `ray.remote(...)(RolloutWorker)`): its own copy of the policy, an engine as
    `rollout.engine` selects, and the run's ToolEnv class."""

    def __init__(
        self,
        config: dict[str, Any],
        concurrent_episodes: int,
        policy: ScriptedPolicy | None,
        shipped: ShippedFiles | None,
    ) -> None:
        import torch

        from agentrl.environment.agent import load_agent
        from agentrl.environment.loader import config_env_factory
        from agentrl.models.loading import load_policy
        from agentrl.rollout.factory import make_rollout_engine

        self._unpacked = Unpacked(config, shipped)  # the env folder and data files, from the driver's disk
        run_config = RunConfig.model_validate(self._unpacked.config)
        torch.manual_seed(run_config.seed)
        self.model, tokenizer, device = load_policy(run_config.model, run_config.seed)
        # Each worker starts its own MCP servers, shared by its episodes; an agent run's agents run in the worker,
        # against an endpoint the worker serves on its own loopback.
        make_env = config_env_factory(run_config) if run_config.env is not None else None
        self._mcp = make_env.mcp if make_env is not None else None
        agent = load_agent(run_config.agent) if run_config.agent is not None else None
        self.engine = make_rollout_engine(
            self.model, tokenizer, make_env, run_config.rollout, device, concurrent_episodes, policy=policy, agent=agent
        )
        self.weights_version = 0  # the weights it was built with; the driver's are version 1 and later
        self.device = device
        self._broadcast: BroadcastGroup | None = None

    def description(self) -> str:
        return self.engine.description

    def node_address(self) -> str:
        return node_address()

    def load_weights(self, weights: list[Any], version: int) -> None:
        """`weights` wraps the ObjectRef in a list, so that Ray hands over the reference and the worker fetches
        the state dict only when it lacks this version; [None] when the driver knows it received it by broadcast."""
        if version == self.weights_version:
            return
        import ray

        if weights[0] is None:
            raise MissedWeights(f"weights version {version} was broadcast to this worker's previous process")

        self.model.load_state_dict(ray.get(weights[0]))
        self.engine.weights_updated()
        self.weights_version = version

    def weight_layout(self) -> Layout:
        """What a weight broadcast sends this worker (weight_broadcast.py): its model's tensors an update changes."""
        return layout_of(synced_tensors(self.model))

    def join_weight_broadcast(self, address: str, rank: int, size: int) -> None:
        """Joins a new weight broadcast group (the one it was in, if any, is left behind)."""
        use_node_interface(node_address())
        self._broadcast = BroadcastGroup(address, rank, size, self.device, self.weight_layout())

    def receive_weights(self, version: int) -> None:
        """Takes its part in broadcasting `version`: its model then holds that version."""
        assert self._broadcast is not None, "receive_weights before join_weight_broadcast"
        self._broadcast.receive(synced_tensors(self.model), version)
        self.engine.weights_updated()
        self.weights_version = version

    def run(
        self,
        tasks: list[dict[str, Any]],
        group_size: int,
        seed: int,
        first_group: int,
        weights: list[Any],
        version: int,
        greedy: bool,
    ) -> tuple[list[Episode], dict[str, float]]:
        self.load_weights(weights, version)
        with self.engine.greedy() if greedy else contextlib.nullcontext():
            episodes = self.engine.run(tasks, group_size, seed, first_group)
        stats = dict(self.engine.last_stats)
        if self._mcp:  # this worker's own servers, restarted during its share (the driver adds the workers' counts)
            stats[MCP_RESTARTS] = float(self._mcp.take_restarts())
        return episodes, stats

    def close(self) -> None:
        self.engine.close()
        self._unpacked.close()


def contiguous_shares(count: int, workers: int) -> list[range]:
    """`count` groups split into at most `workers` contiguous ranges, sizes differing by one at most."""
    size, extra = divmod(count, workers)
    shares, start = [], 0
    for index in range(workers):
        end = start + size + (index < extra)
        if end > start:
            shares.append(range(start, end))
        start = end
    return shares


class ClusterRolloutEngine:
    """The driver's engine: `run`, `greedy`, `weights_updated`, `sync_weights`, `close` and `last_stats` as
    agentrl.rollout.loop.RolloutEngine has them, over `cluster.rollout_workers` actors."""

    shares_policy_weights = False  # each worker samples from its own copy, brought up to date every step

    def __init__(
        self,
        ray: Any,
        config: RunConfig,
        run_id: str,
        weights: SharedWeights,
        on_worker_restarted: Callable[[dict[str, Any]], None],
        states: WorkerStates,
        policy: ScriptedPolicy | None,
        shipped: Any,
    ) -> None:
        """`shipped`: the ObjectRef of the run's ShippedFiles (code_shipping.py)."""
        self._ray = ray
        cluster = config.cluster
        self._weights = weights
        self._on_worker_restarted = on_worker_restarted
        self._states = states
        self._greedy = False
        self._max_attempts = cluster.max_restarts + 1  # of one share, in one step
        per_worker = -(-config.train.batch_size // cluster.rollout_workers)
        actor_class = ray.remote(
            num_cpus=cluster.rollout_resources.cpus,
            num_gpus=cluster.rollout_resources.gpus,
            max_restarts=cluster.max_restarts,
            max_task_retries=0,  # a dead worker's share is re-run by `run`, on a live worker
            # Across the nodes: their tools' load shared, a lost node costs fewer shares, and the CPUs each node keeps
            # free are alike (learner workers then find room on any node, not only on those left empty).
            scheduling_strategy="SPREAD",
        )(RolloutWorker)
        config_json = config.model_dump(mode="json")
        self.actors = [
            actor_class.options(name=f"agentrl-rollout-{run_id}-{index}").remote(
                config_json, per_worker, policy, shipped
            )
            for index in range(cluster.rollout_workers)
        ]
        states.starting("rollout", len(self.actors), cluster.max_restarts)
        nodes = ray.get([actor.node_address.remote() for actor in self.actors])  # answered once each has started
        states.ready("rollout", dict(enumerate(nodes)))
        self.description = f"ray: {len(self.actors)} rollout workers, {ray.get(self.actors[0].description.remote())}"
        self.last_stats: dict[str, float] = {}
        self.broadcast: WeightBroadcast | None = None  # set with the learner workers under weight_sync: broadcast
        self.weights_updated()

    def weights_updated(self) -> None:
        """Send the current weights to every worker now, so that loading them overlaps the driver's recording: by
        broadcast from learner worker 0 when they came from the learner under weight_sync: broadcast, else through
        the object store. A worker that misses them (it was restarting) loads them at the start of its next share."""
        if self.broadcast is not None and self._weights.broadcast and self.broadcast.send(self._weights.version):
            return
        for actor in self.actors:
            actor.load_weights.remote([self._weights.ref], self._weights.version)

    def _weights_for(self, worker: int) -> list[Any]:
        """What a share on `worker` carries besides the version: nothing when it received the version by
        broadcast, else the object store's copy (put there now if it is not yet)."""
        version = self._weights.version
        if self._weights.broadcast and self.broadcast is not None and self.broadcast.holds(worker, version):
            return [None]
        return [self._weights.ref]

    def sync_weights(self) -> None:
        """Nothing to do: every share carries the version of the weights it must be sampled with."""

    @contextlib.contextmanager
    def greedy(self) -> Iterator[None]:
        self._greedy = True
        try:
            yield
        finally:
            self._greedy = False

    def _submit(
        self, worker: int, by_group: dict[int, dict[str, Any]], share: range, group_size: int, seed: int
    ) -> Any:
        """The groups of `share` (numbered as the step numbers them) on worker `worker`."""
        return self.actors[worker].run.remote(
            [by_group[g] for g in share],
            group_size,
            seed,
            share.start,
            self._weights_for(worker),
            self._weights.version,
            self._greedy,
        )

    def run(
        self,
        tasks: list[dict[str, Any]],
        group_size: int,
        seed: int,
        first_group: int = 0,
        on_episode_end: EpisodeCounter = count_nothing,
    ) -> list[Episode]:
        """The groups of `tasks` split into one contiguous share per worker; `on_episode_end` counts the episodes of
        the shares that came back."""
        from ray.exceptions import RayActorError

        started = time.perf_counter()
        shares = [
            range(first_group + s.start, first_group + s.stop) for s in contiguous_shares(len(tasks), len(self.actors))
        ]
        by_group = {first_group + index: task for index, task in enumerate(tasks)}
        # each share out: (worker, share, attempt, when it was sent)
        pending: dict[Any, tuple[int, range, int, float]] = {}

        def send(worker: int, share: range, attempt: int) -> None:
            pending[self._submit(worker, by_group, share, group_size, seed)] = (
                worker,
                share,
                attempt,
                time.monotonic(),
            )

        for worker, share in enumerate(shares):
            send(worker, share, 1)
        slowest_answer_s = 0.0  # of this step's answered shares, from sending to answer
        done: dict[int, tuple[list[Episode], dict[str, float]]] = {}
        while pending:
            ready_now, _ = self._ray.wait(list(pending), num_returns=1, timeout=1.0)
            if not ready_now:
                if slowest_answer_s:
                    self._kill_stragglers(pending, slowest_answer_s)
                continue
            [ready] = ready_now
            worker, share, attempt, sent_at = pending.pop(ready)
            try:
                done[share.start] = self._ray.get(ready)
                slowest_answer_s = max(slowest_answer_s, time.monotonic() - sent_at)
            except MissedWeights:  # restarted since it received the version (Ray raises it as the worker's error)
                assert self.broadcast is not None
                self.broadcast.left(worker)
                send(worker, share, attempt)
                continue
            except RayActorError as err:
                if attempt >= self._max_attempts:
                    raise RuntimeError(
                        f"groups {share.start}-{share.stop - 1} failed on {attempt} rollout workers in a row; "
                        f"last: {err}"
                    ) from err
                again = (worker + 1) % len(self.actors)  # the next worker; Ray restarts this one meanwhile
                died = self._states.died("rollout", worker)
                if self.broadcast is not None:
                    self.broadcast.left(worker)
                if died is not None and died["state"] == "restarting":
                    self._on_worker_restarted(
                        {
                            "worker": worker,
                            "restarts": died["restarts"],
                            "episodes_rerun": len(share) * group_size,
                            "rerun_on": again,
                            "message": f"rollout worker {worker} died ({type(err).__name__}); Ray restarts it and "
                            f"its {len(share) * group_size} episodes run again on worker {again}",
                        }
                    )
                send(again, share, attempt + 1)
                continue
            on_episode_end(sum(len(s) for s in shares if s.start in done) * group_size, len(tasks) * group_size)
            if not self._states.is_ready("rollout", worker):  # restarted, and this share is its first answer since
                self._states.ready("rollout", {worker: self._ray.get(self.actors[worker].node_address.remote())})
        episodes: list[Episode] = []
        stats: dict[str, list[float]] = {}
        for start in sorted(done):
            share_episodes, share_stats = done[start]
            episodes += share_episodes
            for key, value in share_stats.items():
                stats.setdefault(key, []).append(value)
        elapsed = time.perf_counter() - started
        generated = sum(episode.response_length for episode in episodes)
        self.last_stats = {
            key: sum(values) if key in SUMMED_STATS else sum(values) / len(values) for key, values in stats.items()
        } | {
            "perf/rollout_time_s": elapsed,
            "perf/rollout_tokens_per_s": generated / elapsed if elapsed > 0 else 0.0,
        }
        return episodes

    def _kill_stragglers(self, pending: dict[Any, tuple[int, range, int, float]], slowest_s: float) -> None:
        """Kills the worker of each share out past its deadline (STRAGGLER_FACTOR, STRAGGLER_FLOOR_S): its answer then
        raises as a dead worker's does, and `run` runs the share again on another worker."""
        deadline_s = max(STRAGGLER_FACTOR * slowest_s, STRAGGLER_FLOOR_S)
        for ref, (worker, share, attempt, sent_at) in pending.items():
            # A restarted worker is not ready until its first answer: its share waits for its start (a vLLM engine
            # loading), which no deadline measured on started workers bounds.
            if time.monotonic() - sent_at > deadline_s and self._states.is_ready("rollout", worker):
                print(
                    f"WARN rollout worker {worker}: groups {share.start}-{share.stop - 1} not answered "
                    f"{deadline_s:.0f} s after they were sent (the slowest of the step's other shares took "
                    f"{slowest_s:.1f} s); taken for lost, the worker restarted and the groups sent again",
                    file=sys.stderr,
                )
                self._ray.kill(self.actors[worker], no_restart=False)
                pending[ref] = (worker, share, attempt, float("inf"))  # killed once; its answer (an error) comes next

    def close(self) -> None:
        for actor in self.actors:
            with contextlib.suppress(Exception):  # an actor already gone has nothing left to close
                self._ray.get(actor.close.remote(), timeout=30)
            self._ray.kill(actor)

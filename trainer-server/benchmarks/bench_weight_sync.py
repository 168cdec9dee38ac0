"""Seconds to bring the rollout workers a step's new weights on a Ray cluster, side by side: through Ray's object store
(`cluster.weight_sync: object_store`: learner worker 0's state dict put in the store, each rollout worker fetching it
and loading it into its model) and by broadcast (`cluster.weight_sync: broadcast`: weight_broadcast.BroadcastGroup,
learner worker 0 sending buckets over a torch.distributed group, gloo on CPU, each rollout worker copying them into
its model in place).

The models are random, of Qwen2.5-0.5B's and Qwen2.5-3B's shapes (agentrl.cli.gpu_check.shapes's), in bfloat16 and built
in code (nothing is downloaded; what the weights are does not change how long they take to move). Each update is timed
from the learner's gathered weights to every rollout worker holding them, as ClusterLearner and ClusterRolloutEngine do
it; the median of `--repeats` is printed. A 3B model is 6.2 GB in bfloat16: the learner's copy, the store's and each
rollout worker's must fit the machine, so `--workers-3b` defaults to 1.

    .venv/bin/python trainer-server/benchmarks/bench_weight_sync.py [--repeats 3] [--workers-0.5b 2] [--workers-3b 1]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import time
from typing import Any

import ray
import torch
from agentrl.cli.gpu_check.shapes import QWEN25_0_5B, QWEN25_3B, Shape, qwen2_config
from agentrl.cluster.weight_broadcast import BroadcastGroup, layout_of, synced_tensors
from agentrl.cluster.weights import cpu_state_dict
from agentrl.models.tiny import build_tiny_tokenizer

CPU = torch.device("cpu")


def build(shape: Shape) -> Any:
    """A Qwen2 of `shape` in bfloat16, its weights filled with a constant: allocated, not initialised (a 3B model's
    random initialisation takes minutes on 2 cores)."""
    from transformers import Qwen2ForCausalLM

    config = qwen2_config(shape, build_tiny_tokenizer())  # the tokenizer names only the special tokens' ids
    with torch.device("meta"):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.to_empty(device=CPU)
    model.tie_weights()  # to_empty gave the output head a tensor of its own
    with torch.no_grad():
        for tensor in model.state_dict().values():
            tensor.fill_(0.01)
    return model


class Learner:
    """Learner worker 0's part: its weights, and the sending end of the broadcast group."""

    def __init__(self, shape: Shape) -> None:
        torch.set_num_threads(1)
        self.model = build(shape)
        self.group: BroadcastGroup | None = None

    def state(self) -> dict[str, torch.Tensor]:
        return cpu_state_dict(self.model)

    def join(self, address: str, size: int, layout: Any) -> None:
        self.group = BroadcastGroup(address, 0, size, CPU, layout)

    def send(self, version: int) -> None:
        assert self.group is not None
        self.group.send(self.model.state_dict(), version)


class Rollout:
    """A rollout worker's part: its own copy of the model, loaded from the store or received by broadcast."""

    def __init__(self, shape: Shape) -> None:
        torch.set_num_threads(1)
        self.model = build(shape)
        self.group: BroadcastGroup | None = None

    def layout(self) -> Any:
        return layout_of(synced_tensors(self.model))

    def join(self, address: str, rank: int, size: int) -> None:
        self.group = BroadcastGroup(address, rank, size, CPU, self.layout())

    def load(self, weights: list[Any]) -> None:
        self.model.load_state_dict(ray.get(weights[0]))

    def receive(self, version: int) -> None:
        assert self.group is not None
        self.group.receive(synced_tensors(self.model), version)


def free_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


def timed_updates(shape: Shape, workers: int, repeats: int, path: str) -> float | str:
    """The median seconds of `repeats` updates by `path` (object_store or broadcast), with actors of their own; or
    why none completed (Ray kills a process when the node runs out of memory)."""
    learner = ray.remote(num_cpus=0)(Learner).remote(shape)
    rollouts = [ray.remote(num_cpus=0)(Rollout).remote(shape) for _ in range(workers)]
    seconds = []
    try:
        if path == "broadcast":
            layout = ray.get(rollouts[0].layout.remote())
            address, size = free_address(), workers + 1
            joins = [r.join.remote(address, i + 1, size) for i, r in enumerate(rollouts)]
            ray.get([learner.join.remote(address, size, layout), *joins])
        for version in range(1, repeats + 1):
            started = time.perf_counter()
            if path == "broadcast":
                ray.get([learner.send.remote(version)] + [r.receive.remote(version) for r in rollouts])
            else:
                ref = learner.state.remote()  # in the store, as ClusterLearner.update leaves it
                ray.get([r.load.remote([ref]) for r in rollouts])
                del ref
            seconds.append(time.perf_counter() - started)
    except (ray.exceptions.OutOfMemoryError, ray.exceptions.RayActorError) as err:
        return f"failed: {type(err).__name__}"
    finally:
        for actor in (learner, *rollouts):
            ray.kill(actor)
        time.sleep(2)  # the killed actors' memory back before the next ones start
    return round(statistics.median(seconds), 2)


def measure(shape: Shape, workers: int, repeats: int) -> dict[str, Any]:
    model = build(shape)
    gigabytes = round(sum(t.numel() * t.element_size() for t in synced_tensors(model).values()) / 1e9, 2)
    del model
    return {
        "shape": shape.name,
        "gigabytes": gigabytes,
        "rollout_workers": workers,
        "broadcast_s": timed_updates(shape, workers, repeats, "broadcast"),
        "object_store_s": timed_updates(shape, workers, repeats, "object_store"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers-0.5b", dest="workers_small", type=int, default=2)
    parser.add_argument("--workers-3b", dest="workers_large", type=int, default=1)
    args = parser.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=8 << 30)
    try:
        rows = [
            measure(QWEN25_0_5B, args.workers_small, args.repeats),
            measure(QWEN25_3B, args.workers_large, args.repeats),
        ]
    finally:
        ray.shutdown()
    header = ("shape", "GB (bf16)", "rollout workers", "broadcast s", "object store s")
    table = [header] + [
        tuple(str(row[key]) for key in ("shape", "gigabytes", "rollout_workers", "broadcast_s", "object_store_s"))
        for row in rows
    ]
    widths = [max(len(line[column]) for line in table) for column in range(len(header))]
    for line in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
    print(json.dumps(rows))


if __name__ == "__main__":
    main()

"""`cluster.weight_sync: broadcast`: after each optimizer step, learner worker 0 broadcasts the new weights to every
rollout worker over a torch.distributed group of their own (NCCL on CUDA, gloo on CPU), instead of putting them in
Ray's object store for each worker to fetch.

The group is learner worker 0 (rank 0, the sender) and rollout worker i (rank i + 1), separate from the learner
workers' group: it is made from a TCPStore that learner worker 0 hosts, so it joins processes that are not one
torch.distributed world. Every broadcast starts with a header, the weights' version and their element count, which
each rollout worker checks against the version the driver told it to expect and its own layout; then the weights
travel in buckets of at most BUCKET_BYTES, one dtype each, and are copied in place into the rollout worker's model.
The layout (names, shapes, dtypes, in order) is the rollout workers' own model's, so the learner sends each tensor
in the dtype the rollout workers sample with; under LoRA only the adapter's tensors travel (the base weights are
frozen, equal on both sides from the start).

A rollout worker that did not receive a version (it was restarting, or the broadcast failed) gets it as before,
from the object store, with its next share: the driver asks learner worker 0 to put that version there only then
(`SharedWeights.from_learner_by_broadcast`), and builds the group again, with the restarted worker, before the next
broadcast.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any
from urllib.parse import urlparse

import torch
import torch.distributed as dist

# Large enough that the per-bucket latency is small beside the transfer, small enough that a bucket's flat copy
# beside the model costs little memory.
BUCKET_BYTES = 64 * 2**20

# How long the driver waits for a restarted rollout worker to answer before it builds a group without a broadcast for
# this version (the object store carries it).
REJOIN_WAIT_S = 60.0
# How long a member waits for the others, to join or within a broadcast, before it fails.
BROADCAST_TIMEOUT = timedelta(minutes=10)

Layout = list[tuple[str, tuple[int, ...], torch.dtype]]


class MissedWeights(RuntimeError):
    """A rollout worker was told it holds a version by broadcast but does not (it was restarted since): the driver
    sends the share again with the object store's copy."""


def synced_tensors(model: Any) -> dict[str, torch.Tensor]:
    """The tensors of `model` a weight update changes, by state_dict name: under LoRA (a peft model) the adapter's
    alone, else all of them; a tensor under two names (an output head tied to the embeddings: 136M of Qwen2.5-0.5B's
    494M parameters) once, under its first."""
    state = model.state_dict()
    if hasattr(model, "peft_config"):
        state = {name: tensor for name, tensor in state.items() if ".lora_" in name}
    once: dict[tuple[int, int, tuple[int, ...]], str] = {}
    for name, tensor in state.items():
        once.setdefault((tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape)), name)
    return {name: state[name] for name in once.values()}


def layout_of(tensors: dict[str, torch.Tensor]) -> Layout:
    return [(name, tuple(tensor.shape), tensor.dtype) for name, tensor in tensors.items()]


def buckets(layout: Layout, bucket_bytes: int = BUCKET_BYTES) -> list[list[int]]:
    """The layout's entries (by index) in buckets of one dtype and at most `bucket_bytes` each (a larger tensor has a
    bucket of its own), in layout order within each dtype."""
    found: list[list[int]] = []
    open_bucket: dict[torch.dtype, tuple[list[int], int]] = {}
    for index, (_, shape, dtype) in enumerate(layout):
        size = torch.Size(shape).numel() * dtype.itemsize
        members, used = open_bucket.get(dtype, ([], 0))
        if members and used + size > bucket_bytes:
            found.append(members)
            members, used = [], 0
        open_bucket[dtype] = (members + [index], used + size)
    found += [members for members, _ in open_bucket.values()]
    return found


class BroadcastGroup:
    """One member's end of the weight broadcast group; rank 0 sends, the others receive."""

    def __init__(
        self,
        address: str,
        rank: int,
        size: int,
        device: torch.device,
        layout: Layout,
        bucket_bytes: int = BUCKET_BYTES,
    ) -> None:
        url = urlparse(address)
        assert url.hostname is not None and url.port is not None, address
        store = dist.TCPStore(
            url.hostname, url.port, size, is_master=rank == 0, timeout=BROADCAST_TIMEOUT, wait_for_workers=False
        )
        if device.type == "cuda":
            torch.cuda.set_device(device)
            self._group: Any = dist.ProcessGroupNCCL(store, rank, size)
        else:
            self._group = dist.ProcessGroupGloo(store, rank, size, BROADCAST_TIMEOUT)
        self.rank, self.device, self.layout = rank, device, layout
        self._buckets = buckets(layout, bucket_bytes)
        self._numel = sum(torch.Size(shape).numel() for _, shape, _ in layout)

    def _broadcast(self, tensor: torch.Tensor) -> None:
        self._group.broadcast(tensor, 0).wait()

    def send(self, state: dict[str, torch.Tensor], version: int) -> None:
        """Rank 0: the header, then `state`'s tensors of the layout, each cast to the layout's dtype."""
        for name, shape, _ in self.layout:
            if tuple(state[name].shape) != shape:
                raise ValueError(f"{name}: the learner's is {tuple(state[name].shape)}, the rollout workers' {shape}")
        self._broadcast(torch.tensor([version, self._numel], dtype=torch.int64, device=self.device))
        for bucket in self._buckets:
            dtype = self.layout[bucket[0]][2]
            flat = torch.cat([state[self.layout[i][0]].reshape(-1).to(self.device, dtype) for i in bucket])
            self._broadcast(flat)

    def receive(self, targets: dict[str, torch.Tensor], version: int) -> None:
        """Any other rank: checks the header against `version` and its layout, then copies each bucket's tensors
        into `targets` in place. Another version of the same layout is received and dropped before it fails, so
        that the sender and the other receivers are not left waiting in the broadcast."""
        header = torch.empty(2, dtype=torch.int64, device=self.device)
        self._broadcast(header)
        sent_version, sent_numel = header.tolist()
        refused = (sent_version, sent_numel) != (version, self._numel)
        if sent_numel != self._numel:
            raise RuntimeError(
                f"weight broadcast: got {sent_numel} elements, this worker's layout has {self._numel}; the learner "
                "and rollout workers load different models"
            )
        for bucket in self._buckets:
            dtype = self.layout[bucket[0]][2]
            counts = [torch.Size(self.layout[i][1]).numel() for i in bucket]
            flat = torch.empty(sum(counts), dtype=dtype, device=self.device)
            self._broadcast(flat)
            if refused:
                continue
            with torch.no_grad():
                for i, part in zip(bucket, flat.split(counts), strict=True):
                    name, shape, _ = self.layout[i]
                    targets[name].copy_(part.view(shape))
        if refused:
            raise RuntimeError(f"weight broadcast: got version {sent_version}, expected version {version}")


class WeightBroadcast:
    """The driver's side: builds the group (again after a rollout worker left it), starts each version's broadcast
    without waiting for it, and says which rollout workers received the current version."""

    def __init__(self, ray: Any, learner: Any, rollout: list[Any]) -> None:
        self._ray = ray
        self._learner = learner  # learner worker 0's actor
        self._rollout = rollout
        self._layout: Layout | None = None
        self.members: set[int] = set()  # rollout workers in the current group
        self._pending: dict[Any, int | None] = {}  # the current broadcast's calls: rollout worker, or None (sender)
        self._holders: set[int] = set()  # rollout workers known to hold the current version
        self._version = 0

    def _all_answer(self) -> bool:
        """Whether every rollout worker answers within REJOIN_WAIT_S: a restarted one may still be starting (Ray says
        it is unavailable meanwhile). A group's members must all join, or the others wait for it at the rendezvous."""
        from ray.exceptions import GetTimeoutError, RayActorError

        deadline = time.monotonic() + REJOIN_WAIT_S
        while True:
            try:
                self._ray.get([actor.node_address.remote() for actor in self._rollout], timeout=REJOIN_WAIT_S)
                return True
            except (RayActorError, GetTimeoutError):
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.5)

    def _build_group(self) -> bool:
        """A new group of learner worker 0 and every rollout worker; False (and no group) when a rollout worker does
        not answer: the version then reaches every worker through the object store, and the next one tries again."""
        self.members = set()
        if not self._all_answer():
            return False
        if self._layout is None:
            self._layout = self._ray.get(self._rollout[0].weight_layout.remote())
        address = self._ray.get(self._learner.rendezvous.remote())
        size = len(self._rollout) + 1
        joins = [self._learner.join_weight_broadcast.remote(address, 0, size, self._layout)] + [
            actor.join_weight_broadcast.remote(address, index + 1, size) for index, actor in enumerate(self._rollout)
        ]
        self._ray.get(joins)
        self.members = set(range(len(self._rollout)))
        return True

    def send(self, version: int) -> bool:
        """Starts broadcasting `version` (learner worker 0 holds it, gathered); a group that lost a member is built
        again first. False when no group could be built: the caller sends the version through the object store."""
        self.settle()
        self._version = version
        self._holders = set()
        if self.members != set(range(len(self._rollout))) and not self._build_group():
            return False
        self._pending = {self._learner.broadcast_weights.remote(version): None} | {
            actor.receive_weights.remote(version): index for index, actor in enumerate(self._rollout)
        }
        return True

    def left(self, worker: int) -> None:
        """Rollout worker `worker` died: it is no longer in the group, and its restarted process lacks the version."""
        self.members.discard(worker)
        self._holders.discard(worker)

    def settle(self) -> None:
        """Waits for the current broadcast; a member whose part failed leaves the group (it is built again before the
        next broadcast), and a rollout worker whose receive failed does not hold the version."""
        from ray.exceptions import RayActorError, RayTaskError

        for ref, worker in self._pending.items():
            try:
                self._ray.get(ref)
            except (RayActorError, RayTaskError):
                if worker is None:
                    self.members = set()  # the sender failed: nobody can count on the version
                    self._holders = set()
                else:
                    self.left(worker)
                continue
            if worker is not None and worker in self.members:
                self._holders.add(worker)
        self._pending = {}

    def holds(self, worker: int, version: int) -> bool:
        """Whether rollout worker `worker` received `version` by broadcast (else it must load it from the store)."""
        self.settle()
        return version == self._version and worker in self._holders

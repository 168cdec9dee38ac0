"""The data-parallel distribution of one learner worker (the `Distribution` its learner is given): its share of
each step's micro-batches, added up with the other workers of its torch.distributed group (gloo on CPU, NCCL on
CUDA).

Every worker gets the whole step and collates it, so advantages and the loss's normalisers are those of the whole
batch; each computes every W-th episode by length (W workers) in micro-batches of train.micro_batch_size, and
the gradients are summed across workers once per optimizer step, after the accumulation (what DDP's reducer does
under `no_sync`; here the workers may hold different numbers of micro-batches, which DDP cannot sync). Summed
gradients are the single-process gradient; every worker clips and steps the same gradient from the same weights,
so the weights stay equal on all of them and worker 0's are the run's.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from agentrl.cluster.weights import cpu_state_dict
from agentrl.learning.batch import TrainBatch
from agentrl.learning.distribution import OneProcess


class DataParallel(OneProcess):
    """Worker `rank` of `world_size`: every W-th row by length, its computations added up with the others' over the
    torch.distributed group (collectives on `device`). The rest is one process's: every worker holds the whole model
    and clips and steps the same summed gradient; the collectives are per step, not per pass."""

    def __init__(self, rank: int, world_size: int, device: torch.device) -> None:
        self.rank, self.world_size, self.device = rank, world_size, device

    def micro_rows(self, batch: TrainBatch, size: int, with_values: bool) -> list[torch.Tensor]:
        by_length = torch.argsort(batch.attention_mask.sum(1), stable=True)
        return list(by_length[self.rank :: self.world_size].split(size))

    def sum_rows(self, per_row: torch.Tensor) -> torch.Tensor:
        summed = per_row.to(self.device)
        dist.all_reduce(summed)
        return summed.cpu()

    def sum_gradients(self, params: list[torch.Tensor]) -> None:
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        dist.all_reduce(flat)
        offset = 0
        for p in params:
            p.grad = flat[offset : offset + p.numel()].view_as(p).clone()
            offset += p.numel()

    def sum_totals(self, totals: dict[str, float]) -> dict[str, float]:
        # A worker whose share of the rows the update trains is empty (Learner._rows_to_train) has no loss parts.
        every: list[list[str]] = [[] for _ in range(self.world_size)]
        dist.all_gather_object(every, sorted(totals))
        names = sorted(set().union(*every))
        summed = torch.tensor([totals.get(name, 0.0) for name in names], dtype=torch.float64, device=self.device)
        dist.all_reduce(summed)
        return dict(zip(names, summed.tolist(), strict=True))

    def policy_state(self, model: nn.Module) -> dict[str, torch.Tensor] | None:
        """The run's weights, on the CPU: worker 0's (every worker holds the same); None on the others."""
        return cpu_state_dict(model) if self.rank == 0 else None

    def load_policy(self, model: nn.Module, state: dict[str, torch.Tensor]) -> None:
        model.load_state_dict(state)

"""How a learner spreads its work over processes: the `Distribution` it is given. One process (`OneProcess`, here)
computes every micro-batch and holds the whole model; the data-parallel workers (agentrl/cluster/data_parallel.py)
each compute some micro-batches and add up what they computed; the sharded ones (agentrl/cluster/sharded_learner.py)
also split the weights, gathering each layer's for every pass.

Every loss term is normalised by the whole batch's figures, so the sum over the micro-batches of all processes is
the single-process loss, whichever process computed which: a distribution changes where the numbers are computed,
never what they are (tests/test_cluster.py and tests/test_sharded_learner.py hold the learners to one process's
weights).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch import nn

from agentrl.learning.batch import TrainBatch
from agentrl.learning.forward import Forward
from agentrl.learning.microbatches import plan_micro_rows


class Distribution(Protocol):
    # Whether a micro-batch's shared prefix may run in a call of its own (processes that gather each layer's weights
    # for every call must call each layer the same number of times, whatever rows they hold).
    runs_shared_prefix_once: bool

    def place(self, models: list[nn.Module], forward: Forward) -> Forward:
        """Place the policy's (and the reference's) parameters before the optimizer takes them; returns the forward
        pass to run them with."""
        ...

    def micro_rows(self, batch: TrainBatch, size: int, with_values: bool) -> list[torch.Tensor]:
        """The rows of each micro-batch of `size` rows this process computes."""
        ...

    def keep_in_step(self, passes: int, filler_pass: Callable[[], None]) -> None:
        """Before this process runs `passes` passes: run `filler_pass` (a pass that adds nothing) as many times as
        keep it in step with processes that run more."""
        ...

    def sum_rows(self, per_row: torch.Tensor) -> torch.Tensor:
        """A [rows, ...] tensor in which each process filled the rows it computed (zeros elsewhere), complete."""
        ...

    def sum_gradients(self, params: list[torch.Tensor]) -> None:
        """Make each parameter's gradient the sum of every process's, before clipping and the optimizer step."""
        ...

    def sum_totals(self, totals: dict[str, float]) -> dict[str, float]:
        """The loss parts summed over every process's micro-batches."""
        ...

    def clip_gradients(self, params: list[torch.Tensor], max_norm: float) -> float:
        """Clip the gradients to `max_norm`; returns their norm before clipping."""
        ...

    def whole_optimizer_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """The optimizer's state_dict as one process's optimizer holds it (what a checkpoint stores)."""
        ...

    def own_optimizer_state(self, state: dict[str, Any], params: list[torch.Tensor]) -> dict[str, Any]:
        """A whole optimizer state_dict (a checkpoint's) as this process's optimizer of `params` holds it."""
        ...


class OneProcess:
    """Everything in this process: every micro-batch, the whole model."""

    runs_shared_prefix_once = True

    def place(self, models: list[nn.Module], forward: Forward) -> Forward:
        return forward

    def micro_rows(self, batch: TrainBatch, size: int, with_values: bool) -> list[torch.Tensor]:
        return plan_micro_rows(batch, size, with_values)

    def keep_in_step(self, passes: int, filler_pass: Callable[[], None]) -> None:
        pass  # no other process to keep in step with

    def sum_rows(self, per_row: torch.Tensor) -> torch.Tensor:
        return per_row

    def sum_gradients(self, params: list[torch.Tensor]) -> None:
        pass  # this process's gradients are all of them

    def sum_totals(self, totals: dict[str, float]) -> dict[str, float]:
        return totals

    def clip_gradients(self, params: list[torch.Tensor], max_norm: float) -> float:
        return float(torch.nn.utils.clip_grad_norm_(params, max_norm))

    def whole_optimizer_state(self, state: dict[str, Any]) -> dict[str, Any]:
        return state

    def own_optimizer_state(self, state: dict[str, Any], params: list[torch.Tensor]) -> dict[str, Any]:
        return state

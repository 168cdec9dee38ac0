"""The sharded distribution of a learner worker (`cluster.sharding: fsdp`): each learner worker holds 1/W of the
policy's parameters, of their gradients and of the optimizer's state (W workers), with PyTorch's FSDP2
(`fully_shard`), so a model whose weights, gradients and AdamW moments do not fit one device trains on W of them.

Phases of a pass, as FSDP2 runs them: before each decoder layer runs, its weights are gathered from every worker
(all-gather) and freed after it; the embeddings, the final norm and the output head are gathered once a pass, by
the root this file wraps around the model (the learner calls the decoder and the output head itself, not the
model's forward, so the root is a module of ours whose forward is the learner's); after the backward, each
layer's gradient is summed across the workers and each keeps its own shard of the sum (reduce-scatter). The sum,
not FSDP's default mean, because the learner's losses are already normalised by the whole batch (as the
data-parallel learner sums them); the optimizer then steps each worker's shard.

Every gather is a collective, so every worker must run the same passes in the same order: a worker whose share of
a step's rows makes fewer micro-batches runs passes on one row that add nothing (`keep_in_step`), and a
micro-batch's shared prefix runs with the rest of it (one call of each layer a pass).

On CUDA the shards of the weights that train are float32 and the passes compute in the model's dtype (bfloat16 by
default), with the gradients summed in float32 (FSDP2's MixedPrecisionPolicy): fp32 master weights (a LoRA run's
frozen base stays in its dtype). On CPU (gloo) they compute in their
own dtype, with train.bf16_autocast as without sharding.

Checkpoints and the rollout workers get the whole weights, gathered on worker 0, and the optimizer state gathered
into the single-process optimizer's format: a sharded run's checkpoint is a `save_pretrained` folder like any
other, and resumes with or without sharding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, set_model_state_dict
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor

from agentrl.cluster.data_parallel import DataParallel
from agentrl.learning.batch import TrainBatch
from agentrl.learning.forward import Forward


class _ShardedRoot(nn.Module):
    """The root FSDP module around a model: its forward is the learner's, so the parameters outside the decoder
    layers (embeddings, final norm, output head) are gathered for it and their gradients reduced after it."""

    def __init__(self, model: nn.Module, forward: Forward) -> None:
        super().__init__()
        self.model = model
        self._learner_forward = forward

    def forward(self, batch: TrainBatch, *, with_values: bool, with_entropy: bool) -> dict[str, torch.Tensor]:
        return self._learner_forward(self.model, batch, with_values=with_values, with_entropy=with_entropy)


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The model's repeated blocks, each sharded on its own: the classes its Hugging Face definition names as never
    split across devices (`_no_split_modules`; a LoRA model's base model names them)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = set(getattr(base, "_no_split_modules", None) or ())
    return [module for module in model.modules() if type(module).__name__ in names]


def full_tensor(value: Any) -> Any:
    """A sharded tensor gathered whole (a collective), on the CPU; anything else as it is."""
    return value.full_tensor().cpu() if isinstance(value, DTensor) else value


class Sharded(DataParallel):
    """Worker `rank` of `world_size`, each holding 1/W of the weights: the data-parallel worker's share of the rows,
    with every layer's weights gathered for each pass."""

    runs_shared_prefix_once = False

    def place(self, models: list[nn.Module], forward: Forward) -> Forward:
        cuda = self.device.type == "cuda"
        roots: dict[int, _ShardedRoot] = {}
        for model in models:
            compute_dtype = next(model.parameters()).dtype
            if cuda:  # float32 master copies of the weights that train; every pass computes in compute_dtype
                for parameter in model.parameters():
                    if parameter.requires_grad:
                        parameter.data = parameter.data.float()
            precision = MixedPrecisionPolicy(
                param_dtype=compute_dtype if cuda else None,
                reduce_dtype=torch.float32 if cuda else None,
                cast_forward_inputs=False,  # the batch's masks and rewards stay as collated
            )
            for layer in decoder_layers(model):
                fully_shard(layer, mp_policy=precision)
            root = _ShardedRoot(model, forward)
            fully_shard(root, mp_policy=precision)
            for module in root.modules():
                if isinstance(module, FSDPModule):
                    module.set_gradient_divide_factor(1.0)  # a sum, as the data-parallel learner's all-reduce
                    module.set_force_sum_reduction_for_comms(True)  # gloo has no pre-multiplied sum
            roots[id(model)] = root

        def sharded_forward(
            model: Any, batch: TrainBatch, *, with_values: bool, with_entropy: bool
        ) -> dict[str, torch.Tensor]:
            return roots[id(model)](batch, with_values=with_values, with_entropy=with_entropy)

        return sharded_forward

    def keep_in_step(self, passes: int, filler_pass: Callable[[], None]) -> None:
        most = torch.tensor([passes], device=self.device)
        dist.all_reduce(most, op=dist.ReduceOp.MAX)
        for _ in range(int(most) - passes):
            filler_pass()

    def sum_gradients(self, params: list[torch.Tensor]) -> None:
        # The sharded parameters' gradients were summed by their backward's reduce-scatter; the value head's are not.
        whole = [p for p in params if not isinstance(p, DTensor)]
        if whole:
            super().sum_gradients(whole)

    def clip_gradients(self, params: list[torch.Tensor], max_norm: float) -> float:
        """The norm of the whole gradient: each worker's shards' norm combined with the others' (a DTensor's norm
        is a partial sum until `full_tensor`), with the value head's, which every worker holds whole."""
        with_grad = [p for p in params if p.grad is not None]
        sharded = [p for p in with_grad if isinstance(p, DTensor)]
        whole = [p for p in with_grad if not isinstance(p, DTensor)]
        norms = [
            full_tensor(torch.nn.utils.get_total_norm([p.grad for p in group])).float().cpu()
            for group in (sharded, whole)
            if group
        ]
        total = torch.linalg.vector_norm(torch.stack(norms))
        for group in (sharded, whole):
            if group:
                torch.nn.utils.clip_grads_with_norm_(group, max_norm, total)
        return float(total)

    def policy_state(self, model: nn.Module) -> dict[str, torch.Tensor] | None:
        """The whole weights gathered on worker 0 (every worker takes part); None on the others."""
        state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        return state if self.rank == 0 else None

    def load_policy(self, model: nn.Module, state: dict[str, torch.Tensor]) -> None:
        """Whole weights (every worker holds them) into each worker's shards."""
        set_model_state_dict(model, dict(state), options=StateDictOptions(full_state_dict=True))

    def whole_optimizer_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """The single-process optimizer's state_dict: each moment gathered whole (every worker takes part)."""
        return {
            **state,
            "state": {
                index: {name: full_tensor(value) for name, value in moments.items()}
                for index, moments in state["state"].items()
            },
        }

    def own_optimizer_state(self, state: dict[str, Any], params: list[torch.Tensor]) -> dict[str, Any]:
        """A whole optimizer state (a sharded run's or a single process's) as this worker's shards."""
        return {
            **state,
            "state": {
                index: {
                    name: distribute_tensor(
                        value.to(params[index].device),
                        params[index].device_mesh,
                        params[index].placements,
                        src_data_rank=None,
                    )
                    if isinstance(params[index], DTensor) and value.dim()
                    else value
                    for name, value in moments.items()
                }
                for index, moments in state["state"].items()
            },
        }

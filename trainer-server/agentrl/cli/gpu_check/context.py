"""What each check is given and what it gives back: the context (device, peak, scale, tokenizer, a work folder) with
the random model built in it, the report's rows, and the guard that turns a check that raises into a problem row."""

from __future__ import annotations

import gc
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from agentrl.cli.gpu_check.peaks import DevicePeak
from agentrl.cli.gpu_check.shapes import Shape, Sizes, qwen2_config
from agentrl.contract.schemas import CHECK_STATUSES

# A row's status (gpu-check.schema.json#/$defs/row): the words `agentrl doctor`'s checks use.
OK, WARNING, PROBLEM = CHECK_STATUSES


@dataclass
class Row:
    """One line of the table (gpu-check.schema.json#/$defs/row)."""

    id: str
    title: str
    status: str
    figure: float | None = None
    unit: str = ""
    bound: float | None = None
    bound_note: str = "n/a"
    ratio: float | None = None
    detail: str = ""

    def judge(self, floor: float) -> Row:
        """The ratio to the bound, and a warning below `floor` of it; without a bound the figure stands alone."""
        if self.figure is not None and self.bound:
            self.ratio = self.figure / self.bound
            if self.ratio < floor:
                self.status = WARNING
                self.detail += f"{'; ' if self.detail else ''}under {floor:.1%} of the bound"
        return self


@dataclass
class Context:
    device: torch.device
    peak: DevicePeak | None
    sizes: Sizes
    work: Path  # a temporary folder for the saved models and the runs
    tokenizer: Any
    rows: list[Row] = field(default_factory=list)

    @property
    def dtype(self) -> torch.dtype:
        """The trainer's own choice for the device (model.dtype auto): bf16 weights on CUDA, float32 on a CPU."""
        from agentrl.models.loading import resolve_dtype

        return resolve_dtype("auto", self.device)

    def no_bound(self) -> str:
        return "n/a (CPU)" if self.device.type == "cpu" else "unknown peak"


def random_model(shape: Shape, ctx: Context, seed: int = 0) -> Any:
    """A randomly initialised Qwen2 of `shape`, built on the device in the trainer's dtype (a 3B model built on the
    CPU in float32 first would take 12 GB and most of a minute)."""
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(seed)
    with torch.device(ctx.device):
        model = Qwen2ForCausalLM._from_config(
            qwen2_config(shape, ctx.tokenizer), dtype=ctx.dtype, attn_implementation="sdpa"
        )
    model.generation_config.pad_token_id = ctx.tokenizer.pad_token_id
    return model


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def release(device: torch.device) -> None:
    """Give back what the last check's models held, so the next one's peak memory is its own."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def guarded(ctx: Context, row_id: str, title: str, check: Callable[[], Row | list[Row]]) -> None:
    """Runs a check into the table; one that raises is a problem row with the error, and the others still run."""
    try:
        found = check()
    except Exception as err:  # noqa: BLE001 - a failing piece of the stack is what this command reports
        last = traceback.extract_tb(err.__traceback__)[-1]
        ctx.rows.append(
            Row(
                row_id,
                title,
                PROBLEM,
                detail=f"{type(err).__name__}: {err} ({Path(last.filename).name}:{last.lineno})",
            )
        )
    else:
        ctx.rows.extend(found if isinstance(found, list) else [found])
    finally:
        release(ctx.device)

"""What a run's memory plan (memory_plan.py) means for it: the check before it starts (train.memory_check: refuse
a run that cannot fit even at its shortest full episodes, warn about one that fits only there), the plans at its
longest and shortest episodes the editor's hover shows, and the single settings that, changed, make it fit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.contract.config import ConfigError, RunConfig, load_config_dict, set_dotted
from agentrl.learning.memory_plan import (
    MemoryCheck,
    MemoryPlan,
    MemoryPlanError,
    gib,
    learner_shards,
    plan_memory,
)
from agentrl.models.shape import ModelConfigInvalid


@dataclass(frozen=True)
class WayToFit:
    """A change that, made alone, brings the planned peak under the device's memory: the settings it changes (dotted
    keys as `--set` takes them; several where they go together) and the peak it plans."""

    settings: dict[str, Any]
    peak_bytes: int
    text: str  # as the user reads it: "train.micro_batch_size 4 -> 2 (peak 12.6 GiB)"


def ways_to_fit(config: RunConfig, base_dir: Path, plan: MemoryPlan, longest: bool = True) -> list[WayToFit]:
    """The settings that, changed alone, bring the planned peak under the device's memory, each with its new peak:
    the smallest change of each kind that does."""
    budget = plan.device.memory_bytes
    if budget is None:
        return []
    found: list[WayToFit] = []

    def try_change(settings: dict[str, Any], text: str) -> bool:
        """`settings` applied to the config: kept as a way to fit when the run then fits."""
        tree = config.model_dump(mode="json")
        for key, value in settings.items():
            set_dotted(tree, key, value)
        try:
            changed = load_config_dict(tree)
        except ConfigError:  # the change breaks another rule of the config (micro-batch over the batch, say)
            return False
        replanned = plan_memory(changed, base_dir, plan.device, longest)
        if not isinstance(replanned, MemoryPlan) or replanned.peak_bytes > budget:
            return False
        found.append(WayToFit(settings, replanned.peak_bytes, f"{text} (peak {gib(replanned.peak_bytes)})"))
        return True

    def halved_until_it_fits(key: str, floor: int, condition: str = "") -> None:
        """The setting halved, down to `floor`, until the run fits: the largest such value."""
        section, name = key.split(".")
        start = value = getattr(getattr(config, section), name)
        while value > floor:
            value //= 2
            if try_change({key: value}, f"{key} {start} -> {value}{condition}"):
                return

    halved_until_it_fits("train.micro_batch_size", 1)
    if not config.model.gradient_checkpointing:
        try_change({"model.gradient_checkpointing": True}, "model.gradient_checkpointing: true")
    if not config.model.lora.enabled:
        try_change({"model.lora.enabled": True}, "model.lora.enabled: true")
    if plan.device.kind == "cuda" and config.model.dtype == "float32":
        try_change({"model.dtype": "bfloat16"}, "model.dtype: bfloat16")
    # Shards on one machine share its memory: sharding helps where each learner worker has a device of its own.
    if plan.device.kind == "cuda" and learner_shards(config) == 1 and not config.model.lora.enabled:
        for workers in (2, 4, 8, 16, 32, 64):
            if workers > config.train.batch_size:  # every learner worker needs an episode of the step
                break
            sharded = {"cluster.backend": "ray", "cluster.learner_workers": workers, "cluster.sharding": "fsdp"}
            if try_change(sharded, f"cluster.sharding: fsdp with {workers} cluster.learner_workers, one a device"):
                break
    # The plan cannot tell how long the prompts are (the env builds them): a context they do not fit fails the run.
    halved_until_it_fits("rollout.max_context", 256, ", if every prompt fits in it")
    if plan.engine == "vllm" and plan.device.kind == "cuda":
        try_change({"rollout.engine": "hf"}, "rollout.engine: hf")
    return found


def describe(plan: MemoryPlan) -> str:
    """The plan's parts, largest first, in one line: 'weights 0.50 GiB (...), ...'."""
    parts = sorted(plan.parts, key=lambda p: -p.bytes)
    return "; ".join(f"{p.name} {gib(p.bytes)} ({p.detail})" for p in parts if p.bytes)


def _cannot_fit(config: RunConfig, base_dir: Path, shortest: MemoryPlan) -> str:
    """Why a run that does not fit even at its shortest full episodes is refused: each part, and what to change."""
    assert shortest.device.memory_bytes is not None
    ways = ways_to_fit(config, base_dir, shortest, longest=False)
    return (
        "the run's planned peak memory even for episodes without a prompt (every row at rollout.max_turns x "
        f"(max_new_tokens + tool_output_tokens)), {gib(shortest.peak_bytes)}, is more than {shortest.device.label}: "
        f"{describe(shortest)}. "
        + (
            "To fit, change one of: " + "; ".join(way.text for way in ways) + ". "
            if ways
            else "No single setting brings it under; a smaller model or a larger device does. "
        )
    )


def _may_run_out(config: RunConfig, base_dir: Path, longest: MemoryPlan, shortest: MemoryPlan) -> str:
    """The warning of a run that fits at its shortest full episodes only: short (a run that starts says it before
    its first step, `make demo` among them); the parts are in the editor's hover and docs/memory.md."""
    ways = ways_to_fit(config, base_dir, longest, longest=True)
    return (
        f"the run's planned peak memory is {gib(shortest.peak_bytes)} at its shortest full episodes but "
        f"{gib(longest.peak_bytes)} at its longest (every row at rollout.max_context, {longest.row_positions:,} "
        f"positions), more than {longest.device.label}. The run starts; it may run out of memory at its longest"
        + (". To be sure it fits, change one of: " + "; ".join(way.text for way in ways) if ways else "")
        + " (docs/memory.md says how the plan is made)."
    )


def plan_longest_and_shortest(config: RunConfig, base_dir: Path) -> tuple[MemoryPlan, MemoryPlan | None] | str:
    """The run's plan with its rows at their longest and, when that does not fit, at their shortest full length on
    the same device (what decides between refusing and warning); or why no plan can be made, an invalid config.json
    among the reasons (the editor's hover says what is wrong with it)."""
    try:
        return _longest_and_shortest(config, base_dir)
    except ModelConfigInvalid as err:
        return str(err)


def _longest_and_shortest(config: RunConfig, base_dir: Path) -> tuple[MemoryPlan, MemoryPlan | None] | str:
    longest = plan_memory(config, base_dir)
    if not isinstance(longest, MemoryPlan):
        return longest
    if longest.fits is not False:
        return longest, None
    shortest = plan_memory(config, base_dir, longest.device, longest=False)
    assert isinstance(shortest, MemoryPlan)
    return longest, shortest


def check_memory(config: RunConfig, base_dir: Path) -> str | None:
    """Before a run starts (train.memory_check). Raises MemoryPlanError when even its shortest full episodes cannot
    fit the device and the check refuses, ModelConfigInvalid when the model's config.json breaks a bound (the model
    would not load either); returns a warning when they can but its longest cannot (or when the check warns); None
    when it fits, when the check is off, or when the plan cannot be made (the model's shape unknown without loading
    it)."""
    setting: MemoryCheck = config.train.memory_check
    if setting == "off" or config.cluster.backend == "ray":
        return None  # Ray's learners run on the cluster's devices, which this machine cannot see
    planned = _longest_and_shortest(config, base_dir)
    if isinstance(planned, str) or planned[1] is None:
        return None
    longest, shortest = planned
    if shortest.fits is False:
        message = _cannot_fit(config, base_dir, shortest)
        if setting == "refuse":
            raise MemoryPlanError(
                message + "Or set train.memory_check: warn to start anyway (docs/memory.md says how the plan is made)."
            )
        return message
    return _may_run_out(config, base_dir, longest, shortest)

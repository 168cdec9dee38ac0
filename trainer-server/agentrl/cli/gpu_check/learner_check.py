"""The learner check: GRPO updates of every weight on synthetic episodes, their tokens/s against the device's peak
and their peak memory against the device's."""

from __future__ import annotations

from typing import Any

import torch

from agentrl.cli.gpu_check.context import OK, WARNING, Context, Row
from agentrl.cli.gpu_check.peaks import LEARNER_FLOOR, MEMORY_HEADROOM
from agentrl.cli.gpu_check.recipe import run_config
from agentrl.cli.gpu_check.shapes import Shape, parameter_count

# What the engine's logprob of a token is under a random model, about log(1 / 151,936): the synthetic episodes' rollout
# logprobs (the update's work does not depend on them).
RANDOM_MODEL_LOGPROB = -12.0


def synthetic_episodes(ctx: Context, shape: Shape) -> list[Any]:
    """A step's episodes of random tokens: a prompt and one sampled turn each, rewards 0 and 1 alternating within
    each group so that every episode trains."""
    from agentrl.rollout.episode import Episode, TurnRecord

    sizes = ctx.sizes
    generator = torch.Generator().manual_seed(0)
    length = sizes.learner_prompt + sizes.learner_response
    episodes = []
    for index in range(sizes.learner_episodes):
        ids = torch.randint(0, shape.vocabulary, (length,), generator=generator).tolist()
        group, sample = divmod(index, sizes.grpo_group_size)
        episode = Episode(f"synthetic-{group}", group, sample, prompt_messages=[], tool_schemas=[])
        episode.append_tokens(ids[: sizes.learner_prompt], "prompt", -1)
        episode.append_tokens(
            ids[sizes.learner_prompt :], "assistant", 0, [RANDOM_MODEL_LOGPROB] * sizes.learner_response
        )
        episode.turns = [TurnRecord(index=0, assistant="")]
        episode.turn_end_positions = [length - 1]
        episode.outcome_reward = float(index % 2)
        episodes.append(episode)
    return episodes


def check_learner(ctx: Context, shape: Shape, model: Any) -> list[Row]:
    """Two GRPO updates of every weight on synthetic episodes (the first loads the kernels); the second's tokens/s
    against the device's peak at 6 floating-point operations a parameter a token (forward and backward), and the
    peak memory of the update."""
    from agentrl.learning.cpu_memory import peak_resident_bytes
    from agentrl.learning.learner import Learner

    sizes = ctx.sizes
    recipe = run_config(ctx, "unused", lora=False)
    train_sizes = {"batch_size": sizes.learner_episodes, "micro_batch_size": sizes.learner_micro_batch[shape.name]}
    config = recipe.model_copy(update={"train": recipe.train.model_copy(update=train_sizes)})
    learner = Learner(model, ctx.tokenizer, config, ctx.device)
    learner.update(synthetic_episodes(ctx, shape))
    metrics = learner.update(synthetic_episodes(ctx, shape)).metrics
    tokens_per_s = metrics["perf/train_tokens_per_s"]
    shape_note = f"{sizes.learner_episodes} episodes x {sizes.learner_prompt + sizes.learner_response} tokens"
    speed = Row(
        f"learner/{shape.name}/tokens_per_s",
        f"learner update, {shape.name}",
        OK,
        figure=tokens_per_s,
        unit="tokens/s",
        detail=f"{shape_note}, micro-batches of {config.train.micro_batch_size}, {ctx.dtype} weights, "
        f"bf16 autocast {'on' if learner.bf16_autocast else 'off'}",
    )
    if ctx.peak:
        speed.bound = ctx.peak.bf16_tflops * 1e12 / (6 * parameter_count(model))
        speed.bound_note = f"{ctx.peak.name} bf16 peak at 6 x {parameter_count(model) / 1e9:.2f}B FLOPs a token"
    else:
        speed.bound_note = ctx.no_bound()
    speed.judge(LEARNER_FLOOR)
    if ctx.device.type == "cuda":
        total = torch.cuda.get_device_properties(ctx.device).total_memory
        memory = Row(
            f"learner/{shape.name}/peak_memory",
            f"learner peak memory, {shape.name}",
            OK,
            figure=metrics["perf/peak_memory_mb"] / 1024,
            unit="GiB",
            bound=total / 2**30,
            bound_note="the device's memory",
            detail=f"the update's peak allocation (weights, gradients, AdamW state, activations), {shape_note}",
        )
        memory.ratio = memory.figure / memory.bound  # type: ignore[operator]
        if memory.ratio > MEMORY_HEADROOM:
            memory.status = WARNING
            memory.detail += f"; over {MEMORY_HEADROOM:.0%} of the device: little room for longer episodes"
    else:
        memory = Row(
            f"learner/{shape.name}/peak_memory",
            f"process peak memory after the learner, {shape.name}",
            OK,
            figure=peak_resident_bytes() / 2**30,
            unit="GiB",
            detail="the process's peak resident memory so far (a CPU has no per-update peak)",
        )
    return [speed, memory]

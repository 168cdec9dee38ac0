"""The checks below the trainer: the devices torch sees, a bf16 matrix product against the device's peak, and the hf
engine's decode against the memory-bandwidth bound."""

from __future__ import annotations

import platform
import time
from typing import Any

import torch

from agentrl.cli.gpu_check.context import OK, Context, Row, synchronize
from agentrl.cli.gpu_check.peaks import HF_DECODE_FLOOR, MATMUL_FLOOR
from agentrl.cli.gpu_check.shapes import Shape, parameter_count


def check_devices(ctx: Context) -> Row:
    if ctx.device.type == "cpu":
        return Row(
            "devices",
            "Devices torch sees",
            OK,
            detail=f"no CUDA device: the CPU ({platform.processor() or platform.machine()}), torch {torch.__version__}",
        )
    names = [
        f"{torch.cuda.get_device_name(i)} ({torch.cuda.get_device_properties(i).total_memory / 2**30:.0f} GiB)"
        for i in range(torch.cuda.device_count())
    ]
    peak = (
        f"peak from the table: {ctx.peak.name}, {ctx.peak.bf16_tflops:g} bf16 TFLOPS, {ctx.peak.bandwidth_tb_s:g} TB/s"
        if ctx.peak
        else "unknown peak: this device is not in the table, so its figures have no bound"
    )
    return Row(
        "devices",
        "Devices torch sees",
        OK,
        figure=float(len(names)),
        unit="devices",
        detail=f"{', '.join(names)}; torch {torch.__version__}, CUDA {torch.version.cuda}; {peak}",
    )


def check_matmul(ctx: Context) -> Row:
    """The bf16 product of two n x n matrices, repeated: 2 n^3 floating-point operations each."""
    n = ctx.sizes.matmul_n
    a = torch.randn(n, n, device=ctx.device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=ctx.device, dtype=torch.bfloat16)
    for _ in range(3):  # the first products pick the kernels and warm the clocks
        a @ b
    synchronize(ctx.device)
    repeats = 20
    started = time.perf_counter()
    for _ in range(repeats):
        a @ b
    synchronize(ctx.device)
    tflops = 2 * n**3 * repeats / (time.perf_counter() - started) / 1e12
    row = Row(
        "matmul_bf16",
        f"bf16 matmul {n}x{n}",
        OK,
        figure=tflops,
        unit="TFLOPS",
        bound=ctx.peak.bf16_tflops if ctx.peak else None,
        bound_note=f"{ctx.peak.name} dense bf16 peak" if ctx.peak else ctx.no_bound(),
    )
    return row.judge(MATMUL_FLOOR)


def decode_bound(model: Any, shape: Shape, batch: int, context: float, bandwidth_tb_s: float) -> float:
    """Tokens/s if every decode step only read the weights once and the batch's KV cache at its mean length from
    memory at full bandwidth: what no engine can beat at this batch."""
    element = next(model.parameters()).element_size()
    weights = parameter_count(model) * element
    kv_per_token = 2 * shape.layers * shape.kv_heads * (shape.hidden // shape.heads) * element
    step_bytes = weights + batch * context * kv_per_token
    return batch * bandwidth_tb_s * 1e12 / step_bytes


def set_decode_bound(ctx: Context, row: Row, model: Any, shape: Shape, batch: int) -> None:
    """A decode row's bound: the memory-bandwidth bound at the rows' mean context, where the device's peak is known."""
    if ctx.peak:
        context = ctx.sizes.decode_prompt + ctx.sizes.decode_new_tokens / 2
        row.bound = decode_bound(model, shape, batch, context, ctx.peak.bandwidth_tb_s)
        row.bound_note = f"{ctx.peak.name} memory bandwidth {ctx.peak.bandwidth_tb_s:g} TB/s (weights + KV cache)"
    else:
        row.bound_note = ctx.no_bound()


def check_decode(ctx: Context, shape: Shape, model: Any, batch: int) -> Row:
    """The hf engine's sampler (the one a run with rollout.engine hf samples turns with), `batch` rows of random
    prompts, every row sampling its full length."""
    from agentrl.rollout.hf_engine import BatchSampler

    sizes = ctx.sizes
    sampler = BatchSampler(model, ctx.tokenizer, ctx.device)
    # A random model samples its end-of-sequence token by chance; the measurement wants every row to run its length.
    sampler.eos_id = None
    generator = torch.Generator().manual_seed(batch)
    prompts = torch.randint(0, shape.vocabulary, (batch, sizes.decode_prompt), generator=generator).tolist()
    sampled = [0]

    def count(row: int, ids: list[int], logprobs: list[float], end: str) -> None:
        sampled[0] += len(ids)

    def sample(new_tokens: int) -> float:
        generators = [torch.Generator(device=ctx.device).manual_seed(row) for row in range(batch)]
        synchronize(ctx.device)
        started = time.perf_counter()
        sampler.generate(prompts, [new_tokens] * batch, [[] for _ in prompts], generators, count, 1.0, 1.0)
        synchronize(ctx.device)
        return time.perf_counter() - started

    sample(2)  # the first call loads the kernels
    sampled[0] = 0
    elapsed = sample(sizes.decode_new_tokens)
    row = Row(
        f"decode_hf/{shape.name}/batch{batch}",
        f"hf engine decode, {shape.name}, batch {batch}",
        OK,
        figure=sampled[0] / elapsed,
        unit="tokens/s",
        detail=f"{sampled[0]} tokens after {sizes.decode_prompt}-token prompts, prefill included, {ctx.dtype}",
    )
    set_decode_bound(ctx, row, model, shape, batch)
    return row.judge(HF_DECODE_FLOOR)

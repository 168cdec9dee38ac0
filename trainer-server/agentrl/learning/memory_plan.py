"""The memory a run needs at its peak, per device, planned from its config before any weight is loaded: the model's
shape (its config.json, or a built-in's), dtype, LoRA, sharding, micro-batch and context, counted the way this
package's learner and rollout engines hold memory. `agentrl train` and the server refuse a run that cannot fit
(memory_advice.py's `check_memory`; train.memory_check), and the editor's hover on `model.*` shows the same plan
(`config/memoryPlan`).

What is counted, and why it is there (docs/memory.md has the formula and how close it came to measured peaks):
- weights, in model.dtype; a full copy more for a KL reference without LoRA (`Learner._make_reference`);
- gradients and AdamW's two moments, each in the dtype of the weights they belong to (torch's AdamW keeps its
  moments in the parameter's dtype, and the learner keeps no float32 master copy: a bfloat16 model trains in
  bfloat16); LoRA adapters are float32 (peft upcasts them), and only they train;
- activations saved for the backward of one micro-batch of rows of rollout.max_context positions (or only each
  layer's input under model.gradient_checkpointing, plus one layer rebuilt in the backward); under bf16 autocast
  the bfloat16 copies of the weights autocast keeps for the whole pass (`Learner._precision`);
- the output head's logits, in the chunks `logprobs.target_logprobs` makes, and those it keeps for the backward;
- the rollout: the hf engine's KV cache (the policy itself samples, between updates), or vLLM's own weights and
  KV cache (on CUDA, the share of the GPU vLLM takes: its gpu_memory_utilization, which agentrl leaves at vLLM's
  default);
- the process itself (Python, torch, CUDA's context).
Sharding (cluster.sharding: fsdp) divides weights, gradients and optimizer state by cluster.learner_workers, adds
the weights a pass gathers whole, and on CUDA keeps float32 master copies of the weights that train.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from agentrl.contract.config import ConfigError, RunConfig
from agentrl.learning.forward import CPU_MATH_ATTENTION_WIDTH
from agentrl.learning.logprobs import GRADIENT_BLOCK_BYTES, KEPT_LOGITS_BYTES, LOGIT_CHUNK_BYTES
from agentrl.models.loading import resolve_dtype
from agentrl.models.precision import bfloat16_is_native, uses_bf16_autocast
from agentrl.models.shape import ModelShape, model_shape
from agentrl.rollout.engine_choice import samples_with_vllm, vllm_refusal

GIB = 1 << 30
# A trainer process before its model: Python, torch, transformers and agentrl imported, measured at 0.25-0.4 GB of
# resident memory on x86-64 Linux (2026-11-26); on CUDA, the context and cuBLAS's workspaces as well.
CPU_RUNTIME_BYTES = 512 << 20
CUDA_RUNTIME_BYTES = 1 << 30
# The vLLM engine's own processes on CPU, besides its weights and KV cache: the benchmark's vLLM rollout peaked at
# 4.3 GB (docs/performance.md), about 2 GB more than its weights, KV cache and the trainer's own process.
VLLM_CPU_RUNTIME_BYTES = 2 << 30
# What an update holds beyond the tensors it saves, as a share of them: the backward's gradients with respect to the
# activations and logits, and the allocator's slack (on CPU the learner's glibc heap is never trimmed:
# cpu_memory.py). Fitted to the peaks test_memory_plan.py measures (0.37-0.67 on five Llama shapes, 2026-11-26).
UPDATE_WORKING_SET = 0.5
# The share of a GPU vLLM takes for its weights, activations and KV cache when not told otherwise (its
# gpu_memory_utilization default; agentrl sets kv_cache_memory_bytes on CPU only).
VLLM_GPU_MEMORY_UTILIZATION = 0.9
# peft's default adapted modules when lora.target_modules is null, for the architectures the plan is asked about
# most (peft's own table has more: it is read when peft is installed).
DEFAULT_LORA_TARGETS = ("q_proj", "v_proj")

MemoryCheck = Literal["refuse", "warn", "off"]


class MemoryPlanError(ConfigError):
    """A run whose planned peak memory is more than its device has; the message names the parts and what to change."""


def learner_shards(config: RunConfig) -> int:
    """How many learner processes share the weights, gradients and optimizer state: cluster.learner_workers under
    cluster.sharding fsdp, else 1 (data-parallel learners each hold everything)."""
    if getattr(config.cluster, "sharding", "none") == "fsdp":
        return config.cluster.learner_workers
    return 1


def _lora_targets(config: RunConfig, shape: ModelShape) -> list[str]:
    targets = config.model.lora.target_modules
    if targets is None:
        try:
            from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as defaults
        except ImportError:
            return list(DEFAULT_LORA_TARGETS)
        return list(defaults.get(shape.model_type, DEFAULT_LORA_TARGETS))
    return [name for name in shape.module_shapes() if any(name == t or name.endswith(t) for t in targets)]


def trainable_parameters(config: RunConfig, shape: ModelShape) -> int:
    if not config.model.lora.enabled:
        return shape.parameters()
    modules = shape.module_shapes()
    r = config.model.lora.r
    return shape.layers * sum(r * (modules[name][0] + modules[name][1]) for name in _lora_targets(config, shape))


@dataclass(frozen=True)
class MemoryPart:
    # weights, reference, gradients, optimizer, gathered_weights, activations, autocast_copies, logits, working_set,
    # rollout, runtime
    name: str
    bytes: int
    detail: str  # how it was counted, in words
    phase: Literal["always", "update", "rollout"]  # held for the whole run, during the update, or during rollouts


@dataclass(frozen=True)
class Device:
    kind: Literal["cpu", "cuda"]
    label: str  # what the refusal and the hover call it
    memory_bytes: int | None  # what a run may use there; None where it cannot be told


@dataclass(frozen=True)
class MemoryPlan:
    shape: ModelShape
    shape_source: str
    parameters: int
    trainable: int
    device: Device
    engine: str  # "vllm" or "hf": what samples the rollouts (`rollout_engine`)
    parts: tuple[MemoryPart, ...]
    row_positions: int  # the positions each row of the update holds in this plan

    @property
    def peak_bytes(self) -> int:
        """What is always held, plus the larger of the update's and the rollout's own memory (they take turns)."""
        by_phase = {"always": 0, "update": 0, "rollout": 0}
        for part in self.parts:
            by_phase[part.phase] += part.bytes
        return by_phase["always"] + max(by_phase["update"], by_phase["rollout"])

    def part(self, name: str) -> int:
        return sum(p.bytes for p in self.parts if p.name == name)

    @property
    def fits(self) -> bool | None:
        return None if self.device.memory_bytes is None else self.peak_bytes <= self.device.memory_bytes

    def to_wire(self) -> dict[str, Any]:
        """The `config/memoryPlan` result's `plan` (protocol/schemas/rpc.schema.json)."""
        wire: dict[str, Any] = {
            "peakBytes": self.peak_bytes,
            "rowPositions": self.row_positions,
            "parameters": self.parameters,
            "trainableParameters": self.trainable,
            "shapeSource": self.shape_source,
            "device": {"kind": self.device.kind, "label": self.device.label},
            "parts": [{"name": p.name, "bytes": p.bytes, "detail": p.detail, "phase": p.phase} for p in self.parts],
        }
        if self.device.memory_bytes is not None:
            wire["device"]["memoryBytes"] = self.device.memory_bytes
            wire["fits"] = self.fits
        return wire


def gib(size: float) -> str:
    return f"{size / GIB:.2f} GiB" if size < 10 * GIB else f"{size / GIB:.1f} GiB"


def _available_system_memory() -> int | None:
    """MemAvailable (what the kernel can give without swapping: free memory plus caches it can drop), else the
    machine's physical memory."""
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def planned_device(config: RunConfig) -> Device:
    """The device the run's learner will use on this machine, and how much memory it has (the first GPU's total;
    on CPU, the system memory available now)."""
    wants_cuda = config.model.device == "cuda" or (config.model.device == "auto" and torch.cuda.is_available())
    if wants_cuda:
        if not torch.cuda.is_available():
            return Device("cuda", "a CUDA GPU (torch sees none here)", None)
        props = torch.cuda.get_device_properties(0)
        return Device("cuda", f"GPU 0 ({props.name}, {gib(props.total_memory)})", int(props.total_memory))
    available = _available_system_memory()
    label = "this machine's available memory" + (f" ({gib(available)})" if available else "")
    return Device("cpu", label, available)


def _activation_bytes_per_token_layer(shape: ModelShape, weight_bytes: int, autocast: bool) -> int:
    """What one decoder layer saves for its backward per position (measured with autograd's saved-tensor hooks on
    Llama layers, transformers 5.19, to within a few percent; docs/memory.md). float32: the two RMSNorms' inputs and
    outputs, q, k and v after RoPE (k and v repeated to every head), attention's output and o_proj's input (10
    hidden-sized vectors), and the MLP's gate, up, SiLU and product (4 intermediate-sized). bfloat16 weights: the
    same in 2 bytes but the norms, which compute in float32. float32 weights under bf16 autocast: the residual
    stream and norms stay float32, the projections' inputs are saved as bfloat16 copies, RoPE's products come out
    float32."""
    h, i = shape.hidden, shape.intermediate
    if autocast and weight_bytes == 4:
        return 38 * h + 8 * i
    if weight_bytes == 2:
        return 24 * h + 8 * i
    return 40 * h + 16 * i


def _attention_matrix_bytes_per_token_layer(config: RunConfig, shape: ModelShape, device: Device, width: int) -> int:
    """The [heads, positions, positions] softmax the math kernel (CPU up to CPU_MATH_ATTENTION_WIDTH positions, or
    attn_implementation eager anywhere) keeps for its backward: heads x width float32 entries per position."""
    math_kernel = config.model.attn_implementation == "eager" or (
        device.kind == "cpu" and width <= CPU_MATH_ATTENTION_WIDTH
    )
    return shape.heads * width * 4 if math_kernel else 0


def _logits_bytes(shape: ModelShape, read_positions: int, dtype_bytes: int, head_trains: bool) -> tuple[int, str]:
    """The output head's logits at the micro-batch's read positions, as `target_logprobs` makes them: chunks of
    LOGIT_CHUNK_BYTES of float32 logits (the raw chunk in the projection's dtype, its float32 copy and, for the
    entropy, a softmax of it), the raw chunks kept for the backward up to KEPT_LOGITS_BYTES, and in the backward a
    block of gradient rows (GRADIENT_BLOCK_BYTES) beside one chunk's float32 log-probabilities and their product,
    and the head's float32 weight gradient when it trains."""
    vocab = shape.vocab
    chunk_rows = min(read_positions, max(1, LOGIT_CHUNK_BYTES // (vocab * 4)))
    block_rows = min(
        read_positions, max(chunk_rows, GRADIENT_BLOCK_BYTES // (vocab * dtype_bytes) // chunk_rows * chunk_rows)
    )
    all_logits = read_positions * vocab * dtype_bytes
    kept = all_logits if all_logits <= KEPT_LOGITS_BYTES else 0
    forward = chunk_rows * vocab * (dtype_bytes + 8)
    backward = block_rows * vocab * dtype_bytes + chunk_rows * vocab * 8
    if head_trains:
        backward += vocab * shape.hidden * 4
    detail = f"{read_positions:,} read positions x {vocab:,} entries: chunks of {chunk_rows} rows, " + (
        "all kept for the backward" if kept else "projected again in the backward"
    )
    return kept + max(forward, backward), detail


def rollout_engine(config: RunConfig, shape: ModelShape, device: Device) -> str:
    """The engine that will sample the run's rollouts, "vllm" or "hf", by the factory's rule (rollout/engine_choice.py)
    from what is known before the model loads; `auto` with a model vLLM turns out not to know is planned on vLLM,
    the engine that needs more."""
    refusal = vllm_refusal(shape.head_dim, device.kind)
    return "vllm" if samples_with_vllm(config.rollout.engine, refusal) else "hf"


def _rollout_parts(
    config: RunConfig, shape: ModelShape, device: Device, engine: str, weight_bytes: int, parameters: int
) -> list[MemoryPart]:
    kv_per_token = 2 * shape.layers * shape.kv_heads * shape.head_dim
    sequences = config.train.batch_size * (2 if config.train.async_steps else 1)
    if engine == "vllm":
        if device.kind == "cuda":
            if device.memory_bytes is None:
                return []
            share = int(device.memory_bytes * VLLM_GPU_MEMORY_UTILIZATION)
            return [
                MemoryPart(
                    "rollout",
                    share,
                    f"vLLM's share of the GPU (gpu_memory_utilization {VLLM_GPU_MEMORY_UTILIZATION}): its weights, "
                    "activations and KV cache",
                    "always",
                )
            ]
        vllm_weight_bytes = {"bfloat16": 2, "float16": 2, "float32": 4, "policy": weight_bytes}.get(
            config.rollout.vllm_dtype
        ) or (2 if bfloat16_is_native(torch.device("cpu")) else weight_bytes)
        # The engine's KV cache as vllm_engine sizes it: every sequence at rollout.max_context, plus a quarter.
        tokens = config.train.batch_size * config.rollout.max_context
        kv = max(64 << 20, int(kv_per_token * vllm_weight_bytes * tokens * 1.25))
        # Its weights, and the shared-memory file the weights are pushed through after each update.
        weights = 2 * parameters * vllm_weight_bytes
        return [
            MemoryPart(
                "rollout",
                kv + weights + VLLM_CPU_RUNTIME_BYTES,
                f"vLLM's processes: KV cache {gib(kv)} ({tokens:,} tokens), its weights and their transfer file "
                f"{gib(weights)}, its runtime {gib(VLLM_CPU_RUNTIME_BYTES)}",
                "always",
            )
        ]
    kv = sequences * config.rollout.max_context * kv_per_token * weight_bytes
    return [
        MemoryPart(
            "rollout",
            kv,
            f"the hf engine's KV cache: {sequences} episodes x {config.rollout.max_context:,} positions",
            "rollout",
        )
    ]


def episode_positions(config: RunConfig, longest: bool) -> int:
    """The positions a row of the update holds: at its longest, rollout.max_context; at its shortest full length,
    what its turns may add without any prompt (rollout.max_turns x (max_new_tokens + tool_output_tokens)), which
    every episode that uses its turns holds at least."""
    turns = config.rollout.max_turns * (config.rollout.max_new_tokens + config.rollout.tool_output_tokens)
    return config.rollout.max_context if longest else min(config.rollout.max_context, turns)


def plan_memory(
    config: RunConfig,
    base_dir: Path,
    device: Device | None = None,
    longest: bool = True,
) -> MemoryPlan | str:
    """The run's planned peak memory on `device` (by default this machine's, `planned_device`), with the weights,
    gradients and optimizer state split over `learner_shards`, its rows at their longest or
    at their shortest full length (`episode_positions`); or, when the model's shape cannot be read without loading
    it, why not (ModelConfigInvalid when its config.json breaks a bound)."""
    shape, source = model_shape(config, base_dir)
    if shape is None:
        return source
    device = device or planned_device(config)
    torch_device = torch.device(device.kind)
    weight_bytes = resolve_dtype(config.model.dtype, torch_device).itemsize
    autocast = uses_bf16_autocast(config.train.bf16_autocast, torch_device)
    parameters = shape.parameters()
    trainable = trainable_parameters(config, shape)
    shards = learner_shards(config)
    lora = config.model.lora.enabled
    fsdp = config.cluster.sharding == "fsdp"
    # peft keeps adapters in float32; the sharded learner keeps float32 master copies of what trains on CUDA
    masters = not lora and fsdp and device.kind == "cuda"
    trained_bytes = 4 if lora or masters else weight_bytes
    stored_bytes = 4 if masters else weight_bytes
    sharded = f" / {shards} shards" if shards > 1 else ""
    parts = [
        MemoryPart(
            "weights",
            parameters * stored_bytes // shards + (trainable * 4 if lora else 0),
            f"{parameters / 1e6:,.1f}M parameters x {stored_bytes} bytes{sharded}"
            + (" (float32 master weights)" if masters else "")
            + (f", and {trainable / 1e6:,.2f}M float32 LoRA parameters" if lora else ""),
            "always",
        ),
        MemoryPart(
            "gradients",
            trainable * trained_bytes // shards,
            f"{trainable / 1e6:,.2f}M x {trained_bytes} bytes{sharded}",
            "always",
        ),
        MemoryPart(
            "optimizer",
            2 * trainable * trained_bytes // shards,
            f"AdamW's two moments, {trained_bytes} bytes each{sharded}",
            "always",
        ),
    ]
    if config.algorithm.kl.coef > 0 and not lora:
        parts.append(
            MemoryPart(
                "reference",
                parameters * weight_bytes // shards,
                f"a frozen copy of the weights for the KL term{sharded}",
                "always",
            )
        )
    if fsdp:
        embedding = shape.vocab * shape.hidden * (1 if shape.tied else 2)
        layer = (parameters - embedding) // shape.layers
        parts.append(
            MemoryPart(
                "gathered_weights",
                (embedding + 2 * layer) * weight_bytes,
                "the weights FSDP gathers whole during a pass: the embeddings and output head, and two layers "
                "(the one running and the next, prefetched)",
                "update",
            )
        )
    rows = min(config.train.micro_batch_size, math.ceil(config.train.batch_size / config.cluster.learner_workers))
    width = episode_positions(config, longest)
    read = min(width - 1, config.rollout.max_turns * config.rollout.max_new_tokens)
    positions = rows * width
    per_layer = _activation_bytes_per_token_layer(shape, weight_bytes, autocast)
    per_layer += _attention_matrix_bytes_per_token_layer(config, shape, device, width)
    residual_bytes = 4 if weight_bytes == 4 else 2
    # Besides the layers: the embeddings' output and the final norm's input and output, float32 under autocast.
    outside_layers = positions * shape.hidden * 3 * residual_bytes
    if config.model.gradient_checkpointing:
        # Each layer's input, and in the backward one layer's activations rebuilt, with their gradients.
        activations = positions * (shape.layers * shape.hidden * residual_bytes + 2 * per_layer) + outside_layers
        how = "gradient checkpointing: each layer's input, one layer rebuilt"
    else:
        # Every layer's, and in the backward one layer's gradients beside them.
        activations = positions * (shape.layers + 1) * per_layer + outside_layers
        how = f"{shape.layers} layers' saved tensors"
    parts.append(
        MemoryPart(
            "activations",
            activations,
            f"{rows} rows x {width:,} positions (train.micro_batch_size, "
            + ("rollout.max_context" if longest else "rollout.max_turns x (max_new_tokens + tool_output_tokens)")
            + f"), {how}",
            "update",
        )
    )
    if autocast and weight_bytes == 4:
        parts.append(
            MemoryPart(
                "autocast_copies",
                shape.layers * shape.layer_linear_parameters() * 2,
                "bfloat16 copies of the layers' weights, kept for the pass by autocast",
                "update",
            )
        )
    projection_bytes = 2 if autocast or weight_bytes == 2 else 4
    logits, detail = _logits_bytes(shape, rows * read, projection_bytes, head_trains=not lora)
    if projection_bytes != weight_bytes:
        logits += shape.vocab * shape.hidden * projection_bytes  # the head cast to the projection's dtype
    parts.append(MemoryPart("logits", logits, detail, "update"))
    update_bytes = sum(part.bytes for part in parts if part.phase == "update")
    parts.append(
        MemoryPart(
            "working_set",
            int(update_bytes * UPDATE_WORKING_SET),
            "the backward's gradients of activations and logits, and the allocator's slack",
            "update",
        )
    )
    engine = rollout_engine(config, shape, device)
    parts += _rollout_parts(config, shape, device, engine, weight_bytes, parameters)
    runtime = CUDA_RUNTIME_BYTES if device.kind == "cuda" else CPU_RUNTIME_BYTES
    parts.append(
        MemoryPart(
            "runtime",
            runtime,
            "the trainer process: Python, torch" + (", CUDA's context" if device.kind == "cuda" else ""),
            "always",
        )
    )
    return MemoryPlan(shape, source, parameters, trainable, device, engine, tuple(parts), width)

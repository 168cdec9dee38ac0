"""The GRPO-run check: three steps of the arithmetic recipe through the trainer, and what the run left checked: its
steps, its rollout-vs-learner logprob gap, its loss mask, and its checkpoint loaded back."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from agentrl.cli.gpu_check.context import OK, PROBLEM, Context, Row, release
from agentrl.cli.gpu_check.recipe import run_config


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

"""`agentrl export RUN_DIR [--step N] --out DIR [--merge-lora]`: a run's trained policy as a folder transformers
(and vLLM) load directly: safetensors weights, tokenizer, generation config and a short model card. Under LoRA the
adapter alone (peft loads it over the base model), or with --merge-lora the adapter merged into a full model."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help="a run folder (RUNS_DIR/RUN_ID)")
    parser.add_argument("--step", type=int, help="the checkpoint's step (default: the latest)")
    parser.add_argument("--out", required=True, help="the folder to write (must not exist, or be empty)")
    parser.add_argument("--merge-lora", action="store_true", help="merge a LoRA adapter into a full model")


def _held_out_scores(run_dir: Path, step: int) -> dict[str, float]:
    """The last held-out (`eval/`) metrics the run reported at or before `step`, if it evaluated any."""
    from agentrl.run.runstore import read_events

    scores: dict[str, float] = {}
    for event in read_events(run_dir):
        if event["type"] == "metrics" and event["data"]["step"] <= step:
            found = {k: v for k, v in event["data"]["metrics"].items() if k.startswith("eval/")}
            scores = found or scores
    return scores


def _algorithm_title(name: str) -> str:
    """GRPO for a built-in algorithm; a user's own (MODULE:NAME) by its NAME, not the path to its file."""
    return f"`{name.rpartition(':')[2]}`" if ":" in name else name.upper()


def _model_card(config: Any, run_dir: Path, step: int, kind: str) -> str:
    scores = _held_out_scores(run_dir, step)
    lines = [
        f"# {config.name}, step {step}",
        "",
        f"Trained with Agent RL Studio (agentrl): {_algorithm_title(config.algorithm.name)} on "
        + (
            f"the environment {config.env.describe()}."
            if config.env is not None
            else f"the agent `{config.agent.function}` ({config.agent.module}) through the OpenAI-compatible endpoint."
        ),
        "",
        f"- Base model: `{config.model.path}`",
        f"- Weights: {kind}",
        f"- Run: `{run_dir.name}`, checkpoint at step {step} of {config.train.steps}",
        f"- Held-out score: {', '.join(f'{k} {v:.4f}' for k, v in scores.items()) if scores else 'not measured'}",
    ]
    return "\n".join(lines) + "\n"


def export(run_dir: Path, out: Path, *, step: int | None = None, merge_lora: bool = False) -> dict[str, Any]:
    from agentrl.contract.config import load_config
    from agentrl.models.loading import load_policy
    from agentrl.models.saving import is_adapter, load_policy_weights, save_policy
    from agentrl.run.runstore import CONFIG_FILE, checkpoints_by_step

    checkpoints = checkpoints_by_step(run_dir)
    if not checkpoints:
        raise FileNotFoundError(f"{run_dir} has no checkpoint to export")
    step = max(checkpoints) if step is None else step
    if step not in checkpoints:
        raise FileNotFoundError(f"{run_dir} has no checkpoint at step {step}; it has {sorted(checkpoints)}")
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty")
    config = load_config(run_dir / CONFIG_FILE, inside=run_dir)
    if merge_lora and not config.model.lora.enabled:
        raise ValueError("--merge-lora: this run trained every weight, so there is no LoRA adapter to merge")
    config.model.device = "cpu"  # an export needs no accelerator
    model, tokenizer, _ = load_policy(config.model, config.seed)
    try:
        load_policy_weights(model, checkpoints[step])
    except Exception as err:  # noqa: BLE001 - whatever a torn or overwritten weights file makes the loader raise
        raise ValueError(
            f"the checkpoint at step {step} cannot be loaded, it is damaged ({type(err).__name__}: {err}); "
            f"export another step (it has {sorted(checkpoints)})"
        ) from None
    if merge_lora:
        model = model.merge_and_unload()
    kind = "LoRA adapter (load it over the base model with peft)" if is_adapter(model) else "full model"
    out.mkdir(parents=True, exist_ok=True)
    save_policy(model.eval(), tokenizer, out)
    (out / "README.md").write_text(_model_card(config, run_dir, step, kind), encoding="utf-8")
    return {"out": str(out), "step": step, "weights": "adapter" if is_adapter(model) else "full"}


def run(args: argparse.Namespace) -> int:
    from agentrl.contract.config import ConfigError

    try:
        result = export(Path(args.run_dir), Path(args.out), step=args.step, merge_lora=args.merge_lora)
    except (FileNotFoundError, FileExistsError, ValueError, ConfigError) as err:
        print(f"agentrl export: {err}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0

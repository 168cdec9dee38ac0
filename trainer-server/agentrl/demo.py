"""`agentrl demo` (what `make demo` runs): train the packaged SmolLM2-135M-Instruct on the GSM8K
calculator recipe for a few minutes on CPU, evaluate it before and after on a held-out slice, and
print the comparison."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

RECIPE = Path(__file__).parent / "recipes" / "gsm8k" / "gsm8k_grpo.agentrl.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=int, default=6, help="GRPO steps (default 6, about 5 minutes on 2 cores)")
    parser.add_argument("--eval-limit", type=int, default=16, help="held-out records scored before and after")
    parser.add_argument("--runs-dir", default="runs")


def run(args: argparse.Namespace) -> int:
    from agentrl.config import load_config
    from agentrl.eval import evaluate
    from agentrl.runstore import RunStore
    from agentrl.trainer import resolve_paths, train

    config = resolve_paths(load_config(RECIPE, [f"train.steps={args.steps}"]), RECIPE.parent)
    assert config.data.eval is not None
    print(f"demo: {config.name} on {config.model.path}; held-out slice: first {args.eval_limit} records of "
          f"{config.data.eval}", file=sys.stderr)
    before, before_dir = evaluate(config, config.data.eval, limit=args.eval_limit, checkpoint=None, baseline=None,
                                  batch_size=8, runs_dir=args.runs_dir)
    run_dir = train(config, runs_dir=args.runs_dir, config_base_dir=RECIPE.parent, progress=True)
    checkpoint = RunStore(run_dir).latest_checkpoint()
    after, after_dir = evaluate(config, config.data.eval, limit=args.eval_limit, checkpoint=str(checkpoint),
                                baseline=None, batch_size=8, runs_dir=args.runs_dir)
    print("\n  metric      before   after")
    for key in before:
        if key != "n":
            print(f"  {key:<10} {before[key]:>7.3f} {after[key]:>7.3f}")
    print(f"\n  training run: {run_dir}\n  eval runs:    {before_dir}\n                {after_dir}")
    print(f"  Replay: {run_dir / 'trajectories'} holds one *.trajectories.jsonl per step, the files the replay"
          "\n  panel shows (schema: protocol/schemas/trajectory.schema.json).")
    print(json.dumps({"before": before, "after": after}))
    return 0

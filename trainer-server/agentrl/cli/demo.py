"""`agentrl demo` (what `make demo` runs): the packaged SmolLM2-135M-Instruct learns tool use on CPU.

The arithmetic recipe (recipes/arithmetic): word problems whose numbers are too large to work out in the
head, a calculator Tool, reward = a correct `Answer:`. The agent is evaluated greedily on held-out
problems it never trains on, trained with GRPO, and evaluated again on the same problems. It ends with
the learning curve as a PNG next to the run and one JSON line:

    {"recipe", "config", "run", "checkpoint", "n", "metric", "before", "after", "delta", "ci95", "train_wall_s"}

`config` and `checkpoint` are what `agentrl eval CONFIG --checkpoint CHECKPOINT --data FILE` takes, so
the trained agent can be scored on any other held-out file. `ci95` is the paired bootstrap interval of
the change in the recipe's main metric, `metric`: --metric, else accuracy, else a Gym-style or OpenEnv env's
first score key (CoinCollector's tasksuccess).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

RECIPE = Path(__file__).parents[1] / "recipes" / "arithmetic" / "arithmetic_grpo.agentrl.yaml"
MAIN_METRIC = "accuracy"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=str(RECIPE), help="the recipe to train (default: the arithmetic recipe)")
    parser.add_argument("--steps", type=int, help="GRPO steps (default: the recipe's train.steps)")
    parser.add_argument("--eval-limit", type=int, default=200, help="held-out records scored before and after")
    parser.add_argument(
        "--metric",
        help=f"the recipe's main metric (default: {MAIN_METRIC} where the env reports it, else the env's first score "
        "key: env.gym's or env.openenv's score_keys)",
    )
    parser.add_argument("--runs-dir", default="runs")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")


def plot_learning_curve(run_dir: Path, before: float, after: float, metric: str, path: Path) -> None:
    """Training reward per step, and the held-out score at the start and the end."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from agentrl.run.runstore import read_events

    steps = {e["data"]["step"]: e["data"]["metrics"] for e in read_events(run_dir) if e["type"] == "metrics"}
    xs = sorted(steps)
    figure, axes = plt.subplots(figsize=(7, 4), dpi=110)
    axes.plot(xs, [steps[s]["reward/mean"] for s in xs], marker=".", label="training reward (sampled)")
    axes.plot(
        [0, xs[-1] if xs else 1], [before, after], marker="o", linestyle="--", label=f"held-out {metric} (greedy)"
    )
    axes.set_xlabel("step")
    axes.set_ylabel("reward / score")
    axes.set_ylim(0, 1)
    axes.set_title(f"held-out {metric} {before:.3f} -> {after:.3f}", fontsize=11)
    figure.suptitle(run_dir.name, fontsize=8, color="gray")
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def main_metric(asked: str | None, evaluated: dict[str, float], config: Any) -> str | None:
    """--metric; else accuracy where the env reports it, else the first of the env's score keys it reports
    (TextWorldExpress's tasksuccess: a Gym-style env has no accuracy). None where the evaluation has none of them."""
    from agentrl.run.eval import METRIC_KEYS, metric_keys

    candidates = (
        [asked] if asked else [key for key in metric_keys(config) if key == MAIN_METRIC or key not in METRIC_KEYS]
    )
    return next((key for key in candidates if key in evaluated), None)


def run(args: argparse.Namespace) -> int:
    from agentrl.contract.config import ConfigError, load_config, resolve_paths
    from agentrl.run.eval import evaluate
    from agentrl.run.runstore import RunStore
    from agentrl.run.stats import paired_bootstrap_ci
    from agentrl.run.trainer import train

    config_path = Path(args.config).resolve()
    overrides = [*args.overrides, *([f"train.steps={args.steps}"] if args.steps else [])]
    try:
        config = resolve_paths(load_config(config_path, overrides), config_path.parent)
    except ConfigError as err:
        print(f"agentrl demo: {err}", file=sys.stderr)
        return 2
    if config.data.eval is None:
        print(f"agentrl demo: {config_path} has no data.eval: the demo needs held-out tasks", file=sys.stderr)
        return 2

    def held_out(checkpoint: Path | None) -> Any:
        return evaluate(
            config,
            config.data.eval,
            limit=args.eval_limit,
            checkpoint=str(checkpoint) if checkpoint else None,
            baseline=None,
            batch_size=50,
            runs_dir=args.runs_dir,
        )

    print(
        f"demo: {config.name} on {config.model.path}; held-out: first {args.eval_limit} records of {config.data.eval}",
        file=sys.stderr,
    )
    before = held_out(None)
    metric = main_metric(args.metric, before.metrics, config)
    if metric is None:  # before training: nothing would score it
        reported = ", ".join(key for key in before.metrics if key != "n")
        print(
            f"agentrl demo: the held-out evaluation reports no {args.metric or MAIN_METRIC} (it reports {reported}): "
            "give the one to compare before and after with --metric",
            file=sys.stderr,
        )
        return 2
    started = time.perf_counter()
    run_dir = train(config, runs_dir=args.runs_dir, config_base_dir=config_path.parent, progress=True)
    train_wall_s = time.perf_counter() - started
    checkpoint = RunStore(run_dir).latest_checkpoint()
    assert checkpoint is not None  # a completed run always ends with a checkpoint
    after = held_out(checkpoint)

    scores_before = [task.get(metric, 0.0) for task in before.per_task]
    scores_after = [task.get(metric, 0.0) for task in after.per_task]
    ci95 = paired_bootstrap_ci(scores_before, scores_after)
    curve = run_dir / "learning_curve.png"
    plot_learning_curve(run_dir, before.metrics.get(metric, 0.0), after.metrics.get(metric, 0.0), metric, curve)

    print("\n  metric        before   after", file=sys.stderr)
    for key in before.metrics:
        if key != "n":
            print(f"  {key:<12} {before.metrics[key]:>7.3f} {after.metrics[key]:>7.3f}", file=sys.stderr)
    print(
        f"\n  {metric}: {before.metrics.get(metric, 0.0):.3f} -> {after.metrics.get(metric, 0.0):.3f}, "
        f"change 95% CI [{ci95[0]:+.3f}, {ci95[1]:+.3f}] over {len(scores_after)} held-out tasks",
        file=sys.stderr,
    )
    print(
        f"  training run:   {run_dir} ({train_wall_s:.0f} s)\n  learning curve: {curve}\n"
        f"  eval runs:      {before.run_dir}\n                  {after.run_dir}\n"
        f"  Replay: every *.trajectories.jsonl under these folders opens in the replay panel.",
        file=sys.stderr,
    )
    rounded = {
        "before": {k: round(v, 4) for k, v in before.metrics.items() if k != "n"},
        "after": {k: round(v, 4) for k, v in after.metrics.items() if k != "n"},
    }
    print(
        json.dumps(
            {
                "recipe": config.name,
                "config": str(config_path),
                "run": str(run_dir),
                "checkpoint": str(checkpoint),
                "n": len(scores_after),
                "metric": metric,
                **rounded,
                "delta": round(after.metrics.get(metric, 0.0) - before.metrics.get(metric, 0.0), 4),
                "ci95": [round(ci95[0], 4), round(ci95[1], 4)],
                "train_wall_s": round(train_wall_s, 1),
                "learning_curve": str(curve),
            }
        )
    )
    return 0

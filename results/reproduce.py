"""Reproduces the README's results table: the recipes on the packaged SmolLM2-135M-Instruct, on CPU.

    .venv/bin/python results/reproduce.py            # about 100 minutes on 2 cores

Writes results/results.json (every figure in the table), results/learning_curves.png, and leaves the
runs (trajectories included) in results/runs/.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from agentrl.contract.config import load_config, resolve_paths
from agentrl.run.eval import evaluate
from agentrl.run.runstore import RunStore, read_events
from agentrl.run.stats import bootstrap_ci, paired_bootstrap_ci
from agentrl.run.trainer import train

HERE = Path(__file__).resolve().parent
RECIPES = HERE.parent / "trainer-server" / "agentrl" / "recipes"
RUNS = HERE / "runs"
EVAL_BATCH = 50  # episodes generated together: greedy results do not depend on it, speed does


def config_of(path: Path, *overrides: str):
    # Every figure in results.json was measured with agentrl's own rollout engine (before the vLLM engine existed);
    # a recipe left on `rollout.engine: auto` would take vLLM where it is installed and sample differently.
    return resolve_paths(load_config(path, ["rollout.engine=hf", *overrides]), path.parent)


def curve(run_dir: Path) -> list[float]:
    metrics = {e["data"]["step"]: e["data"]["metrics"] for e in read_events(run_dir) if e["type"] == "metrics"}
    return [metrics[s]["reward/mean"] for s in sorted(metrics)]


def per_task(evaluation) -> dict[str, list[float]]:
    """Each metric per held-out task, in the data file's order, for paired confidence intervals."""
    names = {name for task in evaluation.per_task for name in task}
    return {name: [task.get(name, 0.0) for task in evaluation.per_task] for name in sorted(names)}


def trained(config, name: str, base: Path, eval_limit: int, results: dict) -> None:
    started = time.perf_counter()
    run_dir = train(config, runs_dir=RUNS, run_id=name, config_base_dir=base, progress=True)
    wall = time.perf_counter() - started
    checkpoint = RunStore(run_dir).latest_checkpoint()
    evaluation = evaluate(
        config,
        config.data.eval,
        limit=eval_limit,
        checkpoint=str(checkpoint),
        baseline=None,
        batch_size=EVAL_BATCH,
        runs_dir=RUNS,
    )
    after, eval_dir = evaluation.metrics, evaluation.run_dir
    results[name] = {
        "after": after,
        "steps": config.train.steps,
        "train_wall_s": round(wall, 1),
        "reward_curve": curve(run_dir),
        "run": str(run_dir.relative_to(HERE)),
        "eval_run": str(eval_dir.relative_to(HERE)),
        "per_task": per_task(evaluation),
    }
    save(results)


def baseline(config, name: str, eval_limit: int, which: str | None, results: dict) -> None:
    evaluation = evaluate(
        config,
        config.data.eval,
        limit=eval_limit,
        checkpoint=None,
        baseline=which,
        batch_size=EVAL_BATCH,
        runs_dir=RUNS,
    )
    results[name] = {
        "metrics": evaluation.metrics,
        "eval_run": str(evaluation.run_dir.relative_to(HERE)),
        "per_task": per_task(evaluation),
    }
    save(results)


def save(results: dict) -> None:
    (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")


def plot(results: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    for name, entry in results.items():
        if "reward_curve" in entry:
            ax.plot(range(1, len(entry["reward_curve"]) + 1), entry["reward_curve"], marker="o", label=name)
    ax.set_xlabel("training step")
    ax.set_ylabel("mean episode reward")
    ax.set_title("SmolLM2-135M-Instruct on CPU: mean reward per step")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "learning_curves.png")


def cell(entry: dict, metrics: dict, name: str) -> str:
    """A metric's mean, with its 95% bootstrap CI over the tasks when the per-task scores were kept."""
    if name not in metrics:
        return "–"
    scores = entry.get("per_task", {}).get(name)
    if not scores:
        return f"{metrics[name]:.3f}"
    low, high = bootstrap_ci(scores)
    return f"{metrics[name]:.3f} [{low:.2f}, {high:.2f}]"


def markdown(results: dict) -> str:
    """The README's results table, from results.json: each metric with its 95% CI over the tasks, and the
    paired CIs of the comparisons the README draws."""
    rows = [
        "| recipe | agent | steps | train wall time | n | reward | accuracy | EM | F1 | substring |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    labels = {
        "arithmetic/base": ("arithmetic + calculator", "untrained"),
        "arithmetic/no-tool": ("arithmetic, no calculator", "untrained (baseline: the task needs the tool)"),
        "arithmetic-grpo": ("arithmetic + calculator", "GRPO"),
        "arithmetic-grpo-tool-tokens-in-loss": ("arithmetic + calculator", "GRPO, tool tokens in the loss (ablation)"),
        "gsm8k/base": ("GSM8K + calculator", "untrained"),
        "gsm8k-grpo": ("GSM8K + calculator", "GRPO"),
        "gsm8k-grpo-tool-tokens-in-loss": ("GSM8K + calculator", "GRPO, tool tokens in the loss (ablation)"),
        "multihop/naive-rag": ("multi-hop QA", "Naive RAG (baseline)"),
        "multihop/base-tool-call": ("multi-hop QA", "Base Tool Call (baseline): the recipe's prompt, untrained"),
        "multihop/base-tool-call-native": ("multi-hop QA", "Base Tool Call (baseline): native tool calls, no example"),
        "multihop-grpo": ("multi-hop QA + search", "GRPO"),
    }
    for key, (recipe, agent) in labels.items():
        if key not in results:
            continue
        entry = results[key]
        metrics = entry.get("metrics") or entry["after"]
        cells = " | ".join(cell(entry, metrics, name) for name in ("reward", "accuracy", "em", "f1", "substring"))
        wall = f"{entry['train_wall_s'] / 60:.1f} min" if "train_wall_s" in entry else "–"
        rows.append(f"| {recipe} | {agent} | {entry.get('steps', 0)} | {wall} | {int(metrics['n'])} | {cells} |")
    comparisons = [
        ("arithmetic-grpo", "arithmetic/base", "accuracy", "arithmetic, GRPO vs untrained"),
        (
            "arithmetic-grpo-tool-tokens-in-loss",
            "arithmetic-grpo",
            "accuracy",
            "arithmetic, tool tokens in the loss vs masked",
        ),
        *(
            (
                ("multihop-grpo", reference, metric, f"multi-hop QA, GRPO vs {name}")
                for reference, name in (
                    ("multihop/base-tool-call", "Base Tool Call (recipe's prompt)"),
                    ("multihop/base-tool-call-native", "Base Tool Call (native)"),
                    ("multihop/naive-rag", "Naive RAG"),
                )
                for metric in ("f1", "em", "substring")
            )
        ),
    ]
    notes = []
    for key, reference, metric, what in comparisons:
        if "per_task" in results.get(key, {}) and "per_task" in results.get(reference, {}):
            after, before = results[key]["per_task"][metric], results[reference]["per_task"][metric]
            low, high = paired_bootstrap_ci(before, after)
            delta = sum(after) / len(after) - sum(before) / len(before)
            notes.append(f"- {what}: {metric} {delta:+.3f}, paired 95% CI [{low:+.3f}, {high:+.3f}]")
    return "\n".join(rows) + "\n" + ("\n" + "\n".join(notes) + "\n" if notes else "")


def main() -> None:
    results: dict = json.loads((HERE / "results.json").read_text()) if (HERE / "results.json").exists() else {}
    gsm8k = RECIPES / "gsm8k" / "gsm8k_grpo.agentrl.yaml"
    multihop = RECIPES / "multihop" / "multihop_grpo.agentrl.yaml"
    arithmetic = RECIPES / "arithmetic" / "arithmetic_grpo.agentrl.yaml"
    gsm_limit, hop_limit, arithmetic_limit = 40, 150, 200
    jobs = [
        (
            "arithmetic/base",
            lambda: baseline(config_of(arithmetic), "arithmetic/base", arithmetic_limit, None, results),
        ),
        (
            "arithmetic/no-tool",
            lambda: baseline(config_of(arithmetic), "arithmetic/no-tool", arithmetic_limit, "no-tool", results),
        ),
        (
            "arithmetic-grpo",
            lambda: trained(config_of(arithmetic), "arithmetic-grpo", arithmetic.parent, arithmetic_limit, results),
        ),
        (
            "arithmetic-grpo-tool-tokens-in-loss",
            lambda: trained(
                config_of(arithmetic, "algorithm.train_on_tool_tokens=true"),
                "arithmetic-grpo-tool-tokens-in-loss",
                arithmetic.parent,
                arithmetic_limit,
                results,
            ),
        ),
        ("gsm8k/base", lambda: baseline(config_of(gsm8k), "gsm8k/base", gsm_limit, None, results)),
        (
            "gsm8k/grpo",
            lambda: trained(config_of(gsm8k), "gsm8k/grpo".replace("/", "-"), gsm8k.parent, gsm_limit, results),
        ),
        (
            "gsm8k-grpo-tool-tokens-in-loss",
            lambda: trained(
                config_of(gsm8k, "algorithm.train_on_tool_tokens=true"),
                "gsm8k-grpo-tool-tokens-in-loss",
                gsm8k.parent,
                gsm_limit,
                results,
            ),
        ),
        ("multihop-grpo", lambda: trained(config_of(multihop), "multihop-grpo", multihop.parent, hop_limit, results)),
        (
            "multihop/naive-rag",
            lambda: baseline(config_of(multihop), "multihop/naive-rag", hop_limit, "naive-rag", results),
        ),
        (
            "multihop/base-tool-call",
            lambda: baseline(config_of(multihop), "multihop/base-tool-call", hop_limit, "base-tool-call", results),
        ),
        (
            "multihop/base-tool-call-native",
            lambda: baseline(
                config_of(multihop, "rollout.tool_format=auto", "env.args.examples=0"),
                "multihop/base-tool-call-native",
                hop_limit,
                "base-tool-call",
                results,
            ),
        ),
    ]
    for name, job in jobs:
        if name.replace("/", "-") in {k.replace("/", "-") for k in results}:
            continue
        print(f"== {name}", file=sys.stderr, flush=True)
        job()
    plot(results)
    (HERE / "results.md").write_text(markdown(results))


if __name__ == "__main__":
    main()

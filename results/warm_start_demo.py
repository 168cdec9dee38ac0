"""Does teaching before reinforcing speed learning? A recipe trained several ways, back to back on the same machine:
as its config trains it (GRPO from the start), with a warm start (its `*_warm_grpo` config: the same number of
steps, the first 2 of them sft on demonstrations its `warm_start_demonstrations.py` wrote), and, for arithmetic, by
expert iteration filtered by a query (`arithmetic_rft`: each step imitates its right answers that called the
calculator). Same tasks, model, settings and seed; each scored greedily on the same held-out tasks before and after
(`agentrl demo`), with the training wall-clock of each beside it, and each against the first, paired by task.
Writes results/warm_start_RECIPE.json and .md and prints the table. `--keep`: a way already in that file whose run
folder is still there is not trained again.

    .venv/bin/python results/warm_start_demo.py arithmetic|lockers [--eval-limit 200] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from datetime import date
from pathlib import Path
from typing import Any

from agent_demo import run_demo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trainer-server"))
from agentrl.run.stats import paired_bootstrap_ci  # noqa: E402 (the trainer's package, beside this folder)

HERE = Path(__file__).resolve().parent
RECIPES = HERE.parent / "trainer-server" / "agentrl" / "recipes"
WAYS = {  # the first is the one the others are compared with
    "arithmetic": {
        "10 GRPO steps (`agentrl demo`)": RECIPES / "arithmetic" / "arithmetic_grpo.agentrl.yaml",
        "2 sft steps, then 8 GRPO steps": RECIPES / "arithmetic" / "arithmetic_warm_grpo.agentrl.yaml",
        "10 rft rounds filtered by a query": RECIPES / "arithmetic" / "arithmetic_rft.agentrl.yaml",
    },
    "lockers": {
        "12 GRPO steps (the recipe)": RECIPES / "lockers" / "lockers_grpo.agentrl.yaml",
        "2 sft steps, then 10 GRPO steps": RECIPES / "lockers" / "lockers_warm_grpo.agentrl.yaml",
    },
}


def held_out_scores(run_dir: Path) -> dict[str, float]:
    """Each held-out task's accuracy in the evaluation `agentrl demo` ran after training `run_dir`: the newest eval
    run of the same name beside it."""
    name = json.loads((run_dir / "run.json").read_text())["name"]
    after = sorted(run_dir.parent.glob(f"eval-{name}-*"))[-1]
    records = (after / "trajectories" / "step-000000.trajectories.jsonl").read_text().splitlines()
    return {r["task_id"]: r["reward_breakdown"]["accuracy"] for r in map(json.loads, records)}


def minus_first(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each way's held-out accuracy after training minus the first way's, paired by task, with its interval."""
    (first, *others) = rows
    base = held_out_scores(Path(rows[first]["run"]))
    tasks = sorted(base)
    gaps = {}
    for name in others:
        scores = held_out_scores(Path(rows[name]["run"]))
        low, high = paired_bootstrap_ci([base[t] for t in tasks], [scores[t] for t in tasks])
        gap = sum(scores[t] - base[t] for t in tasks) / len(tasks)
        gaps[name] = {"accuracy_after_gap": round(gap, 4), "ci95": [round(low, 4), round(high, 4)], "n": len(tasks)}
    return gaps


def kept_rows(results: Path, ways: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """The ways of an earlier `results` file trained on the same config, whose run folders are still there."""
    if not results.exists():
        return {}
    rows = json.loads(results.read_text())["demos"]
    return {
        name: row
        for name, row in rows.items()
        if name in ways and row["config"] == str(ways[name]) and Path(row["run"]).is_dir()
    }


def markdown(recipe: str, record: dict[str, Any]) -> str:
    lines = [
        f"# The {recipe} recipe, taught before it is reinforced\n",
        f"Measured by `results/warm_start_demo.py {recipe}` on {record['machine']}, {record['date']}; "
        f"{record['eval_limit']} held-out tasks, greedy; training on {record['engines']}.\n",
        "| training | held-out accuracy before -> after | change [95% CI] | train_s |",
        "|---|---|---|---|",
    ]
    for name, row in record["demos"].items():
        low, high = row["ci95"]
        lines.append(
            f"| {name} | {row['before']['accuracy']:.3f} -> {row['after']['accuracy']:.3f} | {row['delta']:+.3f} "
            f"[{low:+.3f}, {high:+.3f}] | {row['train_wall_s']:.0f} |"
        )
    first = next(iter(record["demos"]))
    lines.append(f"\nHeld-out accuracy after training minus {first}'s, paired by task:\n")
    for name, gap in record["minus_first"].items():
        lines.append(
            f"- {name}: {gap['accuracy_after_gap']:+.3f} [{gap['ci95'][0]:+.3f}, {gap['ci95'][1]:+.3f}] "
            f"({gap['n']} tasks)"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recipe", choices=sorted(WAYS))
    parser.add_argument("--eval-limit", type=int, default=200)
    parser.add_argument("--keep", action="store_true", help="do not train again a way the results file has a run of")
    args = parser.parse_args()
    args.steps = None  # each config's own train.steps
    runs = HERE / "runs" / f"warm_start_{args.recipe}"
    ways = WAYS[args.recipe]
    kept = kept_rows(HERE / f"warm_start_{args.recipe}.json", ways) if args.keep else {}
    rows = {name: kept.get(name) or run_demo(config, args, runs) for name, config in ways.items()}
    record = {
        "date": date.today().isoformat(),
        "machine": f"{platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "eval_limit": args.eval_limit,
        "engines": ", ".join(sorted({row["engine"] for row in rows.values()})),
        "kept": sorted(kept),  # ways not trained again by this run of the script
        "demos": rows,
        "minus_first": minus_first(rows),
    }
    (HERE / f"warm_start_{args.recipe}.json").write_text(json.dumps(record, indent=2) + "\n")
    text = markdown(args.recipe, record)
    (HERE / f"warm_start_{args.recipe}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

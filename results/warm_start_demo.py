"""Does a warm start speed learning? A recipe trained twice, back to back on the same machine: as its config trains it
(GRPO from the start) and with a warm start (its `*_warm_grpo` config: the same number of steps, the first 2 of them
sft on demonstrations its `warm_start_demonstrations.py` wrote). Same tasks, model, settings and seed; each scored
greedily on the same held-out tasks before and after (`agentrl demo`), with the training wall-clock of each beside
it. Writes results/warm_start_RECIPE.json and .md and prints the table.

    .venv/bin/python results/warm_start_demo.py arithmetic|lockers [--eval-limit 200]
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
PAIRS = {
    "arithmetic": {
        "10 GRPO steps (`agentrl demo`)": RECIPES / "arithmetic" / "arithmetic_grpo.agentrl.yaml",
        "2 sft steps, then 8 GRPO steps": RECIPES / "arithmetic" / "arithmetic_warm_grpo.agentrl.yaml",
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


def warm_minus_cold(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The warm start's held-out accuracy after training minus the cold run's, paired by task, with its interval."""
    cold, warm = (held_out_scores(Path(row["run"])) for row in rows.values())
    tasks = sorted(cold)
    low, high = paired_bootstrap_ci([cold[t] for t in tasks], [warm[t] for t in tasks])
    gap = sum(warm[t] - cold[t] for t in tasks) / len(tasks)
    return {"accuracy_after_gap": round(gap, 4), "ci95": [round(low, 4), round(high, 4)], "n": len(tasks)}


def markdown(recipe: str, record: dict[str, Any]) -> str:
    lines = [
        f"# The {recipe} recipe with and without a warm start\n",
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
    gap = record["warm_minus_cold"]
    lines.append(
        f"\nWarm minus cold, held-out accuracy after training, paired by task: {gap['accuracy_after_gap']:+.3f} "
        f"[{gap['ci95'][0]:+.3f}, {gap['ci95'][1]:+.3f}] ({gap['n']} tasks)."
    )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recipe", choices=sorted(PAIRS))
    parser.add_argument("--eval-limit", type=int, default=200)
    args = parser.parse_args()
    args.steps = None  # each config's own train.steps
    runs = HERE / "runs" / f"warm_start_{args.recipe}"
    rows = {name: run_demo(config, args, runs) for name, config in PAIRS[args.recipe].items()}
    record = {
        "date": date.today().isoformat(),
        "machine": f"{platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "eval_limit": args.eval_limit,
        "engines": ", ".join(sorted({row["engine"] for row in rows.values()})),
        "demos": rows,
        "warm_minus_cold": warm_minus_cold(rows),
    }
    (HERE / f"warm_start_{args.recipe}.json").write_text(json.dumps(record, indent=2) + "\n")
    text = markdown(args.recipe, record)
    (HERE / f"warm_start_{args.recipe}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The multi-step recipes (parcel lockers, trainer-server/agentrl/recipes/lockers; TextWorldExpress CoinCollector,
trainer-server/agentrl/recipes/textworld): what a trained agent does over several steps, and the step-level
algorithms against GRPO and token-level PPO at the same wall-clock.

    .venv/bin/python results/multistep.py ablation [--recipe lockers|coin] [--budget-s 180] [--seeds 0 1]
        [--algorithms grpo gigpo ...] [--name multistep] [--set env.args.busy_rate=0.5 ...]
    .venv/bin/python results/multistep.py steps [--recipe lockers|coin] EVAL_RUN_DIR [EVAL_RUN_DIR ...]
    .venv/bin/python results/multistep.py summary NAME

`ablation` (about 5 minutes a run on 2 cores with the default budget): for each seed and algorithm not already in
results/NAME.json from the same settings (a stopped ablation goes on where it ended), `agentrl train` on the recipe in its own
process, stopped with SIGTERM once the budget has run out since the process started (the step in flight finishes
and a checkpoint is written, as Ctrl-C does), so every algorithm gets the same wall-clock, start-up included; then
the final checkpoint is evaluated greedily on the first 200 held-out tasks. Every evaluation uses the recipe's own
seed, so every agent meets the same busy directory at the same lookups, and the untrained model is evaluated once
on the same terms. Writes results/NAME.json, .md and .png (NAME: --name, multistep by default); runs in
results/runs/multistep/. `--set KEY=VALUE` changes the recipe for training and evaluation alike.

`steps` reads evaluation runs (`agentrl demo` prints theirs) and prints, for each, the success rate, the tool calls
per episode over the successful ones (for CoinCollector also each success's steps over its game's shortest path),
and the retry rate: the share of failed calls followed in the next turn by a
call to the same Tool. For CoinCollector a step is an action in the game (the breakdown's env_steps), and the
ablation also compares the steps of the games solved both before and after training, paired by game, and each
success's steps over its game's shortest path (results/coin_shortest.py) with the untrained model's. `summary`
writes results/NAME.md and .png again from results/NAME.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from agentrl.contract.config import load_config, resolve_paths
from agentrl.run.eval import Evaluation, evaluate
from agentrl.run.metrics import failed_calls_retried
from agentrl.run.runstore import RunStore, read_events
from agentrl.run.stats import bootstrap_ci, paired_bootstrap_ci

HERE = Path(__file__).resolve().parent
RECIPES_DIR = HERE.parent / "trainer-server" / "agentrl" / "recipes"
# Each recipe: its config, its success key in the reward breakdown, how a step is counted (tool calls, or the env's
# own steps), and its name in the tables.
RECIPES = {
    "lockers": {
        "config": RECIPES_DIR / "lockers" / "lockers_grpo.agentrl.yaml",
        "success": "accuracy",
        "steps": "tool calls",
        "title": "Parcel lockers",
    },
    "coin": {
        "config": RECIPES_DIR / "textworld" / "coin_grpo.agentrl.yaml",
        "success": "tasksuccess",
        "steps": "env steps",
        "title": "TextWorldExpress CoinCollector",
    },
}
RUNS = HERE / "runs" / "multistep"
EVAL_LIMIT = 200
# Each algorithm as the ablation runs it: the recipe's settings, with these changed. GiGPO discounts steps as its
# paper does (gamma 0.95); the PPOs keep gamma 1 and the critic's defaults.
ALGORITHMS = {
    "grpo": [],
    "gigpo": ["algorithm.name=gigpo", "algorithm.gamma=0.95"],
    "step_ppo": ["algorithm.name=step_ppo"],
    "ppo": ["algorithm.name=ppo"],
}


def trajectories(run_dir: Path) -> list[dict]:
    return [json.loads(line) for path in sorted((run_dir / "trajectories").glob("*.jsonl")) for line in path.open()]


def episode_steps(record: dict, recipe: dict) -> int:
    if recipe["steps"] == "env steps":
        return int(record["reward_breakdown"].get("env_steps", record["stats"]["num_turns"]))
    return int(record["stats"]["num_tool_calls"])


def succeeded(record: dict, recipe: dict) -> bool:
    return record["reward_breakdown"].get(recipe["success"], record["reward"]) >= 1.0


def step_figures(records: list[dict], recipe: dict) -> dict:
    """Success, steps per successful episode (mean and distribution) and the retry rate after a failed call; the
    steps of each solved task by task id (for the paired comparison)."""
    success = [r for r in records if succeeded(r, recipe)]
    calls = Counter(episode_steps(r, recipe) for r in success)
    failed, retried = failed_calls_retried(
        [[(c["name"], c["error"] is not None) for c in turn["tool_calls"]] for turn in record["turns"]]
        for record in records
    )
    return {
        "n": len(records),
        "success": len(success) / len(records) if records else 0.0,
        "calls_per_success_mean": sum(k * v for k, v in calls.items()) / len(success) if success else 0.0,
        "calls_per_success": {str(k): calls[k] for k in sorted(calls)},
        "steps_by_solved_task": {r["task_id"]: episode_steps(r, recipe) for r in success},
        "failed_calls": failed,
        "retry_rate": retried / failed if failed else 0.0,
    }


def fewer_steps(before: dict, after: dict) -> dict | None:
    """The change in steps over the tasks solved both before and after, paired by task, with its 95% CI."""
    both = sorted(set(before["steps_by_solved_task"]) & set(after["steps_by_solved_task"]))
    if not both:
        return None
    first = [float(before["steps_by_solved_task"][task]) for task in both]
    then = [float(after["steps_by_solved_task"][task]) for task in both]
    return {
        "tasks": len(both),
        "before": sum(first) / len(both),
        "after": sum(then) / len(both),
        "change_ci95": paired_bootstrap_ci(first, then),
    }


def train_for(algorithm: str, seed: int, args: argparse.Namespace) -> tuple[Path, float, int]:
    """One training run stopped after args.budget_s; returns its folder, its wall-clock and the steps it completed."""
    run_id = f"{args.name}-{algorithm}-seed{seed}"
    command = [
        sys.executable,
        "-m",
        "agentrl.cli",
        "train",
        str(RECIPES[args.recipe]["config"]),
        "--runs-dir",
        str(RUNS),
        "--run-id",
        run_id,
        "--quiet",
        "--set",
        f"seed={seed}",
        "--set",
        "train.steps=1000",
        "--set",
        "train.checkpoint_every=1000",
    ]
    for override in [*args.overrides, *ALGORITHMS[algorithm]]:
        command += ["--set", override]
    started = time.perf_counter()
    log = (RUNS / f"{run_id}.stderr.log").open("wb")  # beside the run: why a run that never started did not
    process = subprocess.Popen(command, stderr=log)
    try:
        process.wait(timeout=args.budget_s)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)  # the step in flight finishes, then a checkpoint
        process.wait()
    log.close()
    wall = time.perf_counter() - started
    run_dir = RUNS / run_id
    steps = max((e["data"]["step"] for e in read_events(run_dir) if e["type"] == "metrics"), default=0)
    return run_dir, wall, steps


def machine() -> str:
    """The CPU model, its cores and whether it multiplies bfloat16 in hardware (the learner's autocast follows it)."""
    import platform

    import torch
    from agentrl.models.precision import bfloat16_is_native

    names = [
        line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in line
    ]
    cpu = names[0] if names else platform.processor() or platform.machine()
    bf16 = "bfloat16 in hardware" if bfloat16_is_native(torch.device("cpu")) else "no bfloat16 in hardware"
    return f"{os.cpu_count()}-core {cpu}, {bf16}"


def held_out(config, checkpoint: Path | None):
    return evaluate(
        config,
        config.data.eval,
        limit=EVAL_LIMIT,
        checkpoint=str(checkpoint) if checkpoint else None,
        baseline=None,
        batch_size=50,
        runs_dir=RUNS,
    )


def evaluation_of(run_dir: Path) -> Evaluation:
    """An evaluation run read back from its folder: its per-task scores in the data file's order."""
    records = trajectories(run_dir)  # written in the data file's order
    per_task = [{"reward": r["reward"], **r["reward_breakdown"]} for r in records]
    return Evaluation({"n": float(len(records))}, run_dir, per_task)


def kept_runs(name: str, settings: dict) -> list[dict]:
    """The runs results/NAME.json already holds when it was measured with the same recipe, settings, budget and
    untrained evaluation: an ablation stopped half-way (or run a seed at a time) goes on where it ended instead of
    training those again. Runs measured otherwise are never mixed in; the file is then started anew."""
    path = HERE / f"{name}.json"
    if not path.exists():
        return []
    earlier = json.loads(path.read_text())
    same = all(earlier.get(key) == settings[key] for key in ("recipe", "overrides", "budget_s", "eval_n"))
    if not same or earlier["untrained"]["per_task"] != settings["untrained"]["per_task"]:
        print(f"results/{name}.json was measured with other settings: its runs are not kept")
        return []
    return earlier["runs"]


def ablation(args: argparse.Namespace) -> None:
    RUNS.mkdir(parents=True, exist_ok=True)
    recipe = RECIPES[args.recipe]
    config = resolve_paths(load_config(recipe["config"], args.overrides), recipe["config"].parent)
    # The untrained model's evaluation: an earlier one of the same recipe and settings (--untrained), or a new one.
    untrained = evaluation_of(Path(args.untrained)) if args.untrained else held_out(config, None)
    success = recipe["success"]
    base = [t.get(success, 0.0) for t in untrained.per_task]
    base_figures = step_figures(trajectories(untrained.run_dir), recipe)
    settings = {
        "recipe": str(recipe["config"].relative_to(HERE.parent)),
        "recipe_name": args.recipe,
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
        "overrides": args.overrides,
        "budget_s": args.budget_s,
        "eval_n": len(base),
        "untrained": {"accuracy": sum(base) / len(base), "per_task": base, **base_figures},
    }
    results = {**settings, "runs": kept_runs(args.name, settings)}
    for seed in args.seeds:
        for algorithm in args.algorithms:
            if any(run["algorithm"] == algorithm and run["seed"] == seed for run in results["runs"]):
                print(f"{algorithm} seed {seed}: kept from results/{args.name}.json")
                continue
            run_dir, wall, steps = train_for(algorithm, seed, args)
            checkpoint = RunStore(run_dir).latest_checkpoint()
            evaluation = held_out(config, checkpoint)
            scores = [t.get(success, 0.0) for t in evaluation.per_task]
            figures = step_figures(trajectories(evaluation.run_dir), recipe)
            results["runs"].append(
                {
                    "algorithm": algorithm,
                    "seed": seed,
                    "wall_s": round(wall, 1),
                    "steps": steps,
                    "accuracy": sum(scores) / len(scores),
                    "ci95": bootstrap_ci(scores),
                    "gain_ci95": paired_bootstrap_ci(base, scores),
                    "per_task": scores,
                    **figures,
                    "fewer_steps": fewer_steps(base_figures, figures),
                }
            )
            (HERE / f"{args.name}.json").write_text(json.dumps(results, indent=1) + "\n")  # each run kept as it lands
            print(
                f"{algorithm} seed {seed}: {steps} steps in {wall:.0f} s, held-out {scores and sum(scores) / len(scores):.3f}"
            )
    summarise(results, args.name)


def shortest_of(results: dict) -> dict | None:
    """CoinCollector's held-out games' shortest paths (results/coin_shortest.py), for the steps over them."""
    if results.get("recipe_name") != "coin":
        return None
    from coin_shortest import shortest_paths

    recipe = HERE.parent / results["recipe"]
    config = resolve_paths(load_config(recipe, results["overrides"]), recipe.parent)
    lines = Path(config.data.eval).read_text().splitlines()[: results["eval_n"]]
    return shortest_paths(config, [json.loads(line) for line in lines])


def over_shortest_cell(figures: dict, shortest: dict, before: list[int] | None) -> tuple[str, list[int]]:
    """The table's cell: mean steps over the shortest path per success, the share walked straight to the coin, and
    the change from `before` (the untrained model's) with its 95% CI; and the steps over, for the next cell."""
    from coin_shortest import change_ci95, over_shortest

    over = over_shortest(figures["steps_by_solved_task"], shortest)
    if not over:
        return "–", over
    cell = f"{sum(over) / len(over):.2f} ({sum(1 for extra in over if extra == 0) / len(over):.0%} shortest)"
    if before:
        low, high = change_ci95([float(x) for x in before], [float(x) for x in over])
        cell += f" [{low:+.2f}, {high:+.2f}]"
    return cell, over


def summarise(results: dict, name: str) -> None:
    """multistep.md (a table per algorithm, both seeds pooled with a paired CI against the untrained model) and the
    plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    untrained = results["untrained"]
    recipe = RECIPES[results.get("recipe_name", "lockers")]
    shortest = shortest_of(results)
    over_column = ["steps over the shortest path per success [95% CI of the change]"] if shortest else []
    untrained_over, before = over_shortest_cell(untrained, shortest, None) if shortest else ("", [])
    wall_s = [run["wall_s"] for run in results["runs"]]
    walls = f"{min(wall_s):.0f}-{max(wall_s):.0f} s in all" if wall_s else "no run yet"
    lines = [
        f"{recipe['title']}, {results['eval_n']} held-out tasks, greedy. Each run was stopped {results['budget_s']:.0f} s "
        f"after it started (start-up included) and finished the step in flight ({walls}), SmolLM2-135M-Instruct; "
        f"{results.get('machine', 'a 2-core CPU')}, {results.get('date', '')}"
        + (f"; the recipe with {', '.join(results['overrides'])}" if results.get("overrides") else "")
        + ".",
        "",
        f"| agent | seed | steps | held-out success [95% CI] | gain vs untrained [paired 95% CI] | "
        f"{recipe['steps']} per success | {recipe['steps']} on tasks solved before and after [paired 95% CI] | "
        + "".join(f"{column} | " for column in over_column)
        + "retry rate after a failed call |",
        "|---|---|---|---|---|---|---|---|" + "---|" * len(over_column),
        f"| untrained | – | 0 | {untrained['accuracy']:.3f} | – | {untrained['calls_per_success_mean']:.2f} | – | "
        + (f"{untrained_over} | " if shortest else "")
        + f"{untrained['retry_rate']:.2f} |",
    ]
    by_algorithm: dict[str, list[dict]] = {}
    for run in results["runs"]:
        by_algorithm.setdefault(run["algorithm"], []).append(run)
        low, high = run["ci95"]
        gain_low, gain_high = run["gain_ci95"]
        fewer = run.get("fewer_steps")
        paired = (
            f"{fewer['before']:.2f} -> {fewer['after']:.2f} over {fewer['tasks']} "
            f"[{fewer['change_ci95'][0]:+.2f}, {fewer['change_ci95'][1]:+.2f}]"
            if fewer
            else "–"
        )
        lines.append(
            f"| {run['algorithm']} | {run['seed']} | {run['steps']} | {run['accuracy']:.3f} [{low:.3f}, {high:.3f}] | "
            f"{run['accuracy'] - untrained['accuracy']:+.3f} [{gain_low:+.3f}, {gain_high:+.3f}] | "
            f"{run['calls_per_success_mean']:.2f} | {paired} | "
            + (f"{over_shortest_cell(run, shortest, before)[0]} | " if shortest else "")
            + f"{run['retry_rate']:.2f} |"
        )
    lines += ["", "Seeds pooled (every held-out task once per seed, paired by task and seed):", ""]
    for algorithm, runs in by_algorithm.items():
        pooled = [score for run in sorted(runs, key=lambda r: r["seed"]) for score in run["per_task"]]
        low, high = bootstrap_ci(pooled)
        gain_low, gain_high = paired_bootstrap_ci(untrained["per_task"] * len(runs), pooled)
        line = (
            f"- {algorithm}: {sum(pooled) / len(pooled):.3f} [{low:.3f}, {high:.3f}] over {len(runs)} seeds; "
            f"vs untrained [{gain_low:+.3f}, {gain_high:+.3f}]"
        )
        grpo = sorted(by_algorithm.get("grpo", []), key=lambda r: r["seed"])
        if algorithm != "grpo" and [r["seed"] for r in grpo] == sorted(r["seed"] for r in runs):
            reference = [score for run in grpo for score in run["per_task"]]
            diff_low, diff_high = paired_bootstrap_ci(reference, pooled)
            difference = (sum(pooled) - sum(reference)) / len(pooled)
            line += f"; vs grpo {difference:+.3f} [{diff_low:+.3f}, {diff_high:+.3f}]"
        lines.append(line)
    (HERE / f"{name}.md").write_text("\n".join(lines) + "\n")
    figure, axes = plt.subplots(figsize=(7, 4), dpi=110)
    names = list(by_algorithm)
    for index, algorithm in enumerate(names):
        for run in by_algorithm[algorithm]:
            low, high = run["ci95"]
            axes.errorbar(
                index + 0.1 * (run["seed"] - 0.5),
                run["accuracy"],
                yerr=[[run["accuracy"] - low], [high - run["accuracy"]]],
                fmt="o",
                capsize=3,
                color=f"C{run['seed']}",
                label=f"seed {run['seed']}" if index == 0 else None,
            )
    axes.axhline(untrained["accuracy"], linestyle="--", color="gray", label="untrained")
    axes.set_xticks(range(len(names)), names)
    axes.set_ylim(0, 1)
    axes.set_ylabel("held-out success (greedy)")
    axes.set_title(f"{recipe['title']}: {results['budget_s']:.0f} s of training each", fontsize=11)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(HERE / f"{name}.png")
    plt.close(figure)


def summary(args: argparse.Namespace) -> None:
    summarise(json.loads((HERE / f"{args.name}.json").read_text()), args.name)


def steps(args: argparse.Namespace) -> None:
    for run_dir in map(Path, args.runs):
        figures = step_figures(trajectories(run_dir), RECIPES[args.recipe])
        if args.recipe == "coin":  # the games as this run played them: its frozen config's
            from coin_shortest import over_shortest, shortest_paths

            config = load_config(run_dir / "config.yaml", [])
            tasks = [json.loads(line) for line in Path(config.data.eval).read_text().splitlines()]
            solved = {task["id"]: task for task in tasks if task["id"] in figures["steps_by_solved_task"]}
            over = over_shortest(figures["steps_by_solved_task"], shortest_paths(config, list(solved.values())))
            figures["over_shortest_mean"] = sum(over) / len(over) if over else 0.0
            figures["over_shortest"] = over
        print(json.dumps({"run": str(run_dir), **figures}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run_ablation = commands.add_parser("ablation")
    run_ablation.add_argument("--recipe", choices=list(RECIPES), default="lockers")
    run_ablation.add_argument("--budget-s", type=float, default=180.0)
    run_ablation.add_argument(
        "--untrained", metavar="EVAL_RUN_DIR", help="the untrained model's evaluation run of the same settings, reused"
    )
    run_ablation.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    run_ablation.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS), choices=list(ALGORITHMS))
    run_ablation.add_argument("--name", default="multistep", help="results/NAME.json, .md, .png (default multistep)")
    run_ablation.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="for training and eval"
    )
    run_ablation.set_defaults(handler=ablation)
    rewrite = commands.add_parser("summary")
    rewrite.add_argument("name", help="results/NAME.json, whose .md and .png are written again")
    rewrite.set_defaults(handler=summary)
    read_steps = commands.add_parser("steps")
    read_steps.add_argument("--recipe", choices=list(RECIPES), default="lockers")
    read_steps.add_argument("runs", nargs="+", type=Path)
    read_steps.set_defaults(handler=steps)
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args.handler(args)


if __name__ == "__main__":
    main()

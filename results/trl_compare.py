"""Side by side with TRL: agentrl's demo run against TRL's GRPOTrainer on the same task, model, reward,
samples per step and wall-clock budget, both scored by agentrl's evaluator on the same held-out tasks.

    .venv/bin/agentrl demo | tee demo.json         # the demo's last stdout line is its JSON summary
    .venv/bin/python results/trl_compare.py --agentrl-demo-json demo.json

The TRL side (results/trl/, in its own venv .venv-trl made by results/trl/setup.sh) trains with the agentrl
run's frozen config (RUN/config.yaml: the recipe plus any --set or --steps the demo was given), for
`--budget-s` seconds (default: the demo's train_wall_s), model loading included on both sides. Its model is
then evaluated greedily by `agentrl.run.eval.evaluate` on the same first `--eval-limit` held-out records as the
demo's "after" (default: the demo's n). Writes results/trl_compare.json and prints the README table rows.

The TRL run is multi-turn, like agentrl's: see results/trl/train_trl.py for why it goes through
GRPOTrainer's rollout_func rather than its template-based tools=.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TRL_DIR = HERE / "trl"
TRL_PYTHON = ROOT / ".venv-trl" / "bin" / "python"
METRIC = "accuracy"


def read_demo_json(path: Path) -> dict[str, Any]:
    """The last JSON object line of the file (the demo's stdout may hold more, e.g. through tee)."""
    for line in reversed(path.read_text(encoding="utf-8").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            record = json.loads(line)
            if "run" in record and "train_wall_s" in record:
                return record
    raise SystemExit(f"trl_compare: {path} has no `agentrl demo` JSON line (with run and train_wall_s)")


def mean_ci(scores: list[float]) -> list[float]:
    """The percentile bootstrap interval of the mean (stats' paired bootstrap against all-zero scores)."""
    from agentrl.run.stats import paired_bootstrap_ci

    low, high = paired_bootstrap_ci([0.0] * len(scores), scores)
    return [round(low, 4), round(high, 4)]


def per_task_scores(run_dir: Path, metric: str) -> list[float]:
    """An eval run's per-task scores, in the data file's order (the episodes' group)."""
    records = []
    for path in sorted((run_dir / "trajectories").glob("*.jsonl")):
        with open(path, encoding="utf-8") as handle:
            records += [json.loads(line) for line in handle if line.strip()]
    records.sort(key=lambda r: r["group"])
    return [float(r["reward_breakdown"].get(metric, 0.0)) for r in records]


def find_agentrl_eval(demo: dict[str, Any], n: int) -> Path | None:
    """The demo's own "after" eval run: in the same runs folder, mode eval, on the demo's checkpoint."""
    from agentrl.run.runstore import list_run_dirs

    for run_dir in reversed(list_run_dirs(Path(demo["run"]).parent)):
        try:
            meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if (
            meta.get("mode") == "eval"
            and meta.get("checkpoint") == demo["checkpoint"]
            and not meta.get("baseline")
            and len(per_task_scores(run_dir, METRIC)) == n
        ):
            return run_dir
    return None


def agentrl_side(demo: dict[str, Any], config: Any, eval_limit: int, work: Path) -> dict[str, Any]:
    from agentrl.run.eval import evaluate
    from agentrl.run.runstore import read_events

    run_dir = Path(demo["run"])
    metrics = [e["data"]["metrics"] for e in read_events(run_dir) if e["type"] == "metrics"]
    steps = len(metrics)
    eval_dir = find_agentrl_eval(demo, eval_limit)
    if eval_dir is None:  # the demo's eval folder is gone or had another limit: score its checkpoint again
        print("trl_compare: evaluating the agentrl checkpoint (its demo eval run was not found)", file=sys.stderr)
        eval_dir = evaluate(
            config,
            config.data.eval,
            limit=eval_limit,
            checkpoint=demo["checkpoint"],
            baseline=None,
            batch_size=50,
            runs_dir=work,
        ).run_dir
    scores = per_task_scores(eval_dir, METRIC)
    wall = float(demo["train_wall_s"])
    return {
        "trainer": "agentrl",
        "form": "multi-turn",
        "run": str(run_dir),
        "eval_run": str(eval_dir),
        "steps": steps,
        "wall_s": wall,
        "steps_per_min": round(steps / wall * 60, 3),
        "mean_step_s": round(sum(m["perf/step_time_s"] for m in metrics) / steps, 2) if steps else None,
        "generated_samples": steps * config.train.batch_size,
        "peak_memory_mb": round(max((m.get("perf/peak_memory_mb", 0.0) for m in metrics), default=0.0), 1),
        "heldout": {"n": len(scores), METRIC: round(sum(scores) / len(scores), 4), "ci95": mean_ci(scores)},
        "heldout_before": demo.get("before", {}).get(METRIC),
        "train_reward": [round(m["reward/mean"], 4) for m in metrics],
        "scores": scores,
    }


def run_trl(task_dir: Path, out: Path, budget_s: float, max_steps: int | None) -> dict[str, Any]:
    subprocess.run(["bash", str(TRL_DIR / "setup.sh")], check=True, stdout=sys.stderr)  # stdout: the table only
    # The TRL venv must not see the project's packages: no PYTHONPATH or VIRTUAL_ENV from this process.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    command = [
        str(TRL_PYTHON),
        str(TRL_DIR / "train_trl.py"),
        "--task",
        str(task_dir),
        "--out",
        str(out),
        "--budget-s",
        str(budget_s),
        *(["--max-steps", str(max_steps)] if max_steps else []),
    ]
    print(f"trl_compare: {' '.join(command)}", file=sys.stderr, flush=True)
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)  # the summary lands in out/
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


def trl_side(summary: dict[str, Any], config: Any, eval_limit: int, work: Path) -> dict[str, Any]:
    from agentrl.run.eval import evaluate

    trained = config.model_copy(deep=True)
    trained.model.path = summary["model"]
    started = time.perf_counter()
    evaluation = evaluate(
        trained, config.data.eval, limit=eval_limit, checkpoint=None, baseline=None, batch_size=50, runs_dir=work
    )
    scores = per_task_scores(evaluation.run_dir, METRIC)
    return {
        "trainer": "trl",
        "trl_version": summary["trl_version"],
        "form": summary["form"],
        "form_note": summary["form_note"],
        "model": summary["model"],
        "eval_run": str(evaluation.run_dir),
        "eval_s": round(time.perf_counter() - started, 1),
        "steps": summary["steps"],
        "wall_s": summary["wall_s"],
        "budget_s": summary["budget_s"],
        "steps_per_min": summary["steps_per_min"],
        "mean_step_s": summary["mean_step_s"],
        "generated_samples": summary["generated_samples"],
        "peak_memory_mb": summary["peak_rss_mb"],
        "heldout": {"n": len(scores), METRIC: round(sum(scores) / len(scores), 4), "ci95": mean_ci(scores)},
        "train_reward": summary["train_reward"],
        "scores": scores,
    }


def table_rows(agentrl: dict[str, Any], trl: dict[str, Any]) -> str:
    def row(side: dict[str, Any], name: str) -> str:
        held = side["heldout"]
        return (
            f"| {name} | {side['form']} | {held[METRIC]:.3f} [{held['ci95'][0]:.3f}, {held['ci95'][1]:.3f}] "
            f"(n={held['n']}) | {side['steps']} | {side['wall_s'] / 60:.1f} min | {side['steps_per_min']:.2f} | "
            f"{side['generated_samples']} | {side['peak_memory_mb'] / 1024:.1f} GiB |"
        )

    header = (
        "| trainer | episodes | held-out accuracy [95% CI] | steps | wall-clock | steps/min | generated samples "
        "| peak memory (RSS) |\n|---|---|---|---|---|---|---|---|"
    )
    return "\n".join([header, row(agentrl, "agentrl"), row(trl, f"TRL {trl['trl_version']} GRPOTrainer")])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--agentrl-demo-json", required=True, type=Path, help="a file holding `agentrl demo`'s JSON line"
    )
    parser.add_argument("--budget-s", type=float, help="TRL's wall-clock budget (default: the demo's train_wall_s)")
    parser.add_argument("--eval-limit", type=int, help="held-out records scored (default: the demo's n)")
    parser.add_argument("--max-steps", type=int, help="also stop TRL after this many steps (smoke tests)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="applied on top of the agentrl run's config, for the TRL run and both evals (smoke tests)",
    )
    parser.add_argument(
        "--work",
        type=Path,
        default=HERE / "runs" / "trl-compare",
        help="the export, the TRL run and the eval runs (default: results/runs/trl-compare)",
    )
    parser.add_argument("--out", type=Path, default=HERE / "trl_compare.json")
    args = parser.parse_args()

    from agentrl.contract.config import load_config_dict

    sys.path.insert(0, str(TRL_DIR))
    import yaml
    from export_task import export

    demo = read_demo_json(args.agentrl_demo_json)
    # The run's frozen config: the recipe as the demo trained it, paths absolute.
    frozen = yaml.safe_load((Path(demo["run"]) / "config.yaml").read_text(encoding="utf-8"))
    config = load_config_dict(frozen, args.overrides)
    budget_s = args.budget_s or float(demo["train_wall_s"])
    eval_limit = args.eval_limit or int(demo["n"])
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)

    task_dir = export(config, work / "task")
    summary = run_trl(task_dir, work / "trl", budget_s, args.max_steps)
    trl = trl_side(summary, config, eval_limit, work)
    agentrl = agentrl_side(demo, config, eval_limit, work)

    from agentrl.run.stats import paired_bootstrap_ci

    low, high = paired_bootstrap_ci(agentrl["scores"], trl["scores"])
    result = {
        "recipe": config.name,
        "model": config.model.path,
        "metric": METRIC,
        "budget_s": budget_s,
        "eval_limit": eval_limit,
        "heldout_data": config.data.eval,
        "episodes_per_step": config.train.batch_size,
        "group_size": config.rollout.group_size,
        "agentrl": {k: v for k, v in agentrl.items() if k != "scores"},
        "trl": {k: v for k, v in trl.items() if k != "scores"},
        "trl_minus_agentrl": {
            "delta": round(trl["heldout"][METRIC] - agentrl["heldout"][METRIC], 4),
            "ci95": [round(low, 4), round(high, 4)],
        },
        "overrides": args.overrides,
        "max_steps": args.max_steps,
        "peak_memory_note": "agentrl: the demo process's max RSS (its before-eval included); TRL: the training "
        "process's max RSS (the eval runs in another process)",
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"trl_compare: wrote {args.out}", file=sys.stderr)
    print(table_rows(agentrl, trl))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The multi-hop recipe trained on the full training split (2,195 HotpotQA, 2WikiMultihopQA and MuSiQue questions,
`multihop_full_grpo.agentrl.yaml`) against Naive RAG and Base Tool Call on the 150 held-out questions, all three
searching the same corpus (the 21,184 paragraphs of the training and held-out files).

    .venv/bin/python results/multihop_full.py [--steps 25] [--eval-every 10] [--set KEY=VALUE ...] [--name NAME]
        [--config multihop_full_seeded_grpo.agentrl.yaml] [--eval-limit N]

Runs `agentrl eval --baseline naive-rag`, then `agentrl demo --config multihop_full_grpo.agentrl.yaml --metric f1`
(whose "before" is Base Tool Call: the untrained model with the recipe's prompt and the search tool), and writes
results/NAME.json and .md (multihop_full by default): F1, EM and substring for each agent, paired bootstrap CIs of the trained agent
against each baseline, the searches per question and how often a search brought back a passage holding the answer,
and the held-out F1 at every evaluation during training against the training time (the curve). `--config` names
another config of the recipe folder (multihop_full_seeded_grpo.agentrl.yaml: the first search made for the agent);
the baselines are evaluated with it too. All three agents are scored on every record of the config's data.eval
(`--eval-limit N`: its first N). `multihop_warm_grpo.agentrl.yaml` (a warm start on demonstrations, then GRPO) is
evaluated on data/heldout_500.jsonl, and the report adds a row per dataset and split of it (HotpotQA dev,
2WikiMultihopQA dev, and the held-out slice of each dataset's train questions; data/heldout_500_provenance.tsv), each
with its paired bootstrap CIs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from agentrl.contract.config import load_config, resolve_paths
from agentrl.recipes.multihop.search import paragraphs_of
from agentrl.recipes.multihop.splits import HELDOUT, heldout_groups
from agentrl.run.runstore import read_events
from agentrl.run.stats import bootstrap_ci, paired_bootstrap_ci
from multistep import machine

HERE = Path(__file__).resolve().parent
RECIPE = HERE.parent / "trainer-server" / "agentrl" / "recipes" / "multihop"
RUNS = HERE / "runs" / "multihop_full"
METRICS = ("f1", "em", "substring")


def agentrl(*args: str) -> str:
    """Runs an agentrl command; returns its last stdout line (the JSON line both commands end with)."""
    done = subprocess.run([sys.executable, "-m", "agentrl.cli", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"agentrl {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1]


def records(run_dir: Path) -> list[dict]:
    found = [json.loads(line) for path in sorted((run_dir / "trajectories").glob("*.jsonl")) for line in path.open()]
    return sorted(found, key=lambda r: r["group"])  # the data file's order: eval numbers its episodes so


def summary(run_dir: Path) -> dict:
    found = records(run_dir)
    scores = {m: [r["reward_breakdown"].get(m, 0.0) for r in found] for m in METRICS}
    return {
        "run": str(run_dir.relative_to(HERE)),
        "n": len(found),
        **{m: sum(v) / len(v) for m, v in scores.items()},
        **{f"{m}_ci95": bootstrap_ci(v) for m, v in scores.items()},
        "searches_per_question": sum(r["stats"]["num_tool_calls"] for r in found) / len(found),
        "retrieved_answer": sum(r["reward_breakdown"].get("retrieved_answer", 0.0) for r in found) / len(found),
        "per_task": scores,
    }


def records_in(path: str) -> int:
    with open(path, encoding="utf-8") as handle:
        return sum(1 for line in handle if line.strip())


def group_rows(agents: dict[str, dict], groups: list[str]) -> list[str]:
    """A table row per group of held-out questions (dataset and split), each agent's F1, and the trained agent's F1
    against each baseline's, paired bootstrap 95% CIs over that group's questions."""
    lines = [
        "| questions | n | Naive RAG F1 | Base Tool Call F1 | trained F1 | trained - Naive RAG, F1 95% CI | "
        "trained - Base Tool Call, F1 95% CI |",
        "|---|---|---|---|---|---|---|",
    ]
    for group in dict.fromkeys(groups):
        picked = [i for i, g in enumerate(groups) if g == group]
        f1 = {name: [agent["per_task"]["f1"][i] for i in picked] for name, agent in agents.items()}
        mean = {name: sum(v) / len(v) for name, v in f1.items()}
        ci = {name: paired_bootstrap_ci(f1[name], f1["trained"]) for name in ("naive_rag", "base_tool_call")}
        lines.append(
            f"| {group} | {len(picked)} | {mean['naive_rag']:.3f} | {mean['base_tool_call']:.3f} | "
            f"{mean['trained']:.3f} | [{ci['naive_rag'][0]:+.3f}, {ci['naive_rag'][1]:+.3f}] | "
            f"[{ci['base_tool_call'][0]:+.3f}, {ci['base_tool_call'][1]:+.3f}] |"
        )
    return lines


def latest_eval_dir(before: set[Path]) -> Path:
    [new] = [p for p in RUNS.iterdir() if p.name.startswith("eval-") and p not in before]
    return new


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--name", default="multihop_full", help="results/NAME.json and .md (default multihop_full)")
    parser.add_argument(
        "--config",
        default="multihop_full_grpo.agentrl.yaml",
        help="a config in the recipe folder, for all three agents",
    )
    parser.add_argument("--eval-limit", type=int, help="score the first N held-out records (default: all)")
    args = parser.parse_args()
    config = RECIPE / args.config
    loaded = resolve_paths(load_config(config, args.overrides), config.parent)
    eval_limit = args.eval_limit or records_in(loaded.data.eval)
    RUNS.mkdir(parents=True, exist_ok=True)
    sets = [arg for override in args.overrides for arg in ("--set", override)]
    seen = set(RUNS.iterdir())
    limit = ["--limit", str(eval_limit)]
    agentrl("eval", str(config), "--baseline", "naive-rag", "--runs-dir", str(RUNS), *limit, *sets)
    naive_rag = summary(latest_eval_dir(seen))
    started = time.perf_counter()
    demo = json.loads(
        agentrl(
            "demo",
            "--config",
            str(config),
            "--metric",
            "f1",
            "--eval-limit",
            str(eval_limit),
            "--runs-dir",
            str(RUNS),
            "--steps",
            str(args.steps),
            "--set",
            f"train.eval_every={args.eval_every}",
            *sets,
        )
    )
    wall = time.perf_counter() - started
    naive_dir = RUNS / Path(naive_rag["run"]).name
    evals = sorted(
        (p for p in RUNS.iterdir() if p.name.startswith("eval-") and p not in seen and p != naive_dir),
        key=lambda p: (p / "run.json").stat().st_mtime,
    )
    base_tool_call, trained = summary(evals[0]), summary(evals[1])  # the demo's before and after
    run_dir = Path(demo["run"])
    curve = [
        {"step": e["data"]["step"], "f1": e["data"]["metrics"]["eval/f1"]}
        for e in read_events(run_dir)
        if e["type"] == "metrics" and "eval/f1" in e["data"]["metrics"]
    ]
    steps_s = {
        e["data"]["step"]: e["data"]["metrics"]["perf/step_time_s"]
        for e in read_events(run_dir)
        if e["type"] == "metrics"
    }
    for point in curve:
        point["train_s"] = round(sum(t for s, t in steps_s.items() if s <= point["step"]), 1)
    results = {
        "config": str(config.relative_to(HERE.parent)),
        "overrides": args.overrides,
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
        "train_wall_s": demo["train_wall_s"],
        "wall_s": round(wall, 1),
        "naive_rag": naive_rag,
        "base_tool_call": base_tool_call,
        "trained": trained,
        "curve": [{"step": 0, "f1": base_tool_call["f1"], "train_s": 0.0}, *curve],
        "trained_vs": {
            name: {m: paired_bootstrap_ci(other["per_task"][m], trained["per_task"][m]) for m in METRICS}
            for name, other in (("naive_rag", naive_rag), ("base_tool_call", base_tool_call))
        },
    }
    groups = heldout_groups()[: trained["n"]] if Path(loaded.data.eval).name == HELDOUT else []
    agents = {"naive_rag": naive_rag, "base_tool_call": base_tool_call, "trained": trained}
    by_group = group_rows(agents, groups) if groups else []
    results["by_group"] = by_group
    (HERE / f"{args.name}.json").write_text(json.dumps(results, indent=1) + "\n")
    corpus = len(paragraphs_of([Path(loaded.data.train), Path(loaded.data.eval)]))
    warm_start = f"{loaded.train.sft_steps} sft steps on data.sft, then " if loaded.train.sft_steps else ""
    lines = [
        f"Multi-hop QA, {trained['n']} held-out questions, greedy, one corpus of {corpus:,} paragraphs for all; trained "
        f"with {warm_start}GRPO on {records_in(loaded.data.train):,} training-split questions for "
        f"{demo['train_wall_s'] / 60:.1f} min; {results['machine']}, {results['date']}; "
        f"config {config.name}" + "".join(f", --set {o}" for o in args.overrides) + ".",
        "",
        "| agent | F1 | EM | substring | searches per question | a search found the answer |",
        "|---|---|---|---|---|---|",
    ]
    for name, result in (("Naive RAG", naive_rag), ("Base Tool Call", base_tool_call), ("GRPO", trained)):
        lines.append(
            f"| {name} | {result['f1']:.3f} | {result['em']:.3f} | {result['substring']:.3f} | "
            f"{result['searches_per_question']:.2f} | {result['retrieved_answer']:.2f} |"
        )
    lines += [""]
    for name, intervals in results["trained_vs"].items():
        for metric, (low, high) in intervals.items():
            lines.append(f"- GRPO vs {name}: {metric} paired 95% CI [{low:+.3f}, {high:+.3f}]")
    if by_group:
        lines += ["", "Per dataset and split (the trained agent's F1 against each baseline's, paired):", "", *by_group]
    lines += [
        "",
        "Held-out F1 during training: "
        + ", ".join(f"step {p['step']} ({p['train_s']:.0f} s): {p['f1']:.3f}" for p in results["curve"]),
    ]
    (HERE / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

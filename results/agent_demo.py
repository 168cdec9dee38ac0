"""The demo's arithmetic task trained twice, back to back on the same machine: as the Tool/ToolEnv recipe
(`agentrl demo`) and as a plain OpenAI-SDK agent trained through the endpoint (recipes/arithmetic/agent.py,
`agentrl demo --config arithmetic_agent_grpo.agentrl.yaml`). Same problems, prompt tokens, model, GRPO settings and
seed; each scored greedily on the same held-out problems before and after. Writes results/agent_demo.json and
results/agent_demo.md and prints the table.

    .venv/bin/python results/agent_demo.py [--steps N] [--eval-limit 200]

Wall-clock: `train_s` is the training run (model load, rollouts, updates, checkpoints), `total_s` the whole demo
command (both evaluations and the learning curve too).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RECIPE = HERE.parent / "trainer-server" / "agentrl" / "recipes" / "arithmetic"
DEMOS = {
    "Tool/ToolEnv (`agentrl demo`)": RECIPE / "arithmetic_grpo.agentrl.yaml",
    "OpenAI-SDK agent via the endpoint": RECIPE / "arithmetic_agent_grpo.agentrl.yaml",
}


def run_demo(config: Path, args: argparse.Namespace, runs: Path = HERE / "runs" / "agent_demo") -> dict[str, Any]:
    """`agentrl demo` on `config`: its summary line, the engine its training ran on, and the whole command's time."""
    command = [sys.executable, "-m", "agentrl.cli", "demo", "--config", str(config)]
    command += ["--eval-limit", str(args.eval_limit), "--runs-dir", str(runs)]
    command += ["--steps", str(args.steps)] if args.steps else []
    started = time.perf_counter()
    finished = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
    summary = json.loads(finished.stdout.strip().splitlines()[-1])
    return {
        **summary,
        "engine": rollout_engine(Path(summary["run"])),
        "total_s": round(time.perf_counter() - started, 1),
    }


def rollout_engine(run_dir: Path) -> str:
    """What sampled the training run's episodes, as its log says it."""
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        message = json.loads(line)["data"].get("message", "")
        if message.startswith("rollout engine: "):
            return message.removeprefix("rollout engine: ")
    return "unknown"


def table(rows: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| how the episodes are played | engine | held-out accuracy before -> after | change [95% CI] | train_s | total_s |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        low, high = r["ci95"]
        lines.append(
            f"| {name} | {r['engine']} | {r['before']['accuracy']:.3f} -> {r['after']['accuracy']:.3f} | "
            f"{r['delta']:+.3f} [{low:+.3f}, {high:+.3f}] | {r['train_wall_s']:.0f} | {r['total_s']:.0f} |"
        )
    return "\n".join(lines)


def write_results(record: dict[str, Any]) -> str:
    """results/agent_demo.json and .md from the two demos' summaries; returns the text of the .md."""
    toolenv, agent = record["demos"].values()
    record["agent_vs_toolenv"] = comparison = {
        "accuracy_after_gap": round(agent["after"]["accuracy"] - toolenv["after"]["accuracy"], 4),
        "train_s_ratio": round(agent["train_wall_s"] / toolenv["train_wall_s"], 3),
        "total_s_ratio": round(agent["total_s"] / toolenv["total_s"], 3),
    }
    (HERE / "agent_demo.json").write_text(json.dumps(record, indent=2) + "\n")
    text = (
        f"# The arithmetic demo as a Tool/ToolEnv recipe and as an OpenAI-SDK agent\n\n"
        f"Measured by `results/agent_demo.py` on {record['machine']}, {record['date']}; {toolenv['n']} held-out "
        f"problems, greedy.\n\n{table(record['demos'])}\n\nAgent minus ToolEnv: accuracy after "
        f"{comparison['accuracy_after_gap']:+.3f}, training wall-clock x{comparison['train_s_ratio']}, whole demo "
        f"x{comparison['total_s_ratio']}.\n"
    )
    (HERE / "agent_demo.md").write_text(text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, help="GRPO steps for both (default: the recipes' train.steps)")
    parser.add_argument("--eval-limit", type=int, default=200)
    args = parser.parse_args()
    rows = {name: run_demo(config, args) for name, config in DEMOS.items()}
    machine = f"{platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} cores"
    text = write_results({"date": date.today().isoformat(), "machine": machine, "demos": rows})
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

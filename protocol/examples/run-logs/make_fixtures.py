"""Records the Run Dashboard's test fixtures with the real trainer on the tiny model.

    PYTHONPATH=trainer-server .venv/bin/python protocol/examples/run-logs/make_fixtures.py

Two runs of the bundled lookup example, 12 steps each, differing in learning rate and group size, so the
dashboard has two runs to overlay and a config diff to show. Each is written as RUN.events.jsonl (the run's
event log exactly as the trainer wrote it: status, metrics, health, log, trajectory and checkpoint events)
and RUN.config.json (its frozen config.yaml, what `run/config` returns, with this repository's path cut off
so the fixture does not depend on where it was recorded). Both runs hit health alerts on this tiny model.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
EXAMPLE = REPO / "trainer-server" / "agentrl" / "examples" / "lookup" / "lookup.agentrl.yaml"
RUNS = {
    "lookup-lr-high": ["train.steps=12", "train.lr=0.01"],
    "lookup-lr-low": ["train.steps=12", "train.lr=0.001", "rollout.group_size=4", "train.batch_size=8"],
}


def without_repo_path(value):
    if isinstance(value, dict):
        return {k: without_repo_path(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_repo_path(v) for v in value]
    return value.replace(f"{REPO}/", "") if isinstance(value, str) else value


def main() -> None:
    import torch
    from agentrl.run.config import load_config
    from agentrl.run.trainer import train

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        for run_id, overrides in RUNS.items():
            run_dir = train(
                load_config(EXAMPLE, overrides), runs_dir=Path(tmp), run_id=run_id, config_base_dir=EXAMPLE.parent
            )
            (HERE / f"{run_id}.events.jsonl").write_text((run_dir / "events.jsonl").read_text())
            config = without_repo_path(yaml.safe_load((run_dir / "config.yaml").read_text()))
            (HERE / f"{run_id}.config.json").write_text(json.dumps(config, indent=2) + "\n")


if __name__ == "__main__":
    main()

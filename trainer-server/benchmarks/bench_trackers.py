"""What the experiment trackers cost a training step: the tiny lookup example trained for a few steps with
TensorBoard, W&B (offline) and MLflow (a folder store) all on, timing each tracker's share of the loop's one
call (`Trackers.log_step`) and its start-up. Each tracker runs alone, then all three together.

    .venv/bin/python trainer-server/benchmarks/bench_trackers.py [--steps 8]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from agentrl.contract.config import load_config
from agentrl.run.trackers import Trackers
from agentrl.run.trainer import train

EXAMPLE = Path(__file__).resolve().parents[1] / "agentrl" / "examples" / "lookup" / "lookup.agentrl.yaml"


def timed_run(steps: int, logging: list[str], folder: Path) -> dict[str, float]:
    step_times: list[float] = []
    opened: list[float] = []
    log_step, init = Trackers.log_step, Trackers.__init__

    def timed_log_step(self, *args, **kwargs):  # the loop's one call, measured where it is made
        started = time.perf_counter()
        log_step(self, *args, **kwargs)
        step_times.append(time.perf_counter() - started)

    def timed_init(self, *args, **kwargs):
        started = time.perf_counter()
        init(self, *args, **kwargs)
        opened.append(time.perf_counter() - started)

    Trackers.log_step, Trackers.__init__ = timed_log_step, timed_init
    try:
        config = load_config(
            EXAMPLE, [f"train.steps={steps}", "train.checkpoint_every=1000", "rollout.engine=hf", *logging]
        )
        train(config, runs_dir=folder / "runs", config_base_dir=EXAMPLE.parent)
    finally:
        Trackers.log_step, Trackers.__init__ = log_step, init
    return {
        "start_s": opened[0],
        "per_step_ms_median": 1000 * statistics.median(step_times),
        "per_step_ms_max": 1000 * max(step_times),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        trackers = {
            "none": [],
            "tensorboard": [f"logging.tensorboard.log_dir={folder / 'tb'}"],
            "wandb (offline)": ["logging.wandb.project=bench", "logging.wandb.mode=offline"],
            "mlflow (folder)": [f"logging.mlflow.tracking_uri={folder / 'mlruns'}"],
        }
        trackers["all three"] = [item for items in trackers.values() for item in items]
        for name, logging in trackers.items():
            print(
                json.dumps(
                    {
                        "trackers": name,
                        **{k: round(v, 3) for k, v in timed_run(args.steps, logging, folder / name).items()},
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()

"""Rollout throughput on a Ray cluster: episodes per second with 1 and 2 rollout workers (cluster.backend: ray),
beside the same engine in one process, for the tiny lookup example whose env runs a Tool that sleeps.

The Tool stands for the slow, blocking set-up an agent env does per episode (starting a sandbox, opening a
browser): the env calls it in `reset`, which the engine runs one episode after another, so one process waits for
every episode's in turn, while each rollout worker waits only for its share. (Tool calls the *model* makes already
run concurrently in threads within one engine; workers add compute for sampling, and room for such blocking work.)
A local Ray cluster of `--cpus` CPUs starts first; each worker reserves one.

    .venv/bin/python trainer-server/benchmarks/bench_scale.py [--sleep-ms 50] [--steps 3] [--cpus 2]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import ray
import torch
from agentrl.cluster import RayCluster
from agentrl.contract.config import RunConfig, load_config, resolve_paths
from agentrl.contract.tasks import items_for_step, load_tasks
from agentrl.environment.loader import env_factory, load_env_class
from agentrl.models.loading import load_policy
from agentrl.rollout.factory import make_rollout_engine

EXAMPLE = Path(__file__).resolve().parents[1] / "agentrl" / "examples" / "lookup" / "lookup.agentrl.yaml"

SLEEPING_ENV = """
import time

from agentrl import Tool
from agentrl.examples.lookup.env import LookupEnv


class StartSandbox(Tool):
    name = "start_sandbox"
    description = "Start the episode's sandbox (here: sleep)."
    parameters = {"type": "object", "properties": {}}

    def __init__(self, sleep_s):
        self.sleep_s = sleep_s

    def execute(self):
        time.sleep(self.sleep_s)
        return "ready"


class SandboxLookupEnv(LookupEnv):
    def __init__(self, sleep_s=0.05, **args):
        super().__init__(**args)
        self.sandbox = StartSandbox(sleep_s)

    def reset(self, task):
        self.sandbox.execute()
        return super().reset(task)
"""


def bench_config(folder: Path, sleep_ms: float, workers: int) -> RunConfig:
    (folder / "env.py").write_text(SLEEPING_ENV)
    overrides = [
        "train.batch_size=32",
        f"cluster.backend={'ray' if workers else 'local'}",
        f"cluster.rollout_workers={max(workers, 1)}",
        "cluster.learner_resources.cpus=0",  # no learner starts: the benchmark only rolls out
    ]
    config = resolve_paths(load_config(EXAMPLE, overrides), EXAMPLE.parent)
    config.env.module, config.env.class_name = str(folder / "env.py"), "SandboxLookupEnv"
    config.env.args = {"sleep_s": sleep_ms / 1000}
    return config


def episodes_per_second(config: RunConfig, steps: int) -> dict[str, float]:
    torch.manual_seed(config.seed)
    model, tokenizer, device = load_policy(config.model, config.seed)
    cluster = None
    if config.cluster.backend == "ray":
        run_id = f"bench-{os.getpid()}-{time.monotonic_ns()}"
        cluster = RayCluster(config, model, run_id, lambda _restarted: None, lambda _workers: None)
        engine = cluster.engine
    else:
        make_env = env_factory(load_env_class(config.env.module, config.env.class_name), config.env.args, [])
        engine = make_rollout_engine(model, tokenizer, make_env, config.rollout, device, config.train.batch_size)
    tasks = load_tasks(config.data.train, None)
    per_step = config.train.batch_size // config.rollout.group_size
    try:
        engine.run(items_for_step(tasks, 1, per_step, 0, True), config.rollout.group_size, seed=1)  # warm-up
        started = time.perf_counter()
        episodes = 0
        for step in range(2, steps + 2):
            step_tasks = items_for_step(tasks, step, per_step, 0, True)
            episodes += len(engine.run(step_tasks, config.rollout.group_size, seed=step))
        elapsed = time.perf_counter() - started
    finally:
        if cluster is not None:
            cluster.close()
        else:
            engine.close()
    return {"episodes_per_s": episodes / elapsed, "step_s": elapsed / steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sleep-ms", type=float, default=50.0, help="the Tool's sleep per episode")
    parser.add_argument("--steps", type=int, default=3, help="timed steps of 32 episodes each, after a warm-up")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray cluster")
    args = parser.parse_args()
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    results = {}
    try:
        with tempfile.TemporaryDirectory() as folder:
            for label, workers in (("one process (local)", 0), ("1 rollout worker", 1), ("2 rollout workers", 2)):
                results[label] = episodes_per_second(bench_config(Path(folder), args.sleep_ms, workers), args.steps)
                print(
                    f"{label:>20}: {results[label]['episodes_per_s']:6.1f} episodes/s, {results[label]['step_s']:.2f} s/step"
                )
    finally:
        ray.shutdown()
    print(json.dumps({"sleep_ms": args.sleep_ms, "cpus": args.cpus, **results}))


if __name__ == "__main__":
    main()

"""`agentrl eval CONFIG`: run the agent greedily on every record of a data file and score it.

Writes the episodes as a run folder (mode `eval`, trajectories at step 0, viewable in the replay panel)
and ends by printing one JSON line of metrics: `n`, the mean reward, and each of `accuracy`, `em`,
`f1`, `substring` that the env's reward breakdown reports.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

METRIC_KEYS = ("accuracy", "em", "f1", "substring")
BASELINES = ("naive-rag", "base-tool-call")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="a *.agentrl.yaml run config (its model, env and limits)")
    parser.add_argument("--checkpoint", help="a checkpoint folder of a run (runs/RUN/checkpoints/step-N)")
    parser.add_argument("--data", help="JSON Lines file in the dataset's own layout (default: the config's data.eval)")
    parser.add_argument("--limit", type=int, help="only the first N records")
    parser.add_argument("--baseline", choices=BASELINES,
                        help="naive-rag: retrieve once with the question, then answer; base-tool-call: the "
                             "untrained model with the env's tools")
    parser.add_argument("--batch-size", type=int, default=8, help="episodes generated together (default 8)")
    parser.add_argument("--runs-dir", default="runs", help="where the eval's run folder goes (default: runs)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")


def evaluate(config: Any, data_path: str, *, limit: int | None, checkpoint: str | None, baseline: str | None,
             batch_size: int, runs_dir: str | Path) -> tuple[dict[str, float], Path]:
    import torch

    from agentrl.envloader import env_factory, load_env_class
    from agentrl.model import load_policy
    from agentrl.rollout import RolloutEngine
    from agentrl.runstore import RunStore, new_run_id
    from agentrl.trainer import data_files_in_use, load_tasks, record_episodes

    if baseline == "base-tool-call" and checkpoint:
        raise ValueError("--baseline base-tool-call is the untrained model: drop --checkpoint")
    env_args = dict(config.env.args)
    if baseline == "naive-rag":
        env_args["baseline"] = "naive-rag"
    make_env = env_factory(load_env_class(config.env.module, config.env.class_name), env_args,
                           data_files_in_use(config, data_path))
    make_env()  # fail now, before loading the model, with the env's own message (no such baseline, bad data file)
    rollout = config.rollout.model_copy(update={"temperature": 0.0})
    model, tokenizer, device = load_policy(config.model, config.seed)
    if checkpoint:
        state = torch.load(Path(checkpoint) / "model.pt", map_location=device)
        model.load_state_dict(state)
    tasks = load_tasks(data_path, limit)
    engine = RolloutEngine(model, tokenizer, make_env, rollout, device)
    name = f"eval-{config.name}" + (f"-{baseline}" if baseline else "")
    store = RunStore.create(Path(runs_dir), new_run_id(name), config.model_dump(mode="json"),
                            {"name": name, "mode": "eval", "data": str(data_path), "checkpoint": checkpoint,
                             "baseline": baseline})
    episodes = []
    for start in range(0, len(tasks), batch_size):
        batch = engine.run(tasks[start : start + batch_size], group_size=1, seed=config.seed)
        for episode in batch:
            episode.group += start  # unique ids across batches
        episodes += batch
        print(f"eval: {len(episodes)}/{len(tasks)}", file=sys.stderr, flush=True)
    record_episodes(store, 0, episodes, tokenizer)
    metrics: dict[str, float] = {"n": float(len(episodes)),
                                 "reward": sum(e.total_reward for e in episodes) / len(episodes)}
    for key in METRIC_KEYS:
        values = [e.reward_breakdown[key] for e in episodes if key in e.reward_breakdown]
        if values:
            metrics[key] = sum(values) / len(values)
    store.append_event("metrics", {"step": 0, "metrics": metrics})
    store.append_event("status", {"status": "completed", "step": 0, "total_steps": 0}, durable=True)
    return metrics, store.run_dir


def run(args: argparse.Namespace) -> int:
    from agentrl.config import ConfigError, load_config
    from agentrl.envloader import EnvLoadError
    from agentrl.trainer import resolve_paths

    try:
        config_path = Path(args.config)
        config = resolve_paths(load_config(config_path, args.overrides), config_path.resolve().parent)
    except ConfigError as err:
        print(f"agentrl eval: {err}", file=sys.stderr)
        return 2
    data = args.data or config.data.eval or config.data.train
    try:
        metrics, run_dir = evaluate(config, data, limit=args.limit, checkpoint=args.checkpoint,
                                    baseline=args.baseline, batch_size=args.batch_size, runs_dir=args.runs_dir)
    except (EnvLoadError, ValueError, FileNotFoundError, TypeError) as err:
        print(f"agentrl eval: {err}", file=sys.stderr)
        return 2
    print(f"eval: trajectories in {run_dir}", file=sys.stderr)
    print(json.dumps({k: (int(v) if k == "n" else round(v, 4)) for k, v in metrics.items()}))
    return 0

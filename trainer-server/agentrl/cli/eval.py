"""`agentrl eval CONFIG`: evaluate a config, checkpoint or baseline greedily on a data file (agentrl/run/eval.py),
and print one JSON line of metrics."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agentrl.run.eval import UNTRAINED_BASELINE, evaluate


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="a *.agentrl.yaml run config (its model, env and limits)")
    parser.add_argument(
        "--checkpoint",
        help="a checkpoint folder of a run (runs/RUN/checkpoints/step-N) or a folder `agentrl export` wrote",
    )
    parser.add_argument("--data", help="JSON Lines file in the dataset's own layout (default: the config's data.eval)")
    parser.add_argument("--limit", type=int, help="only the first N records")
    parser.add_argument(
        "--baseline",
        metavar="NAME",
        help=f"{UNTRAINED_BASELINE}: the untrained model with the env's tools; any other name is "
        "the env's own baseline, e.g. naive-rag (multi-hop QA: retrieve once, then answer) "
        "or no-tool (arithmetic: answer without the calculator)",
    )
    parser.add_argument("--batch-size", type=int, default=8, help="episodes generated together (default 8)")
    parser.add_argument("--runs-dir", default="runs", help="where the eval's run folder goes (default: runs)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")


def run(args: argparse.Namespace) -> int:
    from agentrl.contract.config import ConfigError, load_config, resolve_paths
    from agentrl.environment.loader import EnvLoadError

    try:
        config_path = Path(args.config)
        config = resolve_paths(load_config(config_path, args.overrides), config_path.resolve().parent)
    except ConfigError as err:
        print(f"agentrl eval: {err}", file=sys.stderr)
        return 2
    data = args.data or config.data.eval or config.data.train
    try:
        result = evaluate(
            config,
            data,
            limit=args.limit,
            checkpoint=args.checkpoint,
            baseline=args.baseline,
            batch_size=args.batch_size,
            runs_dir=args.runs_dir,
        )
    except (EnvLoadError, ValueError, FileNotFoundError, TypeError) as err:
        print(f"agentrl eval: {err}", file=sys.stderr)
        return 2
    print(f"eval: trajectories in {result.run_dir}", file=sys.stderr)
    print(json.dumps({k: (int(v) if k == "n" else round(v, 4)) for k, v in result.metrics.items()}))
    return 0

"""`agentrl train CONFIG`: headless training with a progress bar and a one-line summary per step."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="a *.agentrl.yaml run config (not needed with --resume)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, e.g. --set train.lr=1e-4 (repeatable)",
    )
    parser.add_argument("--max-steps", type=int, help="stop after this many steps of this invocation")
    parser.add_argument("--runs-dir", default="runs", help="folder holding one sub-folder per run (default: runs)")
    parser.add_argument("--run-id", help="name of the run folder (default: NAME-TIMESTAMP-RANDOM)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last checkpoint")
    parser.add_argument(
        "--rollout-only", type=int, metavar="N", help="a Try run: N episodes with the base model, no updates"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar or step lines")


def run(args: argparse.Namespace) -> int:
    import faulthandler
    import signal
    import threading

    # A crash in native code (a Tool's C extension under rollout.tool_isolation: thread) ends the process with every
    # thread's Python stack on stderr, the Tool's frames among them: the failed status's traceback shows where.
    faulthandler.enable()
    from agentrl.run.stderr_log import cap_own_stderr

    cap_own_stderr()  # a server's run log stays bounded whether the server watches or not
    # Before the heavy imports: a stop asked for while torch loads is still a graceful stop.
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    from agentrl.contract.config import ConfigError, RunConfig, load_config
    from agentrl.environment.loader import EnvLoadError
    from agentrl.run.runstore import check_run_id

    if not args.config and not args.resume:
        print("agentrl train: give a CONFIG file or --resume RUN_DIR", file=sys.stderr)
        return 2
    if args.rollout_only is not None and args.rollout_only < 1:
        print("agentrl train: --rollout-only must be at least 1", file=sys.stderr)
        return 2
    if args.run_id is not None:
        try:
            check_run_id(args.run_id)
        except ValueError as err:
            print(f"agentrl train: --run-id: {err}", file=sys.stderr)
            return 2
    config: RunConfig | None = None
    try:
        if args.config:
            config = load_config(args.config, args.overrides)
    except ConfigError as err:
        print(f"agentrl train: {err}", file=sys.stderr)
        return 2
    from agentrl.run.trainer import train

    try:
        run_dir = train(
            config,  # type: ignore[arg-type]  # ignored on resume: the run's frozen config is used
            runs_dir=args.runs_dir,
            run_id=args.run_id,
            resume_dir=args.resume,
            max_steps=args.max_steps,
            rollout_only_episodes=args.rollout_only,
            config_base_dir=Path(args.config).resolve().parent if args.config else None,
            progress=not args.quiet,
            stop_event=stop,
        )
    except (EnvLoadError, ValueError, FileNotFoundError, FileExistsError) as err:
        print(f"agentrl train: {err}", file=sys.stderr)
        return 2
    print(run_dir)
    return 0

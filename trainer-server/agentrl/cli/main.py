"""`agentrl` command line. Each subcommand is `agentrl/cli/<name>.py`, which provides `add_arguments(parser)` and
`run(args) -> int` and calls the package that does the work; this file only wires them, and each imports the work's
package lazily, so `agentrl schema` does not pay for torch."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading

# subcommand -> (module, help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "train": ("agentrl.cli.train", "train a run config (headless, with a progress bar)"),
    "schema": ("agentrl.cli.schema", "print the run-config JSON Schema"),
    "env": ("agentrl.cli.env", "check an environment folder: `agentrl env check PATH`"),
    "serve": ("agentrl.cli.serve", "serve the JSON-RPC WebSocket API for editors"),
    "eval": ("agentrl.cli.eval", "evaluate a config, checkpoint or baseline on a data file"),
    "export": ("agentrl.cli.export", "write a run's trained model as a folder transformers and vLLM load"),
    "export-trajectories": (
        "agentrl.cli.export_trajectories",
        "write a run's episodes in another tool's trajectory format (ATIF)",
    ),
    "demo": ("agentrl.cli.demo", "the README's main job: train the default model on the arithmetic recipe"),
    "doctor": (
        "agentrl.cli.doctor",
        "check this machine's set-up: Python, torch, GPUs, vLLM, the default model, a server",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentrl", description="Agent RL Studio trainer")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        sub_parser.set_defaults(_module=module_name)
        importlib.import_module(module_name).add_arguments(sub_parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if threading.current_thread() is not threading.main_thread():  # called in a thread: signals are the caller's
        return int(importlib.import_module(args._module).run(args) or 0)
    # SIGTERM unwinds the command as Ctrl-C does, so what it started is ended on the way out (the default ends the
    # process at once, and vLLM's engine processes outlive it). train and serve put their own graceful stop over it.
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        return int(importlib.import_module(args._module).run(args) or 0)
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # `python -m agentrl.cli.main` as well as `python -m agentrl.cli` (__main__.py)
    raise SystemExit(main())

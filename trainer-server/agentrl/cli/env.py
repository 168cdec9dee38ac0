"""`agentrl env check PATH`: load an environment and play one scripted episode, no model needed
(agentrl/rollout/check.py); prints its diagnostics, and exits 1 when one is an error."""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="env_command", required=True, metavar="ACTION")
    check = sub.add_parser("check", help="load an env and run one scripted episode")
    check.add_argument("path", help="a *.agentrl.yaml run config, or a folder holding one")
    check.add_argument("--json", action="store_true", help="print diagnostics as one JSON array")


def run(args: argparse.Namespace) -> int:
    from agentrl.rollout.check import check_env

    diagnostics = check_env(args.path)
    if args.json:
        print(json.dumps(diagnostics, indent=2))
    else:
        for d in diagnostics:
            where = f"{d['file']}:{d['line']}: " if "line" in d else (f"{d['file']}: " if "file" in d else "")
            print(f"{d['severity']}: {where}{d['message']}", file=sys.stdout if d["severity"] == "info" else sys.stderr)
    return 1 if any(d["severity"] == "error" for d in diagnostics) else 0

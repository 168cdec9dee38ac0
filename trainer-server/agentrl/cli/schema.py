"""`agentrl schema`: the run-config JSON Schema (committed as protocol/schemas/run-config.schema.json)."""

from __future__ import annotations

import argparse
import json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no options


def run(args: argparse.Namespace) -> int:
    from agentrl.contract.config import run_config_schema

    print(json.dumps(run_config_schema(), indent=2))
    return 0

"""`agentrl env check PATH`: load an environment and play one scripted episode, no model needed
(agentrl/rollout/check.py); prints its diagnostics, and exits 1 when one is an error.

`agentrl env mcp-tools`: start one MCP server (an `env.mcp_servers` entry, as JSON on stdin) as a run starts it,
print its tools as JSON ({name, description, parameters} each), stop it; exits 3 with the reason on stderr when it
cannot start. The server's `mcp/listTools` runs this in a child process it can end, with all the MCP server started.
"""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="env_command", required=True, metavar="ACTION")
    check = sub.add_parser("check", help="load an env and run one scripted episode")
    check.add_argument("path", help="a *.agentrl.yaml run config, or a folder holding one")
    check.add_argument("--json", action="store_true", help="print diagnostics as one JSON array")
    sub.add_parser("mcp-tools", help="list the tools of the MCP server whose env.mcp_servers entry is on stdin")


def run(args: argparse.Namespace) -> int:
    if args.env_command == "mcp-tools":
        return list_mcp_tools()
    from agentrl.rollout.check import check_env

    diagnostics = check_env(args.path)
    if args.json:
        print(json.dumps(diagnostics, indent=2))
    else:
        for d in diagnostics:
            where = f"{d['file']}:{d['line']}: " if "line" in d else (f"{d['file']}: " if "file" in d else "")
            print(f"{d['severity']}: {where}{d['message']}", file=sys.stdout if d["severity"] == "info" else sys.stderr)
    return 1 if any(d["severity"] == "error" for d in diagnostics) else 0


def list_mcp_tools() -> int:
    import signal

    import pydantic

    from agentrl.contract.env_sources import MCP_LISTING_FAILED_EXIT, McpServerConfig
    from agentrl.environment.mcp import McpUnavailableError, list_server_tools

    try:
        entry = McpServerConfig.model_validate_json(sys.stdin.read())
    except pydantic.ValidationError as err:
        print(f"agentrl env mcp-tools: not an env.mcp_servers entry: {err.errors()[0]['msg']}", file=sys.stderr)
        return 2
    # The MCP server runs in a session of its own (the SDK starts it so): ended by the server that runs this, the
    # listing stops it on the way out (SystemExit runs the clean-up), rather than leaving it running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        tools = list_server_tools(entry)
    except McpUnavailableError as err:
        print(err, file=sys.stderr)
        return MCP_LISTING_FAILED_EXIT
    print(json.dumps(tools))
    return 0

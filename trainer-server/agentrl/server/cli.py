"""`agentrl serve`: the JSON-RPC WebSocket server an editor drives."""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    parser.add_argument("--port", type=int, default=8765, help="port; 0 picks a free one (default: 8765)")
    token = parser.add_mutually_exclusive_group()
    token.add_argument("--token", help="require 'Authorization: Bearer TOKEN' on every connection")
    token.add_argument("--token-file", help="read the token from this file (keeps it out of the process list)")
    parser.add_argument("--runs-dir", default="runs", help="folder of run folders (default: runs)")
    parser.add_argument("--bundles-dir", help="where uploaded env bundles live (default: RUNS_DIR/../bundles)")
    parser.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="a browser Origin allowed to connect (repeatable); none by default")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    import asyncio

    from agentrl.server.app import ServerOptions, TrainerServer

    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    token = args.token
    if args.token_file:
        try:
            token = Path(args.token_file).read_text(encoding="utf-8").strip()
        except OSError as err:
            print(f"agentrl serve: cannot read --token-file: {err}", file=sys.stderr)
            return 2
        if not token:
            print("agentrl serve: --token-file is empty", file=sys.stderr)
            return 2
    if not is_loopback(args.host) and not token:
        print(f"agentrl serve: refusing to bind {args.host} without a token: anyone who can reach it could run "
              f"code on this machine. Pass --token or --token-file, or bind 127.0.0.1.", file=sys.stderr)
        return 2
    runs_dir = Path(args.runs_dir).resolve()
    options = ServerOptions(
        host=args.host, port=args.port, runs_dir=runs_dir,
        bundles_dir=Path(args.bundles_dir).resolve() if args.bundles_dir else runs_dir.parent / "bundles",
        token=token, allowed_origins=tuple(args.allow_origin),
    )

    def on_listening(port: int) -> None:
        host = f"[{args.host}]" if ":" in args.host else args.host
        print(json.dumps({"event": "listening", "url": f"ws://{host}:{port}", "pid": os.getpid()}), flush=True)

    try:
        asyncio.run(TrainerServer(options).serve_forever(on_listening))
    except OSError as err:
        print(f"agentrl serve: cannot listen on {args.host}:{args.port}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0

"""`agentrl serve`: the JSON-RPC WebSocket server an editor drives."""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import secrets
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentrl.server.tls import TLS_FOLDER  # the standard library's only: --help stays quick


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    parser.add_argument("--port", type=int, default=8765, help="port; 0 picks a free one (default: 8765)")
    parser.add_argument(
        "--token-file",
        help=f"the token every connection must present ('Authorization: Bearer "
        f"TOKEN'), read from this file; or set {TOKEN_ENV}. Without either, a fresh token is "
        "generated into RUNS_DIR/.serve-token, readable by you only",
    )
    parser.add_argument("--token", help=argparse.SUPPRESS)  # refused with a reason: see run()
    parser.add_argument(
        "--runs-dir",
        default="runs",
        help="folder of run folders (default: runs); created 0700, refused if another user owns it or may write to it",
    )
    parser.add_argument(
        "--bundles-dir",
        help=f"where uploaded env bundles live (default: RUNS_DIR/{BUNDLES_FOLDER}); yours alone, as RUNS_DIR",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser Origin allowed to connect (repeatable); none by default",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=32,
        help="connections open at once; more are refused with HTTP 503 (default: 32)",
    )
    parser.add_argument(
        "--max-runs",
        type=int,
        help="run processes at once; later run/start and run/resume calls wait, queued, and start in order as runs "
        "end (default: one per 2 cores and per 4 GiB of memory, at least 2)",
    )
    parser.add_argument(
        "--allow-code",
        action="store_true",
        help="allow the methods that run code on this machine (run/start and run/resume run the env's code and its "
        "MCP servers; env/check, tool/rerun, mcp/listTools) when bound to an address other than loopback; on loopback "
        "they are always allowed. Whoever holds the token can then run any code as this user",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="start every run on this Ray cluster (auto, local, or ray://HOST:PORT; sets the run config's "
        "cluster.backend: ray and cluster.address unless the config names a cluster of its own); needs "
        "pip install 'agentrl[ray]'",
    )
    parser.add_argument(
        "--tls-cert",
        metavar="FILE",
        help="serve wss:// with this certificate (PEM; its chain may follow it), with --tls-key; its SHA-256 "
        "fingerprint is printed at start",
    )
    parser.add_argument(
        "--tls-key",
        metavar="FILE",
        help="the certificate's private key (PEM, unencrypted); refused off loopback if other users may read it",
    )
    parser.add_argument(
        "--tls-self-signed",
        action="store_true",
        help=f"serve wss:// with a self-signed certificate made for this machine at the first start and kept in "
        f"RUNS_DIR/{TLS_FOLDER}/ (reused at later starts); its SHA-256 fingerprint is printed at start, to compare with "
        "the one the editor shows when it first connects",
    )
    parser.add_argument(
        "--allow-cleartext",
        action="store_true",
        help="off loopback, serve plain ws:// anyway: the token and every message cross the network unencrypted, for "
        "anyone on the way to read. Only for a network that is yours alone; TLS or an SSH tunnel is the safe way",
    )
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])


TOKEN_ENV = "AGENTRL_TOKEN"
# Off loopback the token is all that stands between the network and running code on this machine.
MIN_REMOTE_TOKEN_LENGTH = 16
GENERATED_TOKEN_FILE = ".serve-token"
SERVER_LOCK_FILE = ".serve-lock"  # held by the one server of a runs folder
BUNDLES_FOLDER = ".bundles"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_token(args: argparse.Namespace, runs_dir: Path, warn: Callable[[str], None]) -> tuple[str, Path | None]:
    """The token connections must present, and the file it was generated into when none was given: like
    Jupyter, a server never runs without one, since any local user could otherwise upload code and run it. A token
    file others may read is refused off loopback, and `warn`ed of on loopback."""
    if args.token is not None:
        raise ValueError(
            f"--token puts the token in every local user's process list; put it in a file "
            f"(--token-file FILE) or the {TOKEN_ENV} environment variable"
        )
    if args.token_file:
        try:
            token = Path(args.token_file).read_text(encoding="utf-8").strip()
            mode = Path(args.token_file).stat().st_mode
        except OSError as err:
            raise ValueError(f"cannot read --token-file: {err}") from None
        if not token:
            raise ValueError("--token-file is empty")
        if mode & 0o077:  # as ssh refuses a private key others can read
            exposure = (
                f"--token-file {args.token_file} can be read or written by other users (mode {stat.S_IMODE(mode):04o}), "
                f"who could then run code on this machine; chmod 600 {args.token_file}"
            )
            if not is_loopback(args.host):
                raise ValueError(f"refusing to bind {args.host}: {exposure}")
            warn(f"warning: {exposure}")
    else:
        token = os.environ.get(TOKEN_ENV, "").strip()
    if token:
        if not is_loopback(args.host) and len(token) < MIN_REMOTE_TOKEN_LENGTH:
            raise ValueError(
                f"refusing to bind {args.host} with a token of {len(token)} characters: anyone who "
                f"can reach it could guess it and run code on this machine; use at least "
                f"{MIN_REMOTE_TOKEN_LENGTH} (e.g. python -c 'import secrets; print(secrets.token_urlsafe())')"
            )
        return token, None
    if not is_loopback(args.host):
        raise ValueError(
            f"refusing to bind {args.host} without a token you chose: anyone who can reach it could "
            f"run code on this machine. Pass --token-file FILE or set {TOKEN_ENV}, or bind 127.0.0.1."
        )
    path = runs_dir / GENERATED_TOKEN_FILE  # runs_dir is made (private) before the token
    if path.is_dir() and not path.is_symlink():
        raise ValueError(f"{path} is a folder, where the server writes its generated token; remove it")
    path.unlink(missing_ok=True)  # a fresh token each start; O_EXCL below then refuses a planted file or link
    token = secrets.token_urlsafe(32)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as out:
        out.write(token + "\n")
    return token, path


def serve_tls(args: argparse.Namespace, runs_dir: Path, say: Callable[[str], None]) -> tuple[Any, str | None]:
    """The SSL context that makes the server wss:// and its certificate's SHA-256 fingerprint, `say`d for the user to
    compare with what the editor shows; (None, None) for plain ws://. Off loopback, plain ws:// is refused unless
    --allow-cleartext accepts it: the token, which lets its holder run code here, would cross the network in clear."""
    from agentrl.server import tls

    if args.tls_self_signed:
        cert, key, made = tls.self_signed(runs_dir / TLS_FOLDER, args.host)
        say(
            f"agentrl serve: wss:// with the self-signed certificate {cert} "
            f"({'made now' if made else 'made at an earlier start'}) for {', '.join(tls.certificate_names(cert))}"
        )
    elif args.tls_cert:
        cert, key = Path(args.tls_cert), Path(args.tls_key)
        exposure = tls.key_exposure(key)
        if exposure is not None:
            if not is_loopback(args.host):
                raise ValueError(f"refusing to bind {args.host}: {exposure}")
            say(f"warning: {exposure}")
        say(f"agentrl serve: wss:// with the certificate {cert}")
    else:
        if not is_loopback(args.host):
            if not args.allow_cleartext:
                port = args.port or 8765
                raise ValueError(
                    f"refusing to serve {args.host} in clear text (ws://): the token, which lets whoever holds it use "
                    "this server (and run code as this user, with --allow-code), and every message would cross the "
                    "network unencrypted. Serve wss:// with --tls-self-signed (a certificate made here: the editor "
                    "shows its fingerprint to trust once) or with --tls-cert FILE --tls-key FILE; or serve 127.0.0.1 "
                    f"and reach it through an SSH tunnel (ssh -N -L {port}:127.0.0.1:{port} USER@THIS-HOST, then "
                    f"ws://127.0.0.1:{port}); or pass --allow-cleartext if the network between is yours alone"
                )
            say(
                f"warning: --allow-cleartext: {args.host} is served as plain ws://: the token and every message cross "
                "the network unencrypted, readable by anyone on the way (--tls-self-signed or an SSH tunnel avoids it)"
            )
        return None, None
    context = tls.server_context(cert, key)
    fingerprint = tls.certificate_fingerprint(cert)
    say(f"agentrl serve: TLS certificate SHA-256 fingerprint: {fingerprint}")
    say("agentrl serve: the editor shows this fingerprint when it first connects: trust it only if the two are equal")
    return context, fingerprint


def tls_flags_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the TLS flags given together, or None."""
    if bool(args.tls_cert) != bool(args.tls_key):
        return "--tls-cert and --tls-key go together: a certificate and its private key"
    if args.tls_self_signed and args.tls_cert:
        return "--tls-self-signed makes a certificate of its own: give it or --tls-cert/--tls-key, not both"
    if args.allow_cleartext and (args.tls_self_signed or args.tls_cert):
        return "--allow-cleartext serves plain ws://, and a --tls flag wss://: give one of them"
    return None


def hold_runs_folder(runs_dir: Path) -> Any:
    """One server per runs folder: a second one would replace the first's generated token (locking its clients out)
    and adopt, stop and record the end of the same runs. The lock (RUNS_DIR/.serve-lock, flock) is the kernel's: it
    is let go when the process ends, however it ends. Returns the open lock file, to keep open; ValueError naming the
    server that holds it."""
    import fcntl

    path = runs_dir / SERVER_LOCK_FILE
    handle = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600), "r+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise ValueError(
            f"another agentrl serve (pid {holder}) serves {runs_dir}; connect to it, stop it, or give this one "
            "another --runs-dir"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


# Headers websockets logs (at debug level, each request's and response's, one per record) that carry a credential.
CREDENTIAL_HEADERS = ("authorization", "cookie", "set-cookie")


def redact_credentials(record: logging.LogRecord) -> bool:
    """A log filter: websockets logs each header as ("< %s: %s", name, value), the bearer token among them, which
    would then sit in a server's log file. The value of a credential's header is replaced."""
    args = record.args
    if isinstance(args, tuple) and len(args) == 2 and str(args[0]).lower() in CREDENTIAL_HEADERS:
        record.args = (args[0], "<redacted>")
    return True


def run(args: argparse.Namespace) -> int:
    import asyncio

    from agentrl.server.app import ServerOptions, TrainerServer
    from agentrl.server.private import make_private_by_default, private_folder

    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for handler in logging.getLogger().handlers:
        handler.addFilter(redact_credentials)
    runs_dir = Path(args.runs_dir).resolve()
    if args.ray is not None:
        from agentrl.cluster.connect import RAY_MISSING
        from agentrl.contract.config import ClusterConfig

        try:
            ClusterConfig(backend="ray", address=args.ray)
            import ray  # noqa: F401  # refused now, not at each run's start
        except ImportError:
            print(f"agentrl serve --ray: {RAY_MISSING}", file=sys.stderr)
            return 2
        except ValueError:
            print(f"agentrl serve --ray: {args.ray!r} is not auto, local or ray://HOST:PORT", file=sys.stderr)
            return 2
    for flag, value in (("--max-connections", args.max_connections), ("--max-runs", args.max_runs)):
        if value is not None and value < 1:
            print(f"agentrl serve: {flag} must be at least 1 (got {value})", file=sys.stderr)
            return 2
    if (problem := tls_flags_problem(args)) is not None:
        print(f"agentrl serve: {problem}", file=sys.stderr)
        return 2
    make_private_by_default()
    bundles_dir = Path(args.bundles_dir).resolve() if args.bundles_dir else runs_dir / BUNDLES_FOLDER
    try:
        private_folder(runs_dir)
        private_folder(bundles_dir)
        lock = hold_runs_folder(runs_dir)  # held until this process ends; before the token, which it would replace
        token, generated_in = serve_token(args, runs_dir, warn=lambda message: print(message, file=sys.stderr))
        ssl_context, fingerprint = serve_tls(args, runs_dir, say=lambda message: print(message, file=sys.stderr))
    except ValueError as err:
        print(f"agentrl serve: {err}", file=sys.stderr)
        return 2
    if generated_in is not None:
        print(
            f"agentrl serve: no token given; connections must present the one generated in {generated_in} "
            "(readable by you only)",
            file=sys.stderr,
        )
    if not is_loopback(args.host):
        print(
            f"agentrl serve: {args.host} is not loopback: "
            + (
                "--allow-code: whoever holds the token can start runs and so run any code as this user"
                if args.allow_code
                else "methods that run code here (starting and resuming runs, env checks, tool re-runs, MCP "
                "listings) are refused; clients watch, query, export and stop runs. --allow-code allows them"
            ),
            file=sys.stderr,
        )
    options = ServerOptions(
        host=args.host,
        port=args.port,
        runs_dir=runs_dir,
        bundles_dir=bundles_dir,
        token=token,
        allowed_origins=tuple(args.allow_origin),
        max_connections=args.max_connections,
        max_runs=args.max_runs,
        runs_code=is_loopback(args.host) or args.allow_code,
        ray_address=args.ray,
        ssl=ssl_context,
    )

    def on_listening(port: int) -> None:
        host = f"[{args.host}]" if ":" in args.host else args.host
        scheme = "ws" if fingerprint is None else "wss"
        ready = {"event": "listening", "url": f"{scheme}://{host}:{port}", "pid": os.getpid()}
        if generated_in is not None:
            ready["token_file"] = str(generated_in)
        if fingerprint is not None:
            ready["tls_fingerprint"] = fingerprint
        print(json.dumps(ready), flush=True)

    try:
        asyncio.run(TrainerServer(options).serve_forever(on_listening))
    except OSError as err:
        print(f"agentrl serve: cannot listen on {args.host}:{args.port}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    finally:
        lock.close()  # the runs folder is free for the next server
    return 0

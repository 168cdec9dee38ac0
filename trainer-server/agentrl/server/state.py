"""What the method handlers share, one object for the whole server: its options, the runs, the env bundles, the slots
that bound how much of each kind of work runs at once, and the trajectory caches. A handler is a plain function of
this state, the calling client and the request's params (the handlers_*.py tables), so a test calls one without a
socket."""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.run.trajectory_summaries import TrajectorySummaries
from agentrl.server import protocol as p
from agentrl.server.bundles import BundleStore
from agentrl.server.client import Client
from agentrl.server.episode_searches import EpisodeSearches
from agentrl.server.runs import RunManager
from agentrl.server.trajectory_index import TrajectoryIndex

MAX_CONCURRENT_UPLOADS = 2
MAX_CONCURRENT_RERUNS = 2  # each is a child process building the user's env
MAX_CONCURRENT_REROLLS = 1  # each is a child process loading the model as well: the rest wait
MAX_CONCURRENT_MCP_LISTINGS = 2  # each is a child process with an MCP server of the client's choosing
# trajectory/query calls worked on at once (the rest wait): each is Python work that holds the interpreter's lock in
# turns, and eight at once made every other client's request wait for it (run/get: 290 ms at worst, 2 cores).
MAX_CONCURRENT_QUERIES = 2
# Runs whose trajectory summaries stay in memory for trajectory/query (about 25 MB for 300,000 trajectories); the
# least recently queried is dropped, and read from its index again if asked.
SUMMARY_CACHE_RUNS = 8


@dataclass
class ServerOptions:
    host: str
    port: int
    runs_dir: Path
    bundles_dir: Path
    token: str | None
    allowed_origins: tuple[str, ...] = ()
    max_connections: int = 32
    max_runs: int | None = None  # run processes at once (the rest wait, queued); None: runs.default_max_runs()
    # Whether the methods that run code on this machine at a client's request (p.CODE_RUNNING_METHODS) are allowed:
    # on loopback, or when asked for (agentrl serve --allow-code).
    runs_code: bool = False
    ray_address: str | None = None  # --ray: the Ray cluster every run started here runs on
    ssl: Any = None  # an ssl.SSLContext: the server speaks wss:// (agentrl serve --tls-cert/--tls-self-signed)


class ServerState:
    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self.runs = RunManager(options.runs_dir, options.ray_address, options.max_runs)
        self.bundles = BundleStore(options.bundles_dir)
        # Uploads run in worker threads; bounded, they never take every worker from the other requests.
        self.upload_slots = asyncio.Semaphore(MAX_CONCURRENT_UPLOADS)
        self.export_slot = asyncio.Semaphore(1)
        self.rerun_slots = asyncio.Semaphore(MAX_CONCURRENT_RERUNS)
        self.reroll_slots = asyncio.Semaphore(MAX_CONCURRENT_REROLLS)
        self.mcp_listing_slots = asyncio.Semaphore(MAX_CONCURRENT_MCP_LISTINGS)
        self.query_slots = asyncio.Semaphore(MAX_CONCURRENT_QUERIES)
        self.trajectory_index = TrajectoryIndex()
        self.summaries: OrderedDict[str, TrajectorySummaries] = OrderedDict()
        self.episode_searches = EpisodeSearches(self.query_slots)  # trajectory/search's, sharing the query slots
        self.cache_lock = threading.Lock()
        self.devices: dict[str, Any] = {}  # described once, before the server listens (TrainerServer.serve_forever)
        self.shutdown_requested = asyncio.Event()

    def recent_summaries(self, run_dir: Path) -> TrajectorySummaries:
        """The run's trajectory summaries (read if not in memory), now the most recently used; the least recently
        used beyond SUMMARY_CACHE_RUNS are dropped."""
        with self.cache_lock:
            found = self.summaries.pop(run_dir.name, None) or TrajectorySummaries(run_dir)
            self.summaries[run_dir.name] = found
            while len(self.summaries) > SUMMARY_CACHE_RUNS:
                self.summaries.popitem(last=False)
            return found

    def forget_trajectories(self, run_id: str) -> None:
        """What the trajectory methods keep of a deleted run."""
        with self.cache_lock:
            self.summaries.pop(run_id, None)
        self.episode_searches.forget(run_id)
        self.trajectory_index.forget(self.options.runs_dir / run_id)

    def env_folder(self, params: dict[str, Any], method: str, bundle_key: str) -> Path | None:
        """The env folder a request names: `configDir`, a folder on the server's machine (a client sharing its
        filesystem), or an uploaded bundle's (`bundle_key`); None when it names neither."""
        if "configDir" in params:
            if bundle_key in params:
                raise p.RpcError(p.INVALID_PARAMS, f"{method}: give configDir or {bundle_key}, not both")
            folder = Path(params["configDir"])
            if not folder.is_absolute() or not folder.is_dir():
                raise p.RpcError(
                    p.INVALID_PARAMS,
                    f"{method}: configDir {params['configDir']!r} is not an absolute folder on the server's machine",
                )
            return folder
        return self.bundles.path(params[bundle_key]) if bundle_key in params else None


# A method's handler: its result, or an RpcError that the dispatcher (app.py) answers as the request's error.
Handler = Callable[[ServerState, Client, dict[str, Any]], Awaitable[dict[str, Any]]]

"""Joining a Ray cluster. Ray is an optional extra: without it, asking for one fails here, saying how to get it."""

from __future__ import annotations

from types import ModuleType

RAY_MISSING = (
    "cluster.backend: ray needs Ray, which this agentrl install lacks: pip install 'agentrl[ray]' "
    "(or set cluster.backend: local)"
)


def require_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise RuntimeError(RAY_MISSING) from None
    return ray


def connect(address: str) -> bool:
    """Join the cluster `address` names (cluster.address); returns whether this call started Ray, so that the
    caller shuts it down when the run ends. A process already connected (a test's cluster) stays on its own."""
    ray = require_ray()
    if ray.is_initialized():
        return False
    if address == "auto":
        ray.init()  # RAY_ADDRESS, else a cluster `ray start` left on this machine, else a new local one
    else:
        ray.init(address=address)  # "local": a new one in this process; ray://HOST:PORT: Ray Client
    return True

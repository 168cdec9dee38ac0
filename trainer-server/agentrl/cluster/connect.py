"""Joining a Ray cluster. Ray is an optional extra: without it, asking for one fails here, saying how to get it."""

from __future__ import annotations

from types import ModuleType

from agentrl.contract.config import ClusterConfig

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


def check_capacity(ray: ModuleType, cluster: ClusterConfig) -> None:
    """Refuse a run whose workers the cluster cannot hold all at once: Ray would otherwise leave the ones that do
    not fit pending, and the run would wait for them forever. (An autoscaling cluster is judged by the nodes it
    has now.)"""
    workers = (
        (cluster.rollout_workers, cluster.rollout_resources),
        (cluster.learner_workers, cluster.learner_resources),
    )
    needed = {
        "CPU": sum(count * resources.cpus for count, resources in workers),
        "GPU": sum(count * resources.gpus for count, resources in workers),
    }
    has = ray.cluster_resources()
    short = [
        f"{needed[kind]:g} {kind}s (it has {has.get(kind, 0.0):g})"
        for kind in needed
        if needed[kind] > has.get(kind, 0.0)
    ]
    if short:
        raise RuntimeError(
            f"the run's Ray workers need {' and '.join(short)}: {cluster.rollout_workers} rollout workers of "
            f"{cluster.rollout_resources.cpus:g} CPU / {cluster.rollout_resources.gpus:g} GPU and "
            f"{cluster.learner_workers} learner workers of {cluster.learner_resources.cpus:g} CPU / "
            f"{cluster.learner_resources.gpus:g} GPU; lower cluster.*_workers or cluster.*_resources, or add nodes"
        )

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
    not fit pending, and the run would wait for them forever. Each worker must fit on one node, so the nodes are
    judged one by one as well as together (8 CPUs over four 2-CPU nodes hold no worker of 4). An autoscaling
    cluster is judged by the nodes it has now."""
    workers = [
        ("rollout", cluster.rollout_workers, cluster.rollout_resources.cpus, cluster.rollout_resources.gpus),
        ("learner", cluster.learner_workers, cluster.learner_resources.cpus, cluster.learner_resources.gpus),
    ]
    shapes = (
        f"{cluster.rollout_workers} rollout workers of {cluster.rollout_resources.cpus:g} CPU / "
        f"{cluster.rollout_resources.gpus:g} GPU and {cluster.learner_workers} learner workers of "
        f"{cluster.learner_resources.cpus:g} CPU / {cluster.learner_resources.gpus:g} GPU"
    )
    needed = {
        "CPU": sum(count * cpus for _, count, cpus, _ in workers),
        "GPU": sum(count * gpus for _, count, _, gpus in workers),
    }
    has = ray.cluster_resources()
    short = [
        f"{needed[kind]:g} {kind}s (it has {has.get(kind, 0.0):g})"
        for kind in needed
        if needed[kind] > has.get(kind, 0.0)
    ]
    if short:
        raise RuntimeError(
            f"the run's Ray workers need {' and '.join(short)}: {shapes}; lower cluster.*_workers or "
            "cluster.*_resources, or add nodes"
        )
    nodes = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]
    unplaced = unplaced_worker(nodes, workers)
    if unplaced is not None:
        role, cpus, gpus = unplaced
        rooms = ", ".join(f"{n.get('CPU', 0.0):g} CPU / {n.get('GPU', 0.0):g} GPU" for n in nodes)
        raise RuntimeError(
            f"the run's Ray workers do not fit on the cluster's nodes one by one: a {role} worker of {cpus:g} CPU / "
            f"{gpus:g} GPU finds no node with room left ({shapes}; the nodes: {rooms}). A worker runs on one "
            "node: lower cluster.*_resources to what one node has, or add larger nodes"
        )


def unplaced_worker(
    nodes: list[dict[str, float]], workers: list[tuple[str, int, float, float]]
) -> tuple[str, float, float] | None:
    """A worker (role, CPUs, GPUs) that finds no node with room once the larger workers are placed, each on the node
    left fullest that holds it (best fit, largest first: what Ray's scheduler can do at best, short of moving
    workers); None when every worker has a node. `workers`: (role, count, CPUs, GPUs) each."""
    room = [[node.get("CPU", 0.0), node.get("GPU", 0.0)] for node in nodes]
    queue = sorted(
        ((role, cpus, gpus) for role, count, cpus, gpus in workers for _ in range(count)),
        key=lambda worker: (worker[2], worker[1]),
        reverse=True,
    )
    for role, cpus, gpus in queue:
        fits = [left for left in room if left[0] >= cpus - 1e-9 and left[1] >= gpus - 1e-9]
        if not fits:
            return role, cpus, gpus
        chosen = min(fits, key=lambda left: (left[1] - gpus, left[0] - cpus))
        chosen[0] -= cpus
        chosen[1] -= gpus
    return None

"""Runs on a Ray cluster (`cluster.backend: ray`): a run config and the driver's copy of the policy in; a rollout
engine and a learner out, which the train loop (agentrl/run/trainer.py) uses as it uses the local ones.

connect: joining the cluster `cluster.address` names, with a clear error when Ray is not installed;
weights: the policy's current weights in Ray's object store, and which version the rollout workers hold;
rollout_workers: rollout actors (each an engine with its episodes' ToolEnvs and Tools) and the driver's engine
that splits a step's groups among them and re-runs a dead actor's share on a live one;
learner_workers: the data-parallel learner actors (torch.distributed) and the driver's learner in front of them;
worker_states: each worker's state (starting, ready, restarting, dead), which the run's `workers` events report;
ray_cluster: the three together, as one run holds them.
"""

from agentrl.cluster.ray_cluster import RayCluster

__all__ = ["RayCluster"]

"""Runs on a Ray cluster (`cluster.backend: ray`): a run config and the driver's copy of the policy in; a rollout
engine and a learner out, which the train loop (agentrl/run/trainer.py) uses as it uses the local ones.

connect: joining the cluster `cluster.address` names, with a clear error when Ray is not installed;
weights: the policy's current weights in Ray's object store, and which version the rollout workers hold;
weight_broadcast: the same weights broadcast from learner worker 0 to the rollout workers (weight_sync: broadcast);
rollout_workers: rollout actors (each an engine with its episodes' ToolEnvs and Tools) and the driver's engine
that splits a step's groups among them and re-runs a dead actor's share on a live one;
learner_workers: the learner actors (torch.distributed) and the driver's learner in front of them, each actor with a
data_parallel learner (the whole model) or a sharded_learner one (sharding: fsdp, each a shard of it);
worker_states: each worker's state (starting, ready, restarting, dead), which the run's `workers` events report;
ray_cluster: the three together, as one run holds them.
"""

from agentrl.cluster.ray_cluster import RayCluster

__all__ = ["RayCluster"]

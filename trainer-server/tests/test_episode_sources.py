"""Every engine answers the one protocol the trainer speaks to (agentrl/rollout/source.py): the same methods with
the same parameters, and the attributes the trainer reads, so no caller needs a union of engine classes."""

import inspect

import pytest
import torch
from agentrl.cluster.rollout_workers import ClusterRolloutEngine
from agentrl.contract.training_config import RolloutConfig
from agentrl.rollout.agent_engine import AgentRolloutEngine
from agentrl.rollout.hf_engine import HfRolloutEngine
from agentrl.rollout.scripted import ScriptedRolloutEngine
from agentrl.rollout.source import EpisodeSource
from agentrl.rollout.vllm_engine import VllmRolloutEngine

ENGINES = [HfRolloutEngine, ScriptedRolloutEngine, VllmRolloutEngine, AgentRolloutEngine, ClusterRolloutEngine]
METHODS = ("run", "greedy", "weights_updated", "sync_weights", "close")
ATTRIBUTES = ("description", "shares_policy_weights", "last_stats")


@pytest.mark.parametrize("engine", ENGINES, ids=lambda engine: engine.__name__)
def test_each_engine_has_every_member_of_the_episode_source(engine):
    for name in METHODS:
        assert callable(getattr(engine, name, None)), f"{engine.__name__} has no {name}()"
    wanted = list(inspect.signature(EpisodeSource.run).parameters)
    assert list(inspect.signature(engine.run).parameters) == wanted, f"{engine.__name__}.run's parameters"
    # an attribute is the class's own, or set by the constructor of the class or of one it is built on
    sources = "".join(inspect.getsource(cls) for cls in engine.__mro__ if cls.__module__.startswith("agentrl"))
    for name in ATTRIBUTES:
        assert any(hasattr(cls, name) for cls in engine.__mro__) or f"self.{name} =" in sources, (
            f"{engine.__name__} has no {name}"
        )


def test_an_engine_is_an_episode_source_at_run_time(tiny):
    model, tokenizer = tiny
    engine = HfRolloutEngine(model, tokenizer, lambda: None, RolloutConfig(), torch.device("cpu"))
    try:
        assert isinstance(engine, EpisodeSource)
        assert engine.last_stats == {} and engine.shares_policy_weights
    finally:
        engine.close()

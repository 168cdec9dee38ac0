"""The rollout engine a run config asks for (`rollout.engine`: hf, vllm, or auto; the agent engine for `agent:`), or
the scripted one."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from agentrl.contract.training_config import RolloutConfig
from agentrl.environment.env import ToolEnv
from agentrl.rollout.engine_choice import samples_with_vllm
from agentrl.rollout.hf_engine import HfRolloutEngine
from agentrl.rollout.source import EpisodeSource

if TYPE_CHECKING:
    from agentrl.environment.agent import AgentProgram
    from agentrl.rollout.scripted import ScriptedPolicy


def vllm_unavailable_reason(model: Any, device: torch.device) -> str:
    from agentrl.rollout import vllm_engine

    return vllm_engine.unsupported_reason(model, device) or "vLLM can serve this model"


def make_rollout_engine(
    model: Any,
    tokenizer: Any,
    env_factory: Callable[[], ToolEnv] | None,
    rollout_cfg: RolloutConfig,
    device: torch.device,
    concurrent_episodes: int,
    policy: ScriptedPolicy | None = None,
    agent: AgentProgram | None = None,
) -> EpisodeSource:
    """The engine `rollout.engine` asks for: hf, vllm, or auto (vllm when it is installed and can serve the
    model, else hf); with a scripted `policy`, the hf engine writing its turns; with an `agent` (run config
    `agent:`, no env), the agent engine sampling with either. `engine.description` says which."""
    if agent is not None:
        if policy is not None:
            raise ValueError("a scripted policy writes a ToolEnv's turns; an agent run samples from the model")
        from agentrl.rollout.agent_engine import AgentRolloutEngine  # aiohttp: imported by agent runs only

        vllm = None
        if _uses_vllm(model, rollout_cfg, device):
            from agentrl.rollout.vllm_engine import VllmSampler

            vllm = VllmSampler(model, tokenizer, rollout_cfg, device, concurrent_episodes)
        return AgentRolloutEngine(model, tokenizer, agent, rollout_cfg, device, vllm=vllm)
    if env_factory is None:
        raise ValueError("a rollout needs an env factory or an agent")
    if policy is not None:
        from agentrl.rollout.scripted import ScriptedRolloutEngine

        return ScriptedRolloutEngine(model, tokenizer, env_factory, rollout_cfg, device, policy=policy)
    if _uses_vllm(model, rollout_cfg, device):
        from agentrl.rollout.vllm_engine import VllmRolloutEngine

        return VllmRolloutEngine(model, tokenizer, env_factory, rollout_cfg, device, concurrent_episodes)
    return HfRolloutEngine(model, tokenizer, env_factory, rollout_cfg, device)


def _uses_vllm(model: Any, rollout_cfg: RolloutConfig, device: torch.device) -> bool:
    """rollout.engine vllm (ValueError where vLLM cannot serve the model), or auto where it can."""
    if rollout_cfg.engine == "hf":
        return False
    from agentrl.rollout import vllm_engine

    reason = vllm_engine.unsupported_reason(model, device)
    if reason is not None and rollout_cfg.engine == "vllm":
        raise ValueError(f"rollout.engine is 'vllm' but {reason}; or set rollout.engine: hf")
    return samples_with_vllm(rollout_cfg.engine, reason)

"""env.methods: an environment object whose public methods are the tools, as TRL's `environment_factory` takes it.

One instance per episode. `reset(**task)` (the task record's fields as keyword arguments, those it accepts) may
return text that follows the task's prompt; every public method with type hints and a docstring, other than
reset and the reward method, becomes a Tool as `@tool` makes one (function_tool.py); the episode's reward is
`get_reward()` (or the method, or MODULE:FUNCTION, that env.methods.reward names) read at its end.

The tools change the instance's state, which the reward reads: so they run in this process, never in a tool
worker (rollout.tool_isolation: process is refused for env.methods).
"""

from __future__ import annotations

import inspect
from typing import Any

from agentrl.contract.env_sources import MethodsEnvConfig
from agentrl.environment.env import EpisodeScore, ToolEnv
from agentrl.environment.function_tool import tool
from agentrl.environment.tool import Tool
from agentrl.environment.user_code import load_named

# The task record's key whose text (or chat messages) starts the episode, as in TRL's datasets.
PROMPT_KEY = "prompt"
NOT_TOOLS = {"reset", "close"}


def method_tools(instance: Any, reward_method: str) -> list[Tool]:
    """The instance's public methods, each as a Tool; a method without type hints or a docstring is named."""
    tools: list[Tool] = []
    for name, member in inspect.getmembers(type(instance), predicate=inspect.isfunction):
        if name.startswith("_") or name in NOT_TOOLS or name == reward_method:
            continue
        method = getattr(instance, name)
        if not inspect.getdoc(member):
            raise TypeError(f"env.methods: the tool {name} has no docstring; the model reads it to know the tool")
        tools.append(tool(method))
    if not tools:
        raise TypeError(f"env.methods: {type(instance).__name__} has no public methods to offer as tools")
    return tools


def _reward_value(value: Any, source: str) -> tuple[float, dict[str, float]]:
    if isinstance(value, EpisodeScore):
        return float(value.reward), dict(value.breakdown)
    if isinstance(value, dict):
        parts = {str(k): float(v) for k, v in value.items()}
        return parts.get("reward", sum(parts.values())), parts
    if isinstance(value, bool | int | float):
        return float(value), {}
    raise TypeError(f"{source} returned {type(value).__name__}, not a number or a dict of numbers")


class MethodsEnv(ToolEnv):
    """The ToolEnv env.methods builds; `section` is the config's env.methods as a dict."""

    def __init__(self, section: dict[str, Any]) -> None:
        super().__init__(section=section)
        self.cfg = MethodsEnvConfig.model_validate(section)
        self.instance: Any = None
        self.task: dict[str, Any] = {}
        self.method_tools: list[Tool] = []

    def reset(self, task: dict[str, Any]) -> list[dict[str, Any]]:
        self.task = task
        self.instance = load_named(self.cfg.factory, "env.methods.factory")(**self.cfg.args)
        reward_method = "" if ":" in self.cfg.reward else self.cfg.reward
        given = [t for t in self.tools if t not in self.method_tools]  # an MCP server's, from the run config
        self.method_tools = method_tools(self.instance, reward_method)
        self.tools = [*given, *self.method_tools]
        messages = [{"role": "system", "content": self.cfg.system_prompt}] if self.cfg.system_prompt else []
        prompt = task.get(PROMPT_KEY)
        if isinstance(prompt, list):
            messages += [dict(m) for m in prompt]
        elif prompt is not None:
            messages.append({"role": "user", "content": str(prompt)})
        first = self._call_reset(task)
        if first:
            if messages and messages[-1]["role"] == "user":
                messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']}\n\n{first}"}
            else:
                messages.append({"role": "user", "content": first})
        if not any(m["role"] == "user" for m in messages):
            raise ValueError(f"the task has no {PROMPT_KEY!r} and reset() returned no text: the model has no prompt")
        return messages

    def _call_reset(self, task: dict[str, Any]) -> str | None:
        reset = getattr(self.instance, "reset", None)
        if not callable(reset):
            return None
        parameters = inspect.signature(reset).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
        kwargs = {k: v for k, v in task.items() if takes_any or k in parameters}
        first = reset(**kwargs)
        return None if first is None else str(first)

    def score(self, final_text: str) -> EpisodeScore:
        if ":" in self.cfg.reward:
            value = load_named(self.cfg.reward, "env.methods.reward")(self.instance, self.task, final_text)
        else:
            method = getattr(self.instance, self.cfg.reward, None)
            if not callable(method):
                raise ValueError(f"env.methods.reward: {type(self.instance).__name__} has no method {self.cfg.reward}")
            value = method()
        reward, breakdown = _reward_value(value, f"env.methods.reward ({self.cfg.reward})")
        return EpisodeScore(reward=reward, breakdown=breakdown, final_answer=final_text or None)

    def close(self) -> None:
        close = getattr(self.instance, "close", None)
        if callable(close):
            close()
        self.instance = None

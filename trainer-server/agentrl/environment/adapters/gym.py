"""env.gym: a reset/step text environment nobody wrote for agentrl, from its factory and a config alone.

Accepted shapes, told apart by what the env returns: Gymnasium's `reset(seed=, options=) -> (obs, info)` and
`step(a) -> (obs, reward, terminated, truncated, info)`, the older `step -> (obs, reward, done, info)`,
TextWorld(Express)'s `reset(seed=, ...) -> (obs, info)` with the 4-tuple, and SkyRL-gym's BaseTextEnv
(`init(prompt) -> (messages, metadata)`, `step(a) -> {observations, reward, done, metadata}`). An observation is
text, chat messages, or a dict whose `observation_key` holds the text.

Instances: one per episode at a time. With `reuse` (the default) a finished episode's instance waits in this
process's pool, keyed by the factory and its arguments, and the next episode resets it: TextWorldExpress starts a
JVM per instance. Without it each episode makes its own and closes it at the end. The step limit is the trainer's
(rollout.max_turns); an env's own `truncated` ends the episode too.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import threading
from typing import Any

from agentrl.contract.env_sources import GymEnvConfig
from agentrl.environment.adapters.external import EnvOutcome, ExternalEnv
from agentrl.environment.user_code import load_named

# An action's JSON Schema in the tool form: the text the env's step takes.
TEXT_ACTION = {
    "type": "object",
    "properties": {"action": {"type": "string", "description": "The action, e.g. 'move east'."}},
    "required": ["action"],
}


class _Pool:
    """Idle instances by (factory, args, setup): taken by one episode, given back at its end."""

    def __init__(self) -> None:
        self.idle: dict[str, list[Any]] = {}
        self.lock = threading.Lock()

    def take(self, key: str) -> Any | None:
        with self.lock:
            waiting = self.idle.get(key)
            return waiting.pop() if waiting else None

    def give_back(self, key: str, instance: Any) -> None:
        with self.lock:
            self.idle.setdefault(key, []).append(instance)

    def close_all(self) -> None:
        with self.lock:
            instances = [instance for waiting in self.idle.values() for instance in waiting]
            self.idle.clear()
        for instance in instances:
            close_instance(instance)


def close_instance(instance: Any) -> None:
    close = getattr(instance, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # noqa: BLE001, S110 - an env that fails to close has nothing more to give
            pass
        # Closed once is closed: TextWorldExpress's __del__ closes again and, its JVM gone, prints a BrokenPipeError
        # traceback at every run's end. An instance that takes no attribute keeps its own close.
        with contextlib.suppress(AttributeError, TypeError):
            instance.close = _closed


def _closed() -> None:
    """What `close` is on an instance closed already."""


_POOL = _Pool()
atexit.register(_POOL.close_all)


def _observation(observation: Any, key: str | None) -> str | list[dict[str, Any]]:
    if isinstance(observation, dict) and key is not None:
        if key not in observation:
            raise ValueError(f"env.gym.observation_key: the observation has no {key!r} (it has {sorted(observation)})")
        observation = observation[key]
    if isinstance(observation, str):
        return observation
    if isinstance(observation, list) and all(isinstance(m, dict) and "role" in m for m in observation):
        return observation
    raise ValueError(
        f"the env's observation is a {type(observation).__name__}, not text or chat messages"
        + (" (env.gym.observation_key names the text in a dict observation)" if isinstance(observation, dict) else "")
    )


def read_step(result: Any, observation_key: str | None) -> EnvOutcome:
    """A step's result in any accepted shape."""
    if isinstance(result, dict) and "observations" in result:  # SkyRL-gym's BaseTextEnvStepOutput
        return EnvOutcome(
            _observation(result["observations"], observation_key) or [],
            float(result.get("reward") or 0.0),
            bool(result.get("done")),
            dict(result.get("metadata") or {}),
        )
    if isinstance(result, tuple) and len(result) == 5:
        observation, reward, terminated, truncated, info = result
        return EnvOutcome(
            _observation(observation, observation_key), float(reward), bool(terminated or truncated), dict(info or {})
        )
    if isinstance(result, tuple) and len(result) == 4:
        observation, reward, done, info = result
        return EnvOutcome(_observation(observation, observation_key), float(reward), bool(done), dict(info or {}))
    raise ValueError(
        "the env's step returned "
        f"{type(result).__name__}{f' of {len(result)}' if isinstance(result, tuple) else ''}; expected "
        "(obs, reward, terminated, truncated, info), (obs, reward, done, info) or SkyRL-gym's dict"
    )


def read_reset(result: Any, observation_key: str | None) -> EnvOutcome:
    """A reset's (or SkyRL init's) result: (obs, info), or the observation alone."""
    if isinstance(result, tuple) and len(result) == 2:
        observation, info = result
        return EnvOutcome(_observation(observation, observation_key), info=dict(info or {}))
    return EnvOutcome(_observation(result, observation_key))


class GymTextEnv(ExternalEnv):
    """The ToolEnv env.gym builds; `section` is the config's env.gym as a dict (it pickles with the factory)."""

    def __init__(self, section: dict[str, Any]) -> None:
        super().__init__(section=section)
        self.cfg = GymEnvConfig.model_validate(section)
        self.action_form = self.cfg.action
        self.system_prompt = self.cfg.system_prompt
        self.rewards_as = self.cfg.rewards
        self.step_cost = self.cfg.step_cost
        self.score_keys = tuple(self.cfg.score_keys)
        self.valid_actions_key = self.cfg.valid_actions_key
        self.show_valid_actions = self.cfg.show_valid_actions
        self.action_prompt = self.cfg.action_prompt
        self.pool_key = json.dumps([self.cfg.factory, self.cfg.args, self.cfg.setup], sort_keys=True, default=str)
        self.instance: Any = None

    def _instance(self) -> Any:
        instance = _POOL.take(self.pool_key) if self.cfg.reuse else None
        if instance is not None:
            return instance
        instance = load_named(self.cfg.factory, "env.gym.factory")(**self.cfg.args)
        for method, kwargs in self.cfg.setup.items():
            if not callable(getattr(instance, method, None)):
                raise ValueError(f"env.gym.setup: the env has no method {method!r}")
            getattr(instance, method)(**kwargs)
        return instance

    def begin(self, task: dict[str, Any], seed: int) -> EnvOutcome:
        self.end()  # a second reset of this ToolEnv (a re-roll) lets the first instance go
        self.instance = self._instance()
        reset_args = {**self.cfg.reset_args, **dict(task.get("reset_args") or {})}
        try:
            if callable(getattr(self.instance, "reset", None)):
                outcome = read_reset(self.instance.reset(seed=seed, **reset_args), self.cfg.observation_key)
            elif callable(getattr(self.instance, "init", None)):  # SkyRL-gym: the task's prompt starts it
                outcome = read_reset(self.instance.init(task.get("prompt", [])), self.cfg.observation_key)
            else:
                raise ValueError("the env has neither reset nor init")
        except Exception:
            close_instance(self.instance)  # a failed reset may leave it half-made: never pooled
            self.instance = None
            raise
        return outcome

    def act_in_env(self, action: Any) -> EnvOutcome:
        if self.instance is None:
            raise RuntimeError("the env was not reset")
        text = action if isinstance(action, str) else str(action.get("action", ""))
        return read_step(self.instance.step(text), self.cfg.observation_key)

    def action_parameters(self) -> dict[str, Any]:
        return TEXT_ACTION

    def state_key(self) -> str | None:
        if self.cfg.state_key is None:
            return None
        value = self.info.get(self.cfg.state_key)
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)

    def end(self) -> None:
        instance, self.instance = self.instance, None
        if instance is None:
            return
        if self.cfg.reuse:
            _POOL.give_back(self.pool_key, instance)
        else:
            close_instance(instance)

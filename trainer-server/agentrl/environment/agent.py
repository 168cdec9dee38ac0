"""The user's own agent, trained as it is (run config `agent:`): an episode function that the trainer calls once per
episode with the task, an OpenAI-compatible base URL (agentrl/rollout/endpoint.py) and that episode's key, and a
reward function that scores what it returned.

The agent's code runs as a Tool's does (environment/tool.py): in a daemon thread of the trainer's process, so an
exception is the episode's error, `sys.exit` ends nothing but the episode, and an agent that never returns is
abandoned at its timeout while the run goes on.
"""

from __future__ import annotations

import concurrent.futures
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.contract.env_sources import AgentConfig
from agentrl.environment.env import EpisodeScore, reward_problem
from agentrl.environment.tool import call_sync_or_async, describe_exception, in_daemon_thread
from agentrl.environment.user_code import EnvLoadError, load_module


class AgentFailure(Exception):
    """The agent's episode function or its reward function failed; the message is the episode's error."""


@dataclass(frozen=True)
class AgentProgram:
    run: Callable[[dict[str, Any], str, str], Any]  # run(task, base_url, api_key), sync or async
    score: Callable[[dict[str, Any], Any], Any]  # score(task, result) -> float | EpisodeScore, sync or async
    timeout_s: float
    name: str  # how errors name the episode function: module:function

    def start(
        self, task: dict[str, Any], base_url: str, api_key: str, episode_id: str
    ) -> concurrent.futures.Future[Any]:
        """Run one episode in its own daemon thread; the future holds what it returned, or an AgentFailure."""
        return in_daemon_thread(f"agent-{episode_id}", lambda: _user_call(self.name, self.run, task, base_url, api_key))

    def reward(self, task: dict[str, Any], result: Any, max_abs: float) -> EpisodeScore:
        """The episode's score, from the reward function; an AgentFailure when it raises, or gives no number or one
        beyond ±`max_abs` (rollout.max_abs_reward)."""
        score = _user_call("the reward function", self.score, task, result)
        if not isinstance(score, EpisodeScore):
            if isinstance(score, bool) or not isinstance(score, int | float):
                raise AgentFailure(
                    f"the reward function returned {type(score).__name__}; it returns a float or an EpisodeScore"
                )
            score = EpisodeScore(reward=score)
        named = {"the reward function's reward": score.reward}
        named |= {f"the reward function's breakdown {key!r}": value for key, value in score.breakdown.items()}
        for name, value in named.items():
            problem = reward_problem(value, name, max_abs)
            if problem is not None:
                raise AgentFailure(problem)
        score.reward = float(score.reward)
        return score


def _user_call(name: str, function: Callable[..., Any], *args: Any) -> Any:
    try:
        return call_sync_or_async(function, *args)
    except (SystemExit, KeyboardInterrupt) as err:
        raise AgentFailure(
            f"{name} tried to end the process ({describe_exception(err)}); it returns or raises"
        ) from None
    except Exception as err:  # noqa: BLE001 - the user's code: its failure is the episode's error
        raise AgentFailure(f"{name} raised {describe_exception(err)}") from err


def _load_function(module: str, function: str, key: str, base_dir: Path | None) -> Callable[..., Any]:
    found = getattr(load_module(module, key, base_dir), function, None)
    if not callable(found):
        raise EnvLoadError(f"{key}: {module} defines no function {function!r}")
    return found


def _takes(function: Callable[..., Any], count: int) -> bool:
    """Whether `function` can be called with `count` positional arguments."""
    try:
        inspect.signature(function).bind(*range(count))
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): its call will tell
        return True
    return True


def check_episode_function(function: Callable[..., Any], name: str) -> None:
    """The episode function takes (task, base_url, api_key): the endpoint admits only requests carrying the
    episode's key, so a function that cannot receive it could never be answered."""
    if not _takes(function, 3):
        raise EnvLoadError(
            f"agent.function: {name} must take (task, base_url, api_key): the endpoint answers only requests that "
            "carry their episode's key; pass it to your client, e.g. OpenAI(base_url=base_url, api_key=api_key)"
        )


def load_agent(config: AgentConfig, base_dir: Path | None = None) -> AgentProgram:
    """The agent a run config's `agent:` names (paths relative to `base_dir`, else already absolute)."""
    reward_module, reward_function = config.reward.rsplit(":", 1)
    name = f"{Path(config.module).name}:{config.function}"
    run = _load_function(config.module, config.function, "agent.module", base_dir)
    check_episode_function(run, name)
    return AgentProgram(
        run=run,
        score=_load_function(reward_module, reward_function, "agent.reward", base_dir),
        timeout_s=config.timeout_s,
        name=name,
    )

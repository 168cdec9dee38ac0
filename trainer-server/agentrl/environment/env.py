"""ToolEnv: the interpreter. It starts an episode from a task, reads each turn's tool outcomes
("what happened") and says what they mean: the next messages, a process reward, done.
At the end it scores the episode with an outcome reward and a named breakdown.

One ToolEnv instance serves one episode, so per-episode state can live on `self`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from agentrl.environment.tool import Tool, ToolCallOutcome


class EnvFull(Exception):  # noqa: N818 - a state the rollout waits out, not a failure
    """Raised by `reset` when the env has no room for another episode now (a server's sessions are all held by this
    process's episodes): the rollout plays the episodes it has started, then starts this one again."""


def as_reward(value: Any, name: str) -> float:
    """A reward as the float an episode stores, from any number an env or reward function returns (an int, a numpy or
    torch scalar); a ValueError naming it (`name`, e.g. "score()'s reward") when it is no number or too large for a
    float."""
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{name} is an integer too large for a float") from None
    except (TypeError, ValueError):
        raise ValueError(f"{name} is a {type(value).__name__}, not a number") from None


def reward_problem(value: Any, name: str, max_abs: float) -> str | None:
    """Why `value` cannot be trained on as a reward, naming it (`name`): no number (`as_reward`), NaN, infinite, or
    beyond ±`max_abs` (rollout.max_abs_reward); None when it can."""
    try:
        reward = as_reward(value, name)
    except ValueError as err:
        return str(err)
    if not math.isfinite(reward):
        return f"{name} is {reward}, not a finite number"
    if abs(reward) > max_abs:
        return f"{name} is {reward:g}, beyond ±{max_abs:g} (rollout.max_abs_reward)"
    return None


@dataclass
class StepResult:
    messages: list[dict[str, Any]]  # appended to the chat (role "tool" or "user"); empty when done
    reward: float = 0.0  # process reward of the turn; lands on the turn's last sampled token
    done: bool = False


@dataclass
class EpisodeScore:
    reward: float  # outcome reward; lands on the episode's last sampled token
    breakdown: dict[str, float] = field(default_factory=dict)  # e.g. {"em": 1, "f1": 0.8, "format": 0.5}
    final_answer: str | None = None


def format_outcome(call: ToolCallOutcome) -> str:
    """The default text a model sees for one call: its error, or its result (strings as they are)."""
    if call.error is not None:
        return f"Error: {call.error}"
    if isinstance(call.result, str):
        return call.result
    return json.dumps(call.result, ensure_ascii=False)


class ToolEnv:
    """Subclass: set `self.tools` in `__init__(**args)` (args come from the run config's `env.args`),
    implement `reset` and `score`; override `step` to give process rewards or custom observations.

    An `__init__` that declares a `data_files` parameter also receives the absolute paths of every data file
    the run or evaluation reads (data.train, data.eval, `agentrl eval --data`), e.g. to index them for search.

    An env whose Tools answer at random (a service that is busy now and then) draws from `random.Random(
    self.episode_seed)`: the rollout sets `episode_seed` before `reset`, from the run's seed and the episode's
    place in its step, so a step's randomness replays exactly on resume and differs between a group's samples.

    Step-level algorithms (GiGPO) compare the steps that start from the same state: `state_key` names it."""

    tools: list[Tool] = []
    episode_seed: int = 0

    def __init__(self, **args: Any) -> None:
        self.args = args

    def reset(self, task: dict[str, Any]) -> list[dict[str, Any]]:
        """The episode's initial chat messages for this task record."""
        raise NotImplementedError(f"{type(self).__name__}.reset is not implemented")

    def step(self, assistant_text: str, calls: list[ToolCallOutcome]) -> StepResult:
        """After every assistant turn. Default: a turn without tool calls ends the episode (the model
        answered); otherwise each call's result or error goes back as one "tool" message."""
        if not calls:
            return StepResult(messages=[], done=True)
        return StepResult(messages=[{"role": "tool", "content": format_outcome(c)} for c in calls])

    def score(self, final_text: str) -> EpisodeScore:
        """The outcome reward of the finished (or truncated) episode; `final_text` is the last assistant turn."""
        raise NotImplementedError(f"{type(self).__name__}.score is not implemented")

    def state_key(self) -> str | None:
        """The state the next turn starts from, as a short string: called after `reset` and after every `step`.
        Two steps of a group's episodes with equal keys are one GiGPO anchor state, so the key must say everything
        that decides what a good next action is (e.g. "parcel at desk, locker known"), and nothing episode-specific
        beyond it. None (the default): the observation the model last read stands for the state (the prompt for the
        first turn), as GiGPO does for text environments whose observation is the state."""
        return None

    def valid_actions(self) -> list[str] | None:
        """Optional: the actions valid in the state the next turn starts from (a text game's list), called when
        `state_key` is; the trajectory keeps them with that turn. None (the default): the env does not say."""
        return None

    def close(self) -> None:
        """The episode is over (scored, or its env dropped): release what this instance holds (a process, a
        connection). Called once; the default holds nothing."""

    def scripted_turns(self, task: dict[str, Any]) -> list[str] | None:
        """Optional: assistant texts for a model-free smoke episode (`agentrl env check`)."""
        return None

    def tool_map(self) -> dict[str, Tool]:
        names = [t.name for t in self.tools]
        duplicates = {n for n in names if names.count(n) > 1}
        if duplicates:
            raise ValueError(f"{type(self).__name__} has several tools named {sorted(duplicates)}")
        return {t.name: t for t in self.tools}

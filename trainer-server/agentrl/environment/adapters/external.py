"""What the adapters of reset/step environments (gym.py, openenv.py) share: the episode's prompt from the env's
first observation, the action read from the model's turn (its text, or a call of the tool `act`), each step's
reward as that turn's process reward (or summed into the outcome), and the score from the env's last info.

In the `tool` form the Tool `act` runs the env's step and reports its raw outcome ("what happened": observation,
reward, done, info as JSON); the ToolEnv reads that result back and says what it means, so a Tool run in a worker
process (rollout.tool_isolation: process) gives the same episode. In the `text` form the ToolEnv runs the step
itself: there is no tool call to record, so the trajectory keeps the observation, reward and valid actions per turn.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any

import pydantic_core

from agentrl.contract.env_sources import ActionForm
from agentrl.environment.env import EpisodeScore, StepResult, ToolEnv
from agentrl.environment.tool import Tool, ToolCallOutcome

ACT_TOOL = "act"
# What a turn without a call of `act` gets back (tool form): the env did not move, and the model is told why.
NO_ACTION = f"No action was taken: call the tool `{ACT_TOOL}` with your action."
ENV_RETURN = "env_return"  # the breakdown's name for the sum of the env's own rewards
ENV_STEPS = "env_steps"  # and for the number of steps the episode took in the env


def _json_fallback(value: Any) -> Any:
    """A value JSON cannot hold: a NumPy scalar or array (a Gymnasium env's info: np.bool_, np.int64, an array of
    actions) as the Python value or list it stands for, anything else as its text."""
    to_list = getattr(value, "tolist", None)
    return to_list() if callable(to_list) and not isinstance(value, type) else str(value)


def jsonable(value: Any) -> Any:
    """An env's info or observation as JSON values; what JSON cannot hold becomes its text."""
    return pydantic_core.to_jsonable_python(value, fallback=_json_fallback)


@dataclass
class EnvOutcome:
    """One reset or step of an external env, as an adapter reads it."""

    observation: str | list[dict[str, Any]]  # text, or chat messages to append as they are
    reward: float = 0.0
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    def to_result(self) -> dict[str, Any]:
        """The `act` Tool's result: what happened, as JSON."""
        return {"observation": self.observation, "reward": self.reward, "done": self.done, "info": self.info}

    @classmethod
    def from_result(cls, result: Any) -> EnvOutcome:
        if not isinstance(result, dict) or "observation" not in result:
            raise ValueError(f"the {ACT_TOOL} tool returned {result!r}, not an outcome")
        return cls(
            result["observation"],
            float(result.get("reward") or 0.0),
            bool(result.get("done")),
            dict(result.get("info") or {}),
        )


def task_seed(task: dict[str, Any]) -> int:
    """The seed an episode's env is reset with: the task's `seed`, else a number made from the task itself, so
    the episodes of one group (one task) start from the same state and a resumed run starts them alike."""
    if "seed" in task:
        return int(task["seed"])
    digest = hashlib.sha256(json.dumps(task, sort_keys=True, default=str).encode()).digest()
    return int.from_bytes(digest[:4], "big")


_ACTION_LINE = re.compile(r"^\s*(?:>\s*|action\s*:\s*|[-*]\s+)?[`\"']?(.*?)[`\"'.]?\s*$", re.IGNORECASE)
_NUMBER = re.compile(r"^\s*(\d+)\b")
_NUMBERED_LINE = re.compile(r"^\s*\d+\s*[.):]\s*(.+)$")  # "3. take coin", as the numbered list shows it


def _plain(text: str) -> str:
    return " ".join(text.lower().split())


def text_action(text: str, valid: list[str] | None, numbered: bool = False) -> str:
    """The action a text turn names: its first non-empty line without quotes, a prompt mark or a full stop. Where
    the env lists valid actions: the one it equals up to case and spacing; with a numbered list, a line copied from
    it ("3. take coin") names the action it spells out, whatever its number, and a number alone the action it
    numbers; else the longest one it starts with ("move north to the pantry"). Otherwise the line as it is, and the
    env says what it makes of it."""
    line = next((line for line in text.splitlines() if line.strip()), "")
    match = _ACTION_LINE.match(line)
    action = match.group(1).strip() if match else line.strip()
    valid = valid or []
    spelled = _NUMBERED_LINE.match(action) if numbered else None
    for said in [action, *([spelled.group(1)] if spelled else [])]:
        for candidate in valid:
            if _plain(candidate) == _plain(said.rstrip(".")):
                return candidate
    number = _NUMBER.match(action) if numbered else None
    if number and 1 <= int(number.group(1)) <= len(valid):
        return valid[int(number.group(1)) - 1]
    starts = [candidate for candidate in valid if _plain(action).startswith(_plain(candidate) + " ")]
    return max(starts, key=len) if starts else action


class ActTool(Tool):
    """`act`: runs one action in this episode's env and reports the raw outcome. Its parameters are the env's
    action (one string for a text env; an OpenEnv server's action schema)."""

    name = ACT_TOOL
    description = "Take one action in the environment; the result is what the environment answers."

    def __init__(self, env: ExternalEnv, parameters: dict[str, Any]) -> None:
        self.env, self.parameters = env, parameters  # an instance's schema (Tool.schema reads self.parameters)
        self._one_at_a_time = threading.Lock()  # several calls in one turn run concurrently; the env takes one

    def execute(self, **arguments: Any) -> Any:
        with self._one_at_a_time:
            return self.env.take(arguments).to_result()


class ExternalEnv(ToolEnv):
    """A ToolEnv over an env with reset and step. A subclass opens the env (`begin`), acts in it (`act_in_env`),
    lists its valid actions and names its state from the last info, and lets it go (`end`)."""

    action_form: ActionForm = "text"
    system_prompt: str | None = None
    rewards_as: str = "step"  # "step": process rewards; "episode": their sum is the outcome
    step_cost: float = 0.0  # taken off each env step's reward (GymEnvConfig.step_cost)
    score_keys: tuple[str, ...] = ()
    valid_actions_key: str | None = None
    show_valid_actions: str = "hidden"  # hidden, list, numbered (GymEnvConfig.show_valid_actions)
    action_prompt: str | None = None  # a line after each observation that asks for the action

    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        self.rewards: list[float] = []
        self.info: dict[str, Any] = {}
        self.last_action: str | None = None

    @abstractmethod
    def begin(self, task: dict[str, Any], seed: int) -> EnvOutcome:
        """Start the episode's env for this task at this seed: its first observation."""

    @abstractmethod
    def act_in_env(self, action: Any) -> EnvOutcome:
        """One step: `action` is the text (text form) or the `act` call's arguments (tool form)."""

    @abstractmethod
    def action_parameters(self) -> dict[str, Any]:
        """The `act` tool's JSON Schema (tool form)."""

    @abstractmethod
    def end(self) -> None:
        """The episode is over: release the env."""

    # The ToolEnv's side.
    def reset(self, task: dict[str, Any]) -> list[dict[str, Any]]:
        self.rewards, self.info, self.last_action = [], {}, None
        outcome = self.begin(task, task_seed(task))
        self.info = jsonable(outcome.info)
        given = [t for t in self.tools if not isinstance(t, ActTool)]  # an MCP server's, from the run config
        self.tools = [*given, ActTool(self, self.action_parameters())] if self.action_form == "tool" else given
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return system + self.messages(outcome, "user")

    def take(self, action: Any) -> EnvOutcome:
        """Act in the env and remember what it said (the Tool's call, or the text turn's step)."""
        self.last_action = action if isinstance(action, str) else json.dumps(action, ensure_ascii=False)
        outcome = self.act_in_env(action)
        outcome.info = jsonable(outcome.info)
        return outcome

    def step(self, assistant_text: str, calls: list[ToolCallOutcome]) -> StepResult:
        if self.action_form == "text":
            action = text_action(assistant_text, self.valid_actions(), self.show_valid_actions == "numbered")
            outcomes = [self.take(action)]
            role = "user"
        elif not calls:
            return StepResult(messages=[{"role": "user", "content": NO_ACTION}])
        else:
            outcomes = [
                EnvOutcome(f"Error: {call.error}") if call.error is not None else EnvOutcome.from_result(call.result)
                for call in calls
            ]
            role = "tool"
        for outcome in outcomes:
            self.rewards.append(outcome.reward)
            if outcome.info:
                self.info = outcome.info
        reward = sum(o.reward - self.step_cost for o in outcomes) if self.rewards_as == "step" else 0.0
        done = any(o.done for o in outcomes)
        messages = [m for o in outcomes for m in self.messages(o, role, show_actions=not done)]
        return StepResult(messages=messages, reward=reward, done=done)  # when done: kept as the turn's observation

    def messages(self, outcome: EnvOutcome, role: str, show_actions: bool = True) -> list[dict[str, Any]]:
        """What the model reads of an outcome: chat messages as they are, else the text with the valid actions."""
        if isinstance(outcome.observation, list):
            return list(outcome.observation)
        text = str(outcome.observation)
        valid = self.valid_actions()
        if show_actions and valid and self.show_valid_actions == "list":
            text = f"{text.rstrip()}\n\nValid actions: {', '.join(valid)}"
        elif show_actions and valid and self.show_valid_actions == "numbered":
            lines = "\n".join(f"{number}. {action}" for number, action in enumerate(valid, start=1))
            text = f"{text.rstrip()}\n\nValid actions:\n{lines}"
        if show_actions and self.action_prompt:
            text = f"{text.rstrip()}\n\n{self.action_prompt}"
        return [{"role": role, "content": text}]

    def valid_actions(self) -> list[str] | None:
        listed = self.info.get(self.valid_actions_key) if self.valid_actions_key else None
        return [str(action) for action in listed] if isinstance(listed, list) else None

    def score(self, final_text: str) -> EpisodeScore:
        total = sum(self.rewards)
        breakdown = {ENV_RETURN: total, ENV_STEPS: float(len(self.rewards))}
        for key in self.score_keys:
            value = self.info.get(key)
            if isinstance(value, bool | int | float):
                breakdown[key] = float(value)
        return EpisodeScore(
            reward=total - self.step_cost * len(self.rewards) if self.rewards_as == "episode" else 0.0,
            breakdown=breakdown,
            final_answer=self.last_action,
        )

    def close(self) -> None:
        self.end()

"""Parcel lockers: an agent that must take several dependent steps in a building that changes and answers
unreliably. The multi-step recipe (`agentrl demo --config <this folder>/lockers_grpo.agentrl.yaml`).

A task names a recipient ("Deliver the parcel to Rosa."). The locker number is not in the request: only the
building's directory knows it, so the agent must
  1. `<find>Rosa</find>`: look the recipient up (the directory answers "Rosa: locker 11"), and then
  2. `<put>11</put>`: put the parcel in that locker, with the number the first call revealed.
The building has state the agent changes: the parcel starts at the front desk, and a `put` delivers it, to the right
locker or the wrong one, and ends the episode (two `put`s in one turn: the parcel ends in the last one named). The
directory is busy at random (`busy_rate` of the lookups, 0.25 by default: "The directory is busy. Try again."),
seeded per episode, so retrying a failed lookup is a skill the agent can learn; the worked example never shows it.

Reward: 1 when, at the end of the episode, the parcel is in the recipient's locker, else 0 - the building's final
state, whatever the agent wrote. Breakdown: `accuracy` (the reward), `looked_up` (the directory revealed the
recipient's locker), `put` (a parcel was put in some locker), for diagnosis. Process rewards (`process_reward`,
off by default because any per-step reward can be earned without delivering): +process_reward on the turn whose
lookup first reveals the recipient's locker, -process_reward on a turn that puts the parcel in a wrong locker.
An answer without a call ends the episode too (the parcel stays at the desk unless it was delivered).

State key (for GiGPO's anchor states): where the parcel is and whether the recipient's locker is known - a failed
lookup leaves the state as it was, so a retry is compared with the first attempts of the other samples.
The Tools act on the env's own building; in a tool worker process they act on the worker's copy (reset with the same
task and seed), and the env follows their outcomes (`follow`).
"""

from __future__ import annotations

import random
import re
import threading
from typing import Any

from agentrl import EpisodeScore, StepResult, Tool, ToolCallOutcome, ToolEnv
from agentrl.environment.tool import ToolFailure

SYSTEM_PROMPT = "You deliver parcels in a building. Find the recipient's locker number, then put the parcel in it."
# The worked example, as real chat turns before the task. Bob is never a task's recipient (tasks.py).
EXAMPLE = [
    {"role": "user", "content": "Deliver the parcel to Bob."},
    {"role": "assistant", "content": "<find>Bob</find>"},
    {"role": "tool", "content": "Bob: locker 12"},
    {"role": "assistant", "content": "<put>12</put>"},
    {"role": "tool", "content": "The parcel is in locker 12."},
]
LOCKERS = range(10, 100)
BUSY = "The directory is busy. Try again."


class Building:
    """One episode's world: who has which locker, where the parcel is, and the directory's random busy spells."""

    def __init__(self, task: dict[str, Any], seed: int, busy_rate: float) -> None:
        self.directory = {str(name).casefold(): (str(name), int(n)) for name, n in task["directory"].items()}
        self.recipient = str(task["recipient"])
        self.parcel: int | None = None  # None: at the front desk
        self.recipient_locker_known = False
        self.seed, self.busy_rate = seed, busy_rate
        self.lookups: dict[str, int] = {}
        self.lock = threading.Lock()

    @property
    def target(self) -> int:
        return self.directory[self.recipient.casefold()][1]

    def is_busy(self, name: str) -> bool:
        """Whether this lookup finds the directory busy: a function of the episode's seed, the name asked for and
        how often it was asked, so an episode replays exactly whatever order concurrent calls run in."""
        with self.lock:
            attempt = self.lookups[name] = self.lookups.get(name, 0) + 1
        return random.Random(f"{self.seed}:{name}:{attempt}").random() < self.busy_rate


class Find(Tool):
    name = "find"
    description = "Look up a person's locker number in the building directory."
    parameters = {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "the person's name"}},
        "required": ["name"],
        "additionalProperties": False,
    }

    def __init__(self, env: LockersEnv) -> None:
        self.env = env

    def execute(self, name: str) -> str:
        building = self.env.building
        asked = name.strip().casefold()
        if building.is_busy(asked):
            raise ToolFailure(BUSY)
        if asked not in building.directory:
            raise ToolFailure(f"No one called {name.strip()} lives here.")
        spelled, locker = building.directory[asked]
        if asked == building.recipient.casefold():
            building.recipient_locker_known = True
        return f"{spelled}: locker {locker}"


class Put(Tool):
    name = "put"
    description = "Put the parcel in a locker, by the locker's number."
    parameters = {
        "type": "object",
        "properties": {"locker": {"type": "string", "description": "the locker number"}},
        "required": ["locker"],
        "additionalProperties": False,
    }

    def __init__(self, env: LockersEnv) -> None:
        self.env = env

    def execute(self, locker: str) -> str:
        number = re.fullmatch(r"\s*(?:locker\s*)?#?\s*(\d{1,4})\s*", locker, re.IGNORECASE)
        if number is None:
            raise ToolFailure(f"{locker.strip()!r} is not a locker number; write the number, e.g. <put>12</put>.")
        if int(number.group(1)) not in LOCKERS:
            raise ToolFailure(f"There is no locker {number.group(1)}: lockers are numbered 10 to 99.")
        self.env.building.parcel = int(number.group(1))
        return f"The parcel is in locker {self.env.building.parcel}."


class LockersEnv(ToolEnv):
    def __init__(self, busy_rate: float = 0.25, process_reward: float = 0.0, **args: Any) -> None:
        if not 0.0 <= busy_rate < 1.0:
            raise ValueError(f"busy_rate must be in [0, 1), got {busy_rate}")
        super().__init__(busy_rate=busy_rate, process_reward=process_reward, **args)
        self.busy_rate, self.process_reward = busy_rate, process_reward
        self.tools = [Find(self), Put(self)]
        self.building: Building | None = None

    def reset(self, task: dict[str, Any]) -> list[dict[str, Any]]:
        self.building = Building(task, self.episode_seed, self.busy_rate)
        self.after_last_step: tuple[bool, int | None] = (False, None)  # (locker known, parcel) when the last step ended
        if self.building.recipient.casefold() not in self.building.directory:
            raise ValueError(
                f"task {task.get('id')!r}: the recipient {self.building.recipient!r} is not in its directory"
            )
        return [{"role": "system", "content": SYSTEM_PROMPT}, *EXAMPLE, {"role": "user", "content": task["question"]}]

    def step(self, assistant_text: str, calls: list[ToolCallOutcome]) -> StepResult:
        assert self.building is not None  # reset came first
        known_before, parcel_before = self.after_last_step  # the Tools have already changed the building
        self.follow(calls)
        result = super().step(assistant_text, calls)
        reward = 0.0
        if self.building.recipient_locker_known and not known_before:
            reward += self.process_reward
        if self.building.parcel != parcel_before and self.building.parcel != self.building.target:
            reward -= self.process_reward
        result.reward = reward
        result.done = result.done or self.building.parcel != parcel_before  # a delivery ends the episode
        self.after_last_step = (self.building.recipient_locker_known, self.building.parcel)
        return result

    def follow(self, calls: list[ToolCallOutcome]) -> None:
        """The building as the calls' outcomes say they left it. With the default thread isolation the Tools changed
        this very building already; in a tool worker process (`rollout.tool_isolation: process`, `agentrl env
        check`) they changed the worker's copy, and this keeps the env's in step with it."""
        assert self.building is not None
        for call in calls:
            if call.error is not None or call.arguments is None:
                continue
            if (
                call.name == "find"
                and str(call.arguments["name"]).strip().casefold() == self.building.recipient.casefold()
            ):
                self.building.recipient_locker_known = True
            if call.name == "put":
                self.building.parcel = int(str(call.result).rsplit(" ", 1)[-1].rstrip("."))

    def state_key(self) -> str:
        assert self.building is not None
        where = "at the desk" if self.building.parcel is None else f"in locker {self.building.parcel}"
        known = "known" if self.building.recipient_locker_known else "unknown"
        return f"parcel {where}; recipient's locker {known}"

    def score(self, final_text: str) -> EpisodeScore:
        assert self.building is not None
        delivered = self.building.parcel == self.building.target
        return EpisodeScore(
            reward=float(delivered),
            breakdown={
                "accuracy": float(delivered),
                "looked_up": float(self.building.recipient_locker_known),
                "put": float(self.building.parcel is not None),
            },
            final_answer=None if self.building.parcel is None else f"locker {self.building.parcel}",
        )

    def scripted_turns(self, task: dict[str, Any]) -> list[str]:
        locker = task["directory"][task["recipient"]]
        return [f"<find>{task['recipient']}</find>", f"<put>{locker}</put>"]

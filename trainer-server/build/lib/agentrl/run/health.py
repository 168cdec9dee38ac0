"""Says, while a run trains, when it cannot learn and what to change (event `health`, protocol/README.md).

Each step's metrics go through every check. A check that holds for CONSECUTIVE_STEPS steps in a row
starts an alert; an alert is reported once when it starts and once when it clears, never every step,
and it clears only after CONSECUTIVE_STEPS steps in a row without its condition, so a condition that
comes and goes does not start a new alert (and a new notification in the editor) every other step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# One bad step can be sampling luck; two in a row is a pattern, and still early enough to save the run
# (a run that can never learn warns at step 2).
CONSECUTIVE_STEPS = 2
# A group whose samples all earn the same reward says nothing about which behaviour is better (GRPO and
# RLOO give it zero advantage). With three groups in four flat, the update rests on a quarter of the batch:
# mostly noise, and usually a sign the task is out of reach (or trivially easy) for the model.
ZERO_VARIANCE_SHARE = 0.75


@dataclass(frozen=True)
class HealthCheck:
    code: str  # machine-readable, the `code` of the `health` event (enum in rpc.schema.json#healthEvent)
    title: str  # what is wrong, in a few words
    holds: Callable[[dict[str, float]], bool]
    explain: Callable[[dict[str, float]], str]  # with this step's figures, and why it stops learning
    fix: str
    metrics: tuple[str, ...]  # the figures the check reads, reported with the alert


CHECKS = (
    HealthCheck(
        code="zero_variance_groups",
        title="zero reward variance in most groups",
        holds=lambda m: m["health/zero_variance_groups"] >= ZERO_VARIANCE_SHARE,
        explain=lambda m: (f"{m['health/zero_variance_groups']:.0%} of this step's groups (mean reward "
                           f"{m['reward/mean']:.3f}) gave every sample of the prompt the same reward, so their "
                           "advantages are zero and the update learns nothing from them"),
        fix=("raise rollout.temperature or rollout.group_size so samples differ, make the tasks easier, or give "
             "partial credit in the reward so a near miss scores above a failure"),
        metrics=("health/zero_variance_groups", "reward/mean"),
    ),
    HealthCheck(
        code="no_tool_calls",
        title="no tool calls",
        holds=lambda m: m["tools/offered"] > 0 and m["tools/calls"] == 0,
        explain=lambda m: (f"the env offers {m['tools/offered']:.0f} tool(s) but no episode of this step tried "
                           "a call, so there is no tool use for the reward to reinforce"),
        fix=("show the call format in the prompt (a worked example: a call and its result), or set "
             "rollout.tool_format to one the model knows (auto follows its chat template, hermes is "
             "<tool_call>{json}</tool_call>); the replay shows what the model writes instead"),
        metrics=("tools/offered", "tools/calls"),
    ),
    HealthCheck(
        code="all_truncated",
        title="every episode truncated",
        holds=lambda m: m["health/truncation_rate"] >= 1.0,
        explain=lambda _: ("every episode of this step ran out of turns or context before it ended, so what is "
                           "scored is a cut-off episode, not an answer"),
        fix=("raise rollout.max_new_tokens, rollout.max_turns or rollout.max_context (the replay shows where "
             "episodes stop), or have the ToolEnv end an episode (done=True) once it is answered"),
        metrics=("health/truncation_rate",),
    ),
)


@dataclass
class _Streak:
    active: bool = False
    since_step: int = 0  # first step of the streak that started the alert
    held: int = 0  # steps in a row the condition held
    absent: int = 0  # steps in a row it did not, while the alert is active


class HealthMonitor:
    def __init__(self) -> None:
        self._streaks = {check.code: _Streak() for check in CHECKS}

    @property
    def active(self) -> list[str]:
        """Codes of the alerts in force, in CHECKS order."""
        return [code for code, streak in self._streaks.items() if streak.active]

    def observe(self, step: int, metrics: dict[str, float]) -> list[dict[str, Any]]:
        """The data of the `health` events this step causes: alerts that start, and alerts that clear."""
        events = []
        for check in CHECKS:
            streak = self._streaks[check.code]
            if check.holds(metrics):
                if not streak.active and streak.held == 0:
                    streak.since_step = step
                streak.held, streak.absent = streak.held + 1, 0
                if not streak.active and streak.held >= CONSECUTIVE_STEPS:
                    streak.active = True
                    events.append(self._event(check, streak, step, metrics, resolved=False))
            else:
                streak.held = 0
                if streak.active:
                    streak.absent += 1
                    if streak.absent >= CONSECUTIVE_STEPS:
                        streak.active = False
                        events.append(self._event(check, streak, step, metrics, resolved=True))
        return events

    @staticmethod
    def _event(check: HealthCheck, streak: _Streak, step: int, metrics: dict[str, float],
               resolved: bool) -> dict[str, Any]:
        message = (f"{check.title}: resolved (not seen for {CONSECUTIVE_STEPS} steps)" if resolved else
                   f"{check.title} since step {streak.since_step}: {check.explain(metrics)}")
        return {"code": check.code, "resolved": resolved, "step": step, "since_step": streak.since_step,
                "message": message, "fix": check.fix, "metrics": {name: metrics[name] for name in check.metrics}}

    # A checkpoint holds the streaks, so a resumed run reports exactly the events an unbroken one would.
    def state_dict(self) -> dict[str, dict[str, Any]]:
        return {code: vars(streak).copy() for code, streak in self._streaks.items()}

    def load_state_dict(self, state: dict[str, dict[str, Any]]) -> None:
        for code, values in state.items():
            if code in self._streaks:  # a check since removed is forgotten
                self._streaks[code] = _Streak(**values)

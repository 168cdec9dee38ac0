"""Says, while a run trains, when it cannot learn or has gone wrong, and what to change (event `health`,
protocol/README.md). The CLI prints the same alerts the editor shows.

Each step's figures go through every rule (health_rules.RULES, one per code of rpc.schema.json#/$defs/healthCode; the
thresholds are the run config's `health:` section). A per-step rule that holds for
`health.consecutive_steps` steps in a row starts an alert; an alert is reported once when it starts and
once when it clears, never every step, and it clears only after as many steps in a row without its
condition, so a condition that comes and goes does not start a new alert (and a new notification in the
editor) every other step. A rule with nothing to judge at a step (no KL without a reference, no held-out
score between evaluations) leaves its streak as it is; the held-out rule is judged at evaluations only, and one
evaluation starts or clears its alert. A non-finite or huge reward, or a non-finite loss or gradient, is not a
trend: it stops the run, and `non_finite_event` reports it at once, with severity error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentrl.contract.health_config import HealthConfig
from agentrl.run.health_evidence import History, StepEvidence
from agentrl.run.health_rules import RULE_BY_CODE, RULES, Finding, Rule


@dataclass
class _Streak:
    active: bool = False
    since_step: int = 0  # first step of the streak that started the alert
    held: int = 0  # steps in a row the condition held
    absent: int = 0  # steps in a row it did not, while the alert is active


class HealthMonitor:
    def __init__(self, config: HealthConfig | None = None) -> None:
        self.config = config or HealthConfig()
        self._streaks = {rule.code: _Streak() for rule in RULES if rule.judge is not None}
        self.history = History()

    @property
    def active(self) -> list[str]:
        """Codes of the alerts in force, in RULES order."""
        return [code for code, streak in self._streaks.items() if streak.active]

    def observe(self, evidence: StepEvidence) -> list[dict[str, Any]]:
        """The data of the `health` events this step causes: alerts that start, and alerts that clear."""
        events = []
        for rule in RULES:
            if rule.judge is None or (rule.reads_rollouts and not evidence.sampled):
                continue
            verdict = rule.judge(evidence, self.config, self.history)
            if verdict is None:
                continue
            streak = self._streaks[rule.code]
            needed = 1 if rule.per_evaluation else self.config.consecutive_steps
            if isinstance(verdict, Finding):
                if not streak.active and streak.held == 0:
                    streak.since_step = evidence.step
                streak.held, streak.absent = streak.held + 1, 0
                if not streak.active and streak.held >= needed:
                    streak.active = True
                    events.append(
                        _event(
                            rule,
                            streak.since_step,
                            evidence.step,
                            resolved=False,
                            message=f"{rule.title} since step {streak.since_step}: {verdict.explanation}",
                            metrics=verdict.metrics,
                            trajectory_ids=verdict.trajectory_ids,
                        )
                    )
            else:
                streak.held = 0
                if streak.active:
                    streak.absent += 1
                    if streak.absent >= needed:
                        streak.active = False
                        events.append(
                            _event(
                                rule,
                                streak.since_step,
                                evidence.step,
                                resolved=True,
                                message=f"{rule.title}: resolved (not seen for {needed} "
                                f"{'evaluation' if rule.per_evaluation else 'step'}{'s' if needed > 1 else ''})",
                                metrics={
                                    name: evidence.metrics[name] for name in rule.reads if name in evidence.metrics
                                },
                                trajectory_ids=[],
                            )
                        )
        self.history.remember(evidence.step, evidence.metrics, self.config.window)
        return events

    # A checkpoint holds the streaks and the history, so a resumed run reports exactly the events an unbroken one would.
    def state_dict(self) -> dict[str, Any]:
        return {
            "health": {code: vars(streak).copy() for code, streak in self._streaks.items()},
            "health_history": vars(self.history).copy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for code, values in state.get("health", {}).items():  # checkpoints from before health checks have none
            if code in self._streaks:  # a check since removed is forgotten
                self._streaks[code] = _Streak(**values)
        self.history = History(**state.get("health_history", {}))


def non_finite_event(step: int, explanation: str) -> dict[str, Any]:
    """The `health` event of a step stopped by a NaN, infinite or huge reward, or a NaN or infinite loss or gradient
    (learner.NonFiniteError): reported at once, since the run stops. No trajectory ids: that step's trajectories are
    not written (a non-finite reward cannot be stored as JSON); `explanation` names the episode when one is to
    blame."""
    rule = RULE_BY_CODE["non_finite"]
    return _event(
        rule, step, step, resolved=False, message=f"{rule.title}: {explanation}", metrics={}, trajectory_ids=[]
    )


def _event(
    rule: Rule,
    since_step: int,
    step: int,
    *,
    resolved: bool,
    message: str,
    metrics: dict[str, float],
    trajectory_ids: list[str],
) -> dict[str, Any]:
    return {
        "code": rule.code,
        "severity": rule.severity,
        "resolved": resolved,
        "step": step,
        "since_step": since_step,
        "message": message,
        "fix": rule.fix,
        "metrics": metrics,
        "trajectory_ids": trajectory_ids,
    }

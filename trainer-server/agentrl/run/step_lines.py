"""What `agentrl train` prints under its progress bar: each step's line (reward, turns, tool failures, truncation,
logprob gap, the policy loss, eval, time, the alerts in force) and each `health` event's, with its fix and the episodes to look at."""

from __future__ import annotations

from typing import Any


def summary_line(step: int, total: int, metrics: dict[str, float], warnings: list[str]) -> str:
    """A step's metrics in one line, as the CLI prints it under the progress bar, with the active alerts' codes."""
    return (
        f"step {step}/{total}  reward {metrics['reward/mean']:.3f}±{metrics['reward/std']:.3f}  "
        f"turns {metrics['episode/turns_mean']:.2f}  tool-fail {metrics['health/tool_failure_rate']:.2f}  "
        f"trunc {metrics['health/truncation_rate']:.2f}  "
        # no gap where nothing was sampled (sft) or the update trained no row
        + (f"gap {metrics['actor/logprob_gap']:.1e}  " if "actor/logprob_gap" in metrics else "")
        + (f"loss {metrics['loss/policy']:.3g}  " if "loss/policy" in metrics else "")
        + (f"eval {metrics['eval/reward']:.3f}  " if "eval/reward" in metrics else "")
        + f"{metrics['perf/step_time_s']:.1f}s"
        + "".join(f"  WARN {code}" for code in warnings)
    )


def health_text(event: dict[str, Any]) -> str:
    """A `health` event as the CLI prints it, under the step line."""
    if event["resolved"]:
        return f"  ok   {event['code']}: {event['message']}"
    label = "ERROR" if event["severity"] == "error" else "WARN"
    shown = f"\n       see: {', '.join(event['trajectory_ids'])}" if event["trajectory_ids"] else ""
    return f"  {label} {event['code']}: {event['message']}\n       fix: {event['fix']}{shown}"


def dropped_text(dropped: int) -> str:
    """The line under a step that dropped episodes whose reward was not a finite, sane number."""
    return f"  WARN dropped {dropped} episode(s) with a non-finite or huge reward (train.non_finite_rewards: drop)"

"""What the health rules (run/health_rules.py) judge a step by: the step's episodes and figures (StepEvidence, with the
trajectories to show beside an alert) and what the trend rules compare it with (History, kept in checkpoints)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrl.rollout.episode import Episode, trajectory_id

# A few trajectories to open in the replay beside an alert, not the whole step.
MAX_EXAMPLES = 5


@dataclass
class StepEvidence:
    """What the rules read about one step: its metrics, its episodes (for the trajectory ids that show a
    problem) and the learner's per-episode figures, in the episodes' order ("logprob_gap", "kl_ref")."""

    step: int
    metrics: dict[str, float]
    episodes: Sequence[Episode] = ()
    per_episode: dict[str, list[float]] = field(default_factory=dict)
    # train.async_steps: the rollouts came from the weights before the last update.
    rollouts_one_step_behind: bool = False
    # False on an sft step (algorithm.name: sft, a warm start's train.sft_steps): its episodes were demonstrated or
    # recorded, not sampled, and say nothing of what the policy writes now.
    sampled: bool = True

    def ids(self, episodes: Sequence[Episode]) -> list[str]:
        return [trajectory_id(self.step, episode) for episode in list(episodes)[:MAX_EXAMPLES]]

    def one_per_group(self, keep: Callable[[Episode], bool]) -> list[str]:
        """Episodes that `keep`, at most one per group: different prompts show a pattern better than one prompt's samples."""
        chosen: dict[int, Episode] = {}
        for episode in self.episodes:
            if keep(episode) and episode.group not in chosen:
                chosen[episode.group] = episode
        return self.ids(list(chosen.values()))

    def highest(self, figure: str) -> list[str]:
        values = self.per_episode.get(figure)
        if not values:
            return []
        order = sorted(range(len(values)), key=lambda row: values[row], reverse=True)
        return self.ids([self.episodes[row] for row in order])

    def ranked(self, key: Callable[[Episode], float]) -> list[str]:
        return self.ids(sorted(self.episodes, key=key, reverse=True))


@dataclass
class History:
    """What the trend rules compare a step with; kept in checkpoints, so a resumed run judges as an unbroken one."""

    first_entropy: float | None = None
    # Per past step (the last 2 * window): mean reward, mean response length, each tool's failure rate and calls.
    recent: list[dict[str, Any]] = field(default_factory=list)
    # The last held-out evaluation: {"step", "score", "train_reward"}, train_reward being the mean training reward
    # of the steps since the evaluation before it; and the training rewards of the steps since.
    last_eval: dict[str, float] | None = None
    rewards_since_eval: list[float] = field(default_factory=list)

    def remember(self, step: int, metrics: dict[str, float], window: int) -> None:
        if self.first_entropy is None and "actor/entropy" in metrics:
            self.first_entropy = metrics["actor/entropy"]
        self.recent = [
            *self.recent,
            {
                "reward": metrics["reward/mean"],
                "length": metrics["episode/response_length_mean"],
                "tools": tool_figures(metrics),
            },
        ][-2 * window :]
        self.rewards_since_eval.append(metrics["reward/mean"])
        if "eval/reward" in metrics:
            self.last_eval = {
                "step": step,
                "score": metrics["eval/reward"],
                "train_reward": statistics.fmean(self.rewards_since_eval),
            }
            self.rewards_since_eval = []


def tool_figures(metrics: dict[str, float]) -> dict[str, list[float]]:
    """{tool name: [failure rate, calls]} from the step's `tools/<name>/...` metrics."""
    return {
        key[len("tools/") : -len("/failure_rate")]: [value, metrics[key.replace("/failure_rate", "/calls")]]
        for key, value in metrics.items()
        if key.startswith("tools/") and key.endswith("/failure_rate")
    }

"""The rewards of a step's episodes, screened before the update (train.non_finite_rewards): one NaN, infinite or huge
reward would turn every advantage of its group, and then the weights, into NaN, and the run would fail as "the
gradient norm is nan" without naming it. Screened here, the run fails (or the episode is dropped) naming the step, the
episode and the reward with where it came from."""

from __future__ import annotations

from agentrl.learning.learner import NonFiniteError
from agentrl.rollout.episode import Episode


def screen_rewards(
    episodes: list[Episode], step: int, policy: str, from_agent: bool, max_abs: float
) -> tuple[list[Episode], int]:
    """The episodes the update may use, and how many were dropped (`policy`: train.non_finite_rewards); `from_agent`:
    the rewards came from the run's agent, not its env; `max_abs`: rollout.max_abs_reward."""
    screened = [(episode, episode.unusable_rewards(from_agent, max_abs)) for episode in episodes]
    bad = [(episode, found) for episode, found in screened if found]
    if not bad:
        return episodes, 0
    kept = [episode for episode, found in screened if not found]
    if policy == "fail" or not kept:
        episode, found = bad[0]
        more = f" (and {len(bad) - 1} more episode(s))" if len(bad) > 1 else ""
        raise NonFiniteError(
            f"step {step}: episode {episode.group}/{episode.sample} of task {episode.task_id!r}: {'; '.join(found)}"
            f"{more}. Nothing was updated and the last checkpoint stands. Make the rewards finite and within "
            f"±{max_abs:g} (rollout.max_abs_reward)"
            + (
                ", or set train.non_finite_rewards: drop to leave such episodes out"
                if policy == "fail"
                else "; every episode of the step had one, so there was nothing left to train on"
            )
        )
    return kept, len(bad)

"""What one update reports: the `Update` the learner returns (the step's metrics, each episode's advantages and
per-token figures) and the helpers that lay the batch's [rows, width] tensors out per episode."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agentrl.learning.algorithms.common import step_sums
from agentrl.learning.batch import TrainBatch
from agentrl.rollout.episode import Episode


@dataclass(frozen=True)
class Update:
    metrics: dict[str, float]
    advantages: list[list[float | None]]  # per episode, per token: A_t on the trained tokens, None elsewhere
    # Per episode, in order: "logprob_gap" (mean |rollout - learner| logprob over its sampled tokens) and, with a
    # reference, "kl_ref" (mean KL over its trained tokens); the health checks name the worst episodes with them.
    per_episode: dict[str, list[float]]
    # Per episode, one entry per token the engine sampled (a rollout logprob), in order: what the learner read of it
    # (None where it read nothing: the rows an update skipped): "trainer_logprob" (pi_old: the learner's logprob
    # for the weights that sampled), "entropy" (of the learner's distribution there, from the update's first pass),
    # and, with a behaviour correction (algorithm.rollout_is), "is_weight" (the truncated importance weight the
    # loss multiplied by). The replay's token view shows them beside the engine's logprob.
    token_figures: list[dict[str, list[float | None]]]


def row_means(values: torch.Tensor, mask: torch.Tensor) -> list[float]:
    """Each row's mean of `values` over its masked positions (0 for a row with none)."""
    return ((values * mask).sum(1) / mask.sum(1).clamp(min=1.0)).tolist()


def step_advantage_spread(advantages: torch.Tensor, batch: TrainBatch) -> float:
    """Over the episodes with two trained steps or more: the mean of (largest - smallest) of their steps' mean
    advantages. 0 when every token of an episode gets the same advantage (GRPO without process rewards); a
    step-level algorithm spreads credit over the steps."""
    steps = int(batch.token_turns.max()) + 1 if batch.token_turns.numel() else 0
    if steps < 2:
        return 0.0
    sums, counts = step_sums(advantages, batch.train_mask, batch.token_turns, steps)
    means = sums / counts.clamp(min=1.0)
    present = counts > 0
    several = present.sum(1) >= 2
    if not several.any():
        return 0.0
    highest = torch.where(present, means, torch.full_like(means, -torch.inf)).max(1).values
    lowest = torch.where(present, means, torch.full_like(means, torch.inf)).min(1).values
    return float((highest - lowest)[several].mean())


def per_episode_tokens(values: torch.Tensor, read: torch.Tensor, episodes: list[Episode]) -> list[list[float | None]]:
    """Row i's values over episode i's tokens, None where `read` is 0."""
    return [
        [float(v) if taken else None for v, taken in zip(values[row, : len(ep.token_ids)].tolist(), read[row].tolist())]
        for row, ep in enumerate(episodes)
    ]


def at_sampled_tokens(values: torch.Tensor, read: torch.Tensor, episodes: list[Episode]) -> list[list[float | None]]:
    """Row i's values at episode i's sampled tokens (those with a rollout logprob), in order, None where `read` is 0;
    rounded to 6 decimals. Only those: a value (or a null) for every prompt and tool token as well made a trajectory
    file 28% larger (SmolLM2's chat template puts ~330 prompt tokens before 17 sampled ones in the lookup example)."""
    found = []
    for row, episode in enumerate(episodes):
        sampled = [t for t, logprob in enumerate(episode.rollout_logprobs) if logprob is not None]
        row_values, row_read = values[row, sampled].tolist(), read[row, sampled].bool().tolist()
        found.append([round(v, 6) if taken else None for v, taken in zip(row_values, row_read)])
    return found

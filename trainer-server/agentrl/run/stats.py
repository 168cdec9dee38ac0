"""Percentile-bootstrap confidence intervals for scores over a set of tasks."""

from __future__ import annotations

import random


def bootstrap_ci(
    values: list[float], *, resamples: int = 10_000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """The percentile bootstrap interval of mean(values): tasks resampled with replacement."""
    if not values:
        raise ValueError("need at least one score to bootstrap")
    rng, n = random.Random(seed), len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    tail = (1.0 - level) / 2
    return means[int(tail * resamples)], means[min(resamples - 1, int((1.0 - tail) * resamples))]


def paired_bootstrap_ci(
    before: list[float], after: list[float], *, resamples: int = 10_000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """The percentile bootstrap interval of mean(after - before) over tasks scored both ways.

    Tasks are resampled with replacement, each keeping its own pair of scores, so the interval reflects
    the spread of the per-task differences rather than of two independent means."""
    if len(before) != len(after) or not before:
        raise ValueError(f"need the same non-empty set of tasks before and after, got {len(before)} and {len(after)}")
    return bootstrap_ci([b - a for a, b in zip(before, after)], resamples=resamples, seed=seed, level=level)

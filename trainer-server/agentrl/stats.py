"""Confidence intervals for before/after comparisons on the same tasks."""

from __future__ import annotations

import random


def paired_bootstrap_ci(before: list[float], after: list[float], *, resamples: int = 10_000, seed: int = 0,
                        level: float = 0.95) -> tuple[float, float]:
    """The percentile bootstrap interval of mean(after - before) over tasks scored both ways.

    Tasks are resampled with replacement, each keeping its own pair of scores, so the interval reflects
    the spread of the per-task differences rather than of two independent means."""
    if len(before) != len(after) or not before:
        raise ValueError(f"need the same non-empty set of tasks before and after, got {len(before)} and {len(after)}")
    differences = [b - a for a, b in zip(before, after)]
    rng, n = random.Random(seed), len(differences)
    means = sorted(sum(differences[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    tail = (1.0 - level) / 2
    return means[int(tail * resamples)], means[min(resamples - 1, int((1.0 - tail) * resamples))]

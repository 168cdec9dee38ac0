"""Bootstrap confidence intervals: what the README's results and `agentrl demo` report."""

import pytest
from agentrl.run.stats import bootstrap_ci, paired_bootstrap_ci


def test_the_interval_holds_the_mean_and_narrows_with_more_tasks():
    scores = [0.0, 1.0] * 20
    low, high = bootstrap_ci(scores)
    assert low < 0.5 < high
    wide = bootstrap_ci(scores[:10])
    assert wide[1] - wide[0] > high - low
    assert bootstrap_ci([0.25] * 7) == (0.25, 0.25)  # no spread, no uncertainty


def test_the_paired_interval_is_the_interval_of_the_differences():
    before, after = [0.0, 1.0, 0.0, 1.0] * 10, [1.0, 1.0, 0.0, 1.0] * 10
    assert paired_bootstrap_ci(before, after) == bootstrap_ci([a - b for a, b in zip(after, before)])
    assert paired_bootstrap_ci(before, before) == (0.0, 0.0)
    low, _ = paired_bootstrap_ci(before, after)
    assert low > 0  # every task kept or gained: the interval excludes 0


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="at least one score"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="same non-empty set of tasks"):
        paired_bootstrap_ci([1.0], [1.0, 0.0])

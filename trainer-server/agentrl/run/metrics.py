"""Rollout-side health signals of one step, from its episodes (docs/token-pipeline.md, rule 8), and the process's peak
memory, which every step reports beside them."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable

import torch

from agentrl.learning.cpu_memory import peak_resident_bytes
from agentrl.rollout.episode import Episode


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def rollout_metrics(episodes: list[Episode]) -> dict[str, float]:
    rewards = [ep.total_reward for ep in episodes]
    metrics = {
        "reward/mean": _mean(rewards),
        "reward/std": statistics.pstdev(rewards) if len(rewards) > 1 else 0.0,
        "reward/outcome_mean": _mean([ep.outcome_reward for ep in episodes]),
        "reward/process_mean": _mean([sum(ep.process_rewards) for ep in episodes]),
        "episode/turns_mean": _mean([len(ep.turns) for ep in episodes]),
        "episode/response_length_mean": _mean([ep.response_length for ep in episodes]),
        "episode/total_tokens_mean": _mean([len(ep.token_ids) for ep in episodes]),
        "health/truncation_rate": _mean([ep.status == "truncated" for ep in episodes]),
        "health/error_rate": _mean([ep.status == "error" for ep in episodes]),
        "health/malformed_calls": float(sum(1 for ep in episodes for t in ep.turns if t.parse_error)),
    }
    components: dict[str, list[float]] = defaultdict(list)
    for ep in episodes:
        for name, value in ep.reward_breakdown.items():
            components[name].append(value)
    metrics.update({f"reward/{name}": _mean(values) for name, values in components.items()})

    groups: dict[int, list[float]] = defaultdict(list)
    for ep in episodes:
        groups[ep.group].append(ep.total_reward)
    # A group of one sample has no variance to measure (group_size 1 is for algorithms without a group baseline).
    metrics["health/zero_variance_groups"] = _mean([max(g) - min(g) < 1e-9 for g in groups.values() if len(g) > 1])

    calls = [c for ep in episodes for t in ep.turns for c in t.tool_calls]
    metrics["tools/offered"] = float(max((len(ep.tool_schemas) for ep in episodes), default=0))
    metrics["tools/calls"] = float(len(calls))
    metrics["tools/calls_per_episode"] = len(calls) / len(episodes) if episodes else 0.0
    metrics["health/tool_failure_rate"] = _mean([c.error is not None for c in calls])
    by_tool: dict[str, list[bool]] = defaultdict(list)
    by_kind: dict[str, int] = defaultdict(int)
    for call in calls:
        by_tool[call.name or "(unparsed)"].append(call.error is not None)
        if call.error_kind:
            by_kind[call.error_kind] += 1
    for name, failures in by_tool.items():
        metrics[f"tools/{name}/calls"] = float(len(failures))
        metrics[f"tools/{name}/failure_rate"] = _mean(failures)
    for kind, count in by_kind.items():
        metrics[f"tools/errors/{kind}"] = float(count)
    return metrics | step_metrics(episodes)


def failed_calls_retried(episodes_calls: Iterable[list[list[tuple[str, bool]]]]) -> tuple[int, int]:
    """(failed calls, how many of them the next turn followed with a call to the same Tool), over episodes given as
    each turn's calls, (tool name, failed) each: the retry rate of `step_metrics` and of a results script's records."""
    failed = retried = 0
    for turns in episodes_calls:
        for calls, following in zip(turns, [*turns[1:], []]):
            for name, call_failed in calls:
                if call_failed:
                    failed += 1
                    retried += any(other == name for other, _ in following)
    return failed, retried


def step_metrics(episodes: list[Episode]) -> dict[str, float]:
    """How the agent acts over several steps: `steps/multi_call_share` (episodes with two tool calls or more),
    `steps/calls_max`, `steps/retry_rate` (when a call failed: failed calls followed, in the next turn, by a call to the same Tool),
    `steps/state_changes_mean` (turns per episode that start from another state than the turn before, by the
    env's state keys) and `steps/anchor_group_size_mean` (steps per anchor state: a group's steps that start from
    the same state, which GiGPO compares)."""
    calls = [sum(len(t.tool_calls) for t in ep.turns) for ep in episodes]
    failed, retried = failed_calls_retried(
        [[(c.name, c.error is not None) for c in t.tool_calls] for t in ep.turns] for ep in episodes
    )
    anchors: dict[tuple[int, str], int] = defaultdict(int)
    for ep in episodes:
        for turn in ep.turns:
            if turn.state_key is not None:
                anchors[(ep.group, turn.state_key)] += 1
    return {
        "steps/multi_call_share": _mean([n >= 2 for n in calls]),
        "steps/calls_max": float(max(calls, default=0)),
        **({"steps/retry_rate": retried / failed} if failed else {}),  # no failed call: nothing to retry
        "steps/state_changes_mean": _mean(
            [sum(a.state_key != b.state_key for a, b in zip(ep.turns, ep.turns[1:])) for ep in episodes]
        ),
        "steps/anchor_group_size_mean": _mean(list(anchors.values())),
    }


def peak_memory_mb() -> float:
    """The process's peak memory so far, for perf/peak_memory_mb: the GPU's allocations on CUDA, else resident."""
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return peak_resident_bytes() / 2**20

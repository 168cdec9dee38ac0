"""The run config's `health` section: the thresholds at which the trainer raises a `health` alert."""

from __future__ import annotations

from pydantic import Field

from agentrl.contract.config_section import Section


class HealthConfig(Section):
    """When the trainer raises a `health` alert (agentrl/run/health.py; protocol/README.md lists the codes)."""

    consecutive_steps: int = Field(
        2,
        ge=1,
        le=100,
        description=(
            "Steps in a row a per-step condition must hold before its alert starts, and be absent before "
            "it clears: one bad step can be sampling luck."
        ),
    )
    window: int = Field(
        4,
        ge=1,
        le=1000,
        description=(
            "Steps the trend checks compare: response_length_explosion the last N steps with the N before, "
            "tool_failure_spike a tool's failure rate with its rate over the previous N steps."
        ),
    )
    zero_variance_share: float = Field(
        0.75,
        gt=0.0,
        le=1.0,
        description="zero_variance_groups: share of a step's groups whose samples all earned the same reward.",
    )
    max_truncation_rate: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description="high_truncation: share of a step's episodes truncated (all of them is all_truncated).",
    )
    entropy_collapse_ratio: float = Field(
        0.1,
        gt=0.0,
        lt=1.0,
        description="entropy_collapse: actor/entropy below this fraction of the run's first-step entropy.",
    )
    length_growth: float = Field(
        1.5,
        gt=1.0,
        description=(
            "response_length_explosion: mean response length of the last `window` steps over that of the "
            "`window` steps before, at or above which (with a flat reward) responses are exploding."
        ),
    )
    flat_reward_delta: float = Field(
        0.02,
        ge=0.0,
        description=(
            "response_length_explosion: a reward rise this small counts as flat; zero_variance_groups: a rise of the "
            "mean reward above it, to where every flat group sits at the top, counts as the prompts solved."
        ),
    )
    tool_failure_jump: float = Field(
        0.3,
        gt=0.0,
        le=1.0,
        description=(
            "tool_failure_spike: a tool's failure rate this much above its lowest over the previous `window` "
            "steps (0 until it has been called in `window` steps)."
        ),
    )
    tool_failure_min_calls: int = Field(
        4,
        ge=1,
        description="tool_failure_spike: calls of a tool in a step before its failure rate is judged.",
    )
    max_logprob_gap: float = Field(
        0.05,
        gt=0.0,
        description=(
            "logprob_gap: mean |rollout logprob - learner logprob| per sampled token (actor/logprob_gap); "
            "about 1e-7 in float32, up to 3e-2 with a bfloat16 vLLM engine."
        ),
    )
    max_kl: float = Field(
        0.1,
        gt=0.0,
        description="kl_above_bound: KL to the reference per trained token (actor/kl_ref, when kl.coef > 0).",
    )
    eval_drop: float = Field(
        0.05,
        gt=0.0,
        description="heldout_divergence: fall of eval/reward from the previous evaluation that counts.",
    )
    reward_rise: float = Field(
        0.05,
        gt=0.0,
        description=(
            "heldout_divergence: rise of the mean training reward between those evaluations (against the "
            "steps before the previous one) that counts."
        ),
    )
    max_prefix_break_share: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description=(
            "agent_prefix_breaks: share of an agent run's episodes (run config agent:) that rewrote their history, "
            "each then several training sequences sharing its reward (agent/broken_episode_share)."
        ),
    )

"""What each health check looks for in a step's figures, and what to change when it holds: one judge per code of
rpc.schema.json#/$defs/healthCode, its title, severity and fix (RULES). The monitor in health.py runs them every
step and turns their findings into alerts."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from agentrl.contract.health_config import HealthConfig
from agentrl.contract.schemas import HEALTH_CODES
from agentrl.rollout.episode import Episode
from agentrl.run.health_evidence import History, StepEvidence, tool_figures


@dataclass(frozen=True)
class Finding:
    """A rule's verdict that its condition holds at this step."""

    explanation: str  # with this step's figures, and why it stops learning
    metrics: dict[str, float]  # the figures read
    trajectory_ids: list[str]


# A rule's verdict: a Finding (holds), False (does not hold), None (nothing to judge at this step).
Verdict = Finding | bool | None


@dataclass(frozen=True)
class Rule:
    code: str  # the `code` of the `health` event (rpc.schema.json#/$defs/healthCode)
    title: str  # what is wrong, in a few words
    severity: str  # warning: the run goes on; error: it stopped
    fix: str
    judge: Callable[[StepEvidence, HealthConfig, History], Verdict] | None
    reads: tuple[str, ...] = ()  # the figures a resolved alert reports
    per_evaluation: bool = False  # judged only at held-out evaluations: one holds or clears the alert
    reads_rollouts: bool = False  # judges what the policy sampled: not judged on an sft step (StepEvidence.sampled)


def _zero_variance(ev: StepEvidence, cfg: HealthConfig, history: History) -> Verdict:
    m = ev.metrics
    if m["health/zero_variance_groups"] < cfg.zero_variance_share:
        return False
    rewards: dict[int, list[float]] = {}
    for episode in ev.episodes:
        rewards.setdefault(episode.group, []).append(episode.total_reward)
    flat = {group for group, values in rewards.items() if len(values) > 1 and max(values) - min(values) < 1e-9}
    why = "so their advantages are zero and the update learns nothing from them"
    # Flat at the top, after the reward rose to it: the prompts are solved, which is no fault to fix.
    top = max((episode.total_reward for episode in ev.episodes), default=0.0)
    lowest_before = min((past["reward"] for past in history.recent), default=m["reward/mean"])
    at_top = flat and all(rewards[group][0] >= top - 1e-9 for group in flat)
    if at_top and m["reward/mean"] - lowest_before > cfg.flat_reward_delta:
        why = (
            f"every one of them at this step's top reward, {top:.3f}, where the mean reward rose from "
            f"{lowest_before:.3f}: the policy solves these prompts, and they have nothing left to teach"
        )
    return Finding(
        f"{m['health/zero_variance_groups']:.0%} of this step's groups (mean reward {m['reward/mean']:.3f}) "
        f"gave every sample of the prompt the same reward, {why}",
        {"health/zero_variance_groups": m["health/zero_variance_groups"], "reward/mean": m["reward/mean"]},
        ev.one_per_group(lambda episode: episode.group in flat),
    )


def _no_tool_calls(ev: StepEvidence, _: HealthConfig, __: History) -> Verdict:
    m = ev.metrics
    if not (m["tools/offered"] > 0 and m["tools/calls"] == 0):
        return False
    return Finding(
        f"the env offers {m['tools/offered']:.0f} tool(s) but no episode of this step tried a call, so "
        "there is no tool use for the reward to reinforce",
        {"tools/offered": m["tools/offered"], "tools/calls": m["tools/calls"]},
        ev.one_per_group(lambda _: True),
    )


def _truncated_ids(ev: StepEvidence) -> list[str]:
    return ev.one_per_group(lambda episode: episode.status == "truncated")


def _all_truncated(ev: StepEvidence, _: HealthConfig, __: History) -> Verdict:
    if ev.metrics["health/truncation_rate"] < 1.0:
        return False
    return Finding(
        "every episode of this step ran out of turns or context before it ended, so what is scored is a "
        "cut-off episode, not an answer",
        {"health/truncation_rate": ev.metrics["health/truncation_rate"]},
        _truncated_ids(ev),
    )


def _high_truncation(ev: StepEvidence, cfg: HealthConfig, _: History) -> Verdict:
    rate = ev.metrics["health/truncation_rate"]
    if not cfg.max_truncation_rate <= rate < 1.0:  # all of them is all_truncated's alert
        return False
    return Finding(
        f"{rate:.0%} of this step's episodes ran out of turns or context (threshold "
        f"{cfg.max_truncation_rate:.0%}): their reward scores a cut-off episode, which teaches the policy "
        "little about finishing",
        {"health/truncation_rate": rate},
        _truncated_ids(ev),
    )


def _mean_sampled_logprob(episode: Episode) -> float:
    sampled = [logprob for logprob in episode.rollout_logprobs if logprob is not None]
    return statistics.fmean(sampled) if sampled else float("-inf")


def _entropy_collapse(ev: StepEvidence, cfg: HealthConfig, history: History) -> Verdict:
    entropy = ev.metrics.get("actor/entropy")
    if entropy is None or history.first_entropy is None:
        return None  # the first step sets the reference
    if entropy >= cfg.entropy_collapse_ratio * history.first_entropy:
        return False
    return Finding(
        f"the policy's entropy is {entropy:.4f} nats per token, below {cfg.entropy_collapse_ratio:.0%} of "
        f"its first step's {history.first_entropy:.4f}: the samples of a group become the same, so they "
        "stop differing in reward and exploration ends",
        {"actor/entropy": entropy},
        ev.ranked(_mean_sampled_logprob),
    )  # the most certain episodes: what the policy collapsed onto


def _response_length_explosion(ev: StepEvidence, cfg: HealthConfig, history: History) -> Verdict:
    steps = [
        *history.recent,
        {"reward": ev.metrics["reward/mean"], "length": ev.metrics["episode/response_length_mean"]},
    ]
    if len(steps) < 2 * cfg.window:
        return None
    earlier, later = steps[-2 * cfg.window : -cfg.window], steps[-cfg.window :]
    length_before = statistics.fmean(s["length"] for s in earlier)
    length_now = statistics.fmean(s["length"] for s in later)
    reward_change = statistics.fmean(s["reward"] for s in later) - statistics.fmean(s["reward"] for s in earlier)
    if length_now < cfg.length_growth * max(length_before, 1e-9) or reward_change >= cfg.flat_reward_delta:
        return False
    return Finding(
        f"responses grew from {length_before:.1f} to {length_now:.1f} tokens on average over the last "
        f"{cfg.window} steps against the {cfg.window} before, while the mean reward changed by "
        f"{reward_change:+.3f}: the policy spends tokens that earn nothing (rambling, repeated calls)",
        {
            "episode/response_length_mean": ev.metrics["episode/response_length_mean"],
            "reward/mean": ev.metrics["reward/mean"],
        },
        ev.ranked(lambda episode: episode.response_length),
    )


def _tool_failure_spike(ev: StepEvidence, cfg: HealthConfig, history: History) -> Verdict:
    spikes = []
    for name, (rate, calls) in tool_figures(ev.metrics).items():
        if calls < cfg.tool_failure_min_calls:
            continue
        # Its lowest rate over the previous `window` steps, counting the steps before the run began (or before the
        # tool was first called) as 0: a tool that fails from the start spikes too, and one step's failures do not
        # raise the baseline the next step is judged against.
        before = [
            step["tools"][name][0]
            for step in history.recent[-cfg.window :]
            if step["tools"].get(name, [0.0, 0.0])[1] > 0
        ]
        baseline = min(before) if len(before) == cfg.window else 0.0
        if rate - baseline >= cfg.tool_failure_jump:
            spikes.append((name, rate, baseline, calls))
    if not spikes:
        return False
    failing = {name for name, *_ in spikes}
    return Finding(
        "; ".join(
            f"tool {name!r} failed {rate:.0%} of its {calls:.0f} calls, against {baseline:.0%} over "
            f"at best over the previous {cfg.window} steps"
            for name, rate, baseline, calls in spikes
        )
        + ": the model reads errors instead of results, and learns to avoid the tool or to misuse it",
        {f"tools/{name}/failure_rate": rate for name, rate, *_ in spikes},
        ev.one_per_group(
            lambda episode: any(
                call.error is not None and call.name in failing for turn in episode.turns for call in turn.tool_calls
            )
        ),
    )


def _logprob_gap(ev: StepEvidence, cfg: HealthConfig, _: History) -> Verdict:
    gap = ev.metrics.get("actor/logprob_gap")
    if gap is None or ev.rollouts_one_step_behind:
        return None  # one step behind, the gap is mostly the update's own change, which the importance weights correct
    if gap <= cfg.max_logprob_gap:
        return False
    return Finding(
        f"the rollout engine's logprobs differ from the learner's by {gap:.3g} per sampled token (tolerance "
        f"{cfg.max_logprob_gap:g}): the update treats the samples as on-policy when the engine sampled "
        "from other numbers (another dtype, other weights, another chat template)",
        {"actor/logprob_gap": gap},
        ev.highest("logprob_gap"),
    )


def _kl_above_bound(ev: StepEvidence, cfg: HealthConfig, _: History) -> Verdict:
    kl = ev.metrics.get("actor/kl_ref")
    if kl is None:
        return None  # no reference policy (algorithm.kl.coef 0)
    if kl <= cfg.max_kl:
        return False
    return Finding(
        f"the KL to the reference policy is {kl:.4f} per trained token (bound {cfg.max_kl:g}): the policy "
        "has moved far from where it started, which often means it found a way to game the reward",
        {"actor/kl_ref": kl},
        ev.highest("kl_ref"),
    )


def _heldout_divergence(ev: StepEvidence, cfg: HealthConfig, history: History) -> Verdict:
    score = ev.metrics.get("eval/reward")
    if score is None:
        return None
    previous = history.last_eval
    if previous is None:
        return False  # the first evaluation is the reference
    train_now = statistics.fmean([*history.rewards_since_eval, ev.metrics["reward/mean"]])
    train_change, score_change = train_now - previous["train_reward"], score - previous["score"]
    if not (score_change <= -cfg.eval_drop and train_change >= cfg.reward_rise):
        return False
    return Finding(
        f"the held-out score fell from {previous['score']:.3f} at step {previous['step']:.0f} to {score:.3f} "
        "while the training reward rose "
        f"by {train_change:+.3f} over the same steps: the policy is fitting the training tasks, or a flaw "
        "of the reward, rather than the skill",
        {"eval/reward": score, "reward/mean": ev.metrics["reward/mean"]},
        ev.ranked(lambda episode: episode.total_reward),
    )  # what the training reward now pays for


def _agent_prefix_breaks(ev: StepEvidence, cfg: HealthConfig, _: History) -> Verdict:
    share = ev.metrics.get("agent/broken_episode_share")
    if share is None:
        return None  # not an agent run (config agent:)
    if share < cfg.max_prefix_break_share:
        return False
    return Finding(
        f"{share:.0%} of this step's episodes sent the endpoint a history other than the one it answered "
        f"({ev.metrics['agent/prefix_breaks']:.0f} prefix breaks, {ev.metrics['agent/edited_messages']:.0f} of them "
        "edited assistant messages): each became several training sequences sharing its reward, so it weighs more "
        "in its group, and the model is trained on turns whose context the agent then changed",
        {"agent/broken_episode_share": share, "agent/prefix_breaks": ev.metrics["agent/prefix_breaks"]},
        ev.one_per_group(lambda episode: bool(episode.turns) and episode.turns[0].index > 0),  # a later sequence
    )


RULES = (
    Rule(
        "zero_variance_groups",
        "zero reward variance in most groups",
        "warning",
        "raise rollout.temperature or rollout.group_size so samples differ, make the tasks easier, or give partial "
        "credit in the reward so a near miss scores above a failure; where the groups all earn the top reward the "
        "tasks are solved: stop (a held-out score says whether it generalizes) or add harder ones",
        _zero_variance,
        ("health/zero_variance_groups", "reward/mean"),
        reads_rollouts=True,
    ),
    Rule(
        "no_tool_calls",
        "no tool calls",
        "warning",
        "show the call format in the prompt (a worked example: a call and its result), or set rollout.tool_format to "
        "one the model knows (auto follows its chat template, hermes is <tool_call>{json}</tool_call>); the replay "
        "shows what the model writes instead",
        _no_tool_calls,
        ("tools/offered", "tools/calls"),
        reads_rollouts=True,
    ),
    Rule(
        "all_truncated",
        "every episode truncated",
        "warning",
        "raise rollout.max_new_tokens, rollout.max_turns or rollout.max_context (the replay shows where episodes "
        "stop), or have the ToolEnv end an episode (done=True) once it is answered",
        _all_truncated,
        ("health/truncation_rate",),
        reads_rollouts=True,
    ),
    Rule(
        "high_truncation",
        "many episodes truncated",
        "warning",
        "raise rollout.max_new_tokens, rollout.max_turns or rollout.max_context, or end episodes in the ToolEnv "
        "(done=True) once answered; the listed trajectories show where they stop",
        _high_truncation,
        ("health/truncation_rate",),
        reads_rollouts=True,
    ),
    Rule(
        "entropy_collapse",
        "policy entropy collapsed",
        "warning",
        "lower train.lr, add algorithm.entropy_coef (e.g. 0.001) or a KL penalty (algorithm.kl.coef), raise "
        "rollout.temperature, or use clip-higher (algorithm.clip_eps_high, e.g. 0.28)",
        _entropy_collapse,
        ("actor/entropy",),
    ),
    Rule(
        "response_length_explosion",
        "responses growing, reward flat",
        "warning",
        "lower rollout.max_new_tokens or rollout.max_turns, check the reward does not pay for length or for every "
        "call (a process reward per call invites repeated calls), or use algorithm.loss_agg token-mean",
        _response_length_explosion,
        ("episode/response_length_mean", "reward/mean"),
        reads_rollouts=True,
    ),
    Rule(
        "tool_failure_spike",
        "tool failures spiked",
        "warning",
        "open the listed trajectories: a Tool raising or timing out (rollout.tool_timeout_s), or the model writing "
        "arguments the Tool's parameters schema rejects; fix the Tool or show the call format in the prompt",
        _tool_failure_spike,
        ("health/tool_failure_rate",),
        reads_rollouts=True,
    ),
    Rule(
        "logprob_gap",
        "rollout and learner logprobs differ",
        "warning",
        "set rollout.vllm_dtype: policy, or turn on algorithm.rollout_is to correct for the gap; a gap far above "
        "1e-2 means the engine runs other weights or another chat template than the learner",
        _logprob_gap,
        ("actor/logprob_gap",),
        reads_rollouts=True,
    ),
    Rule(
        "kl_above_bound",
        "KL to the reference above its bound",
        "warning",
        "raise algorithm.kl.coef, lower train.lr, and read the listed trajectories for reward hacking",
        _kl_above_bound,
        ("actor/kl_ref",),
    ),
    Rule(
        "non_finite",
        "non-finite or huge reward, non-finite loss or gradient",
        "error",
        "make the rewards finite and within rollout.max_abs_reward (or set train.non_finite_rewards: drop); for a NaN "
        "loss or gradient lower train.lr, or leave train.bf16_autocast off; then resume from the last checkpoint",
        None,
    ),
    Rule(
        "heldout_divergence",
        "training reward up, held-out score down",
        "warning",
        "stop at the checkpoint with the best held-out score, check the reward for a shortcut the listed "
        "trajectories take, or train on more varied tasks",
        _heldout_divergence,
        ("eval/reward", "reward/mean"),
        per_evaluation=True,
    ),
    Rule(
        "agent_prefix_breaks",
        "the agent rewrites its history in most episodes",
        "warning",
        "send each reply back as the endpoint gave it (append the message object, or its role, content and "
        "tool_calls unchanged) and keep earlier messages as they were; trim or summarise the history only when "
        "it nears rollout.max_context. The listed trajectories are sequences that started over",
        _agent_prefix_breaks,
        ("agent/broken_episode_share", "agent/prefix_breaks"),
        reads_rollouts=True,
    ),
)
RULE_BY_CODE = {rule.code: rule for rule in RULES}
if tuple(RULE_BY_CODE) != HEALTH_CODES:
    raise RuntimeError(
        f"agentrl/run/health_rules.py's rules {tuple(RULE_BY_CODE)} are not rpc.schema.json's health codes "
        f"{HEALTH_CODES}: a code is declared once, in the schema, and each has exactly one rule"
    )

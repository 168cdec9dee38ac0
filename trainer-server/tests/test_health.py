"""The trainer says when nothing can be learned: the monitor on made-up metrics, then a real run that cannot learn."""

import json
from dataclasses import replace

import pytest
import torch
from agentrl.contract import schemas
from agentrl.contract.config import ConfigError, load_config
from agentrl.contract.health_config import HealthConfig
from agentrl.contract.schemas import HEALTH_CODES, HEALTH_SEVERITIES
from agentrl.environment.tool import ToolCallRecord
from agentrl.learning.learner import Learner
from agentrl.models.loading import load_policy
from agentrl.models.saving import load_policy_weights
from agentrl.rollout.episode import Episode, TurnRecord
from agentrl.run.health import HealthMonitor, non_finite_event
from agentrl.run.health_evidence import MAX_EXAMPLES, History, StepEvidence
from agentrl.run.health_rules import RULE_BY_CODE, RULES
from agentrl.run.metrics import rollout_metrics
from agentrl.run.runstore import RunStore, latest_status, read_events
from agentrl.run.trainer import train
from agentrl.server.protocol import validator_for
from conftest import EXAMPLE_CONFIG

HEALTHY = {
    "health/zero_variance_groups": 0.25,
    "reward/mean": 0.4,
    "tools/offered": 1.0,
    "tools/calls": 9.0,
    "health/truncation_rate": 0.1,
    "episode/response_length_mean": 20.0,
    "actor/entropy": 2.0,
    "actor/logprob_gap": 1e-7,
    "actor/kl_ref": 0.01,
    "health/tool_failure_rate": 0.1,
    "tools/lookup/calls": 9.0,
    "tools/lookup/failure_rate": 0.1,
}
FLAT = HEALTHY | {"health/zero_variance_groups": 1.0, "reward/mean": 0.0}


def observe_all(steps, config=None):
    """(step, code, resolved) of every event a monitor reports over these steps' metrics; every event is checked
    against the protocol."""
    monitor = HealthMonitor(config)
    found = []
    for step, metrics in enumerate(steps, 1):
        for event in monitor.observe(StepEvidence(step, metrics)):
            validator_for("healthEvent").validate(event)
            found.append((step, event["code"], event["resolved"]))
    return found


def test_every_code_of_the_schema_has_exactly_one_rule():
    assert tuple(rule.code for rule in RULES) == HEALTH_CODES
    assert {rule.severity for rule in RULES} <= set(HEALTH_SEVERITIES)


def test_a_healthy_run_reports_nothing():
    evaluated = [HEALTHY | ({"eval/reward": 0.3 + 0.01 * step} if step % 2 == 0 else {}) for step in range(1, 13)]
    assert observe_all(evaluated) == []


def test_an_alert_starts_after_two_steps_in_a_row_once_and_clears_after_two_clear_steps():
    assert HealthConfig().consecutive_steps == 2
    steps = [HEALTHY, FLAT, FLAT, FLAT, HEALTHY, FLAT, HEALTHY, HEALTHY, FLAT]
    assert observe_all(steps) == [(3, "zero_variance_groups", False), (8, "zero_variance_groups", True)]


def test_one_bad_step_now_and_then_is_not_an_alert():
    assert observe_all([FLAT, HEALTHY, FLAT, HEALTHY, FLAT]) == []


def test_consecutive_steps_comes_from_the_config():
    assert observe_all([HEALTHY, FLAT, FLAT, FLAT], HealthConfig(consecutive_steps=3)) == [
        (4, "zero_variance_groups", False)
    ]


def trend(before, after, count=4):
    return [HEALTHY | before] * count + [HEALTHY | after] * count


# Each rule on a crafted sequence: the step its alert starts, and a close sequence of a healthy run that stays quiet.
RULE_CASES = {
    "zero_variance_groups": ([HEALTHY, FLAT, FLAT], 3, [HEALTHY | {"health/zero_variance_groups": 0.7}] * 4),
    "no_tool_calls": (
        [HEALTHY | {"tools/calls": 0.0}] * 2,
        2,
        [HEALTHY | {"tools/offered": 0.0, "tools/calls": 0.0}] * 4,
    ),  # an env without tools
    "all_truncated": (
        [HEALTHY | {"health/truncation_rate": 1.0}] * 2,
        2,
        [HEALTHY | {"health/truncation_rate": 0.3}] * 4,
    ),
    "high_truncation": (
        [HEALTHY | {"health/truncation_rate": 0.6}] * 2,
        2,
        [HEALTHY | {"health/truncation_rate": 0.4}] * 4,
    ),
    "entropy_collapse": (
        [HEALTHY, HEALTHY | {"actor/entropy": 0.1}, HEALTHY | {"actor/entropy": 0.1}],
        3,
        [HEALTHY | {"actor/entropy": 2.0 - 0.2 * step} for step in range(6)],
    ),
    # Window 4: the last 4 steps' mean length against the 4 before, first measurable at step 8.
    "response_length_explosion": (
        trend({}, {"episode/response_length_mean": 40.0}) + [HEALTHY | {"episode/response_length_mean": 40.0}],
        9,
        trend({}, {"episode/response_length_mean": 40.0, "reward/mean": 0.6}) * 2,
    ),
    "tool_failure_spike": (
        trend({}, {"tools/lookup/failure_rate": 0.8}),
        6,
        trend({}, {"tools/lookup/failure_rate": 0.8, "tools/lookup/calls": 3.0}),
    ),  # too few calls
    "logprob_gap": ([HEALTHY | {"actor/logprob_gap": 0.2}] * 2, 2, [HEALTHY | {"actor/logprob_gap": 0.03}] * 4),
    "kl_above_bound": (
        [HEALTHY | {"actor/kl_ref": 0.5}] * 2,
        2,
        [{k: v for k, v in HEALTHY.items() if k != "actor/kl_ref"}] * 4,
    ),  # no reference, no verdict
    # Evaluated every 2 steps: at step 4 the training reward rose by 0.2 while the held-out score fell by 0.2.
    "heldout_divergence": (
        [
            HEALTHY,
            HEALTHY | {"eval/reward": 0.5},
            HEALTHY | {"reward/mean": 0.6},
            HEALTHY | {"reward/mean": 0.6, "eval/reward": 0.3},
        ],
        4,
        [
            HEALTHY,
            HEALTHY | {"eval/reward": 0.5},
            HEALTHY | {"reward/mean": 0.6},
            HEALTHY | {"reward/mean": 0.6, "eval/reward": 0.6},
        ],
    ),
    # An agent run (config agent:): most of its episodes rewrote their history; an env run has no such figure.
    "agent_prefix_breaks": (
        [HEALTHY | {"agent/broken_episode_share": 0.75, "agent/prefix_breaks": 6.0, "agent/edited_messages": 1.0}] * 2,
        2,
        [HEALTHY | {"agent/broken_episode_share": 0.25, "agent/prefix_breaks": 2.0, "agent/edited_messages": 0.0}] * 4,
    ),
}


def test_every_metric_rule_has_a_case():
    assert set(RULE_CASES) == {rule.code for rule in RULES if rule.judge is not None}


@pytest.mark.parametrize("code", RULE_CASES)
def test_each_rule_fires_on_its_pattern_and_stays_quiet_on_a_healthy_run(code):
    sequence, fires_at, healthy = RULE_CASES[code]
    assert observe_all(sequence) == [(fires_at, code, False)]
    assert observe_all(healthy) == []


@pytest.mark.parametrize("code", RULE_CASES)
def test_each_alert_names_its_severity_cause_fix_and_figures(code):
    sequence, fires_at, _ = RULE_CASES[code]
    monitor = HealthMonitor()
    events = [
        event for step, metrics in enumerate(sequence, 1) for event in monitor.observe(StepEvidence(step, metrics))
    ]
    [event] = events
    assert event["severity"] == "warning" and event["step"] == fires_at and not event["resolved"]
    assert f"since step {event['since_step']}" in event["message"] and event["fix"]
    assert event["metrics"] and all(name in sequence[-1] for name in event["metrics"])
    assert event["trajectory_ids"] == []  # no episodes were given
    assert monitor.active == [code]


def test_the_logprob_gap_of_rollouts_one_step_behind_is_not_judged():
    monitor = HealthMonitor()
    wide = HEALTHY | {"actor/logprob_gap": 0.3}  # train.async_steps: the gap holds the last update's change
    assert [monitor.observe(StepEvidence(step, wide, rollouts_one_step_behind=True)) for step in (1, 2, 3)] == [[]] * 3


def test_an_sft_step_is_not_judged_by_what_the_policy_sampled():
    """A warm start's or an sft run's episodes were demonstrated, not sampled: no tool calls, all truncated or a wide
    logprob gap there says nothing about the policy; an update figure (the entropy) is judged as on any step."""
    demonstrated = HEALTHY | {"tools/calls": 0.0, "health/truncation_rate": 1.0, "actor/entropy": 0.1}
    monitor = HealthMonitor()
    steps = [HEALTHY, demonstrated, demonstrated]  # the entropy falls from 2.0 to 0.1
    events = [monitor.observe(StepEvidence(step, figures, sampled=False)) for step, figures in enumerate(steps, 1)]
    assert [(event["step"], event["code"]) for found in events for event in found] == [(3, "entropy_collapse")]
    assert {code for code, rule in RULE_BY_CODE.items() if rule.reads_rollouts} == {
        "zero_variance_groups",
        "no_tool_calls",
        "all_truncated",
        "high_truncation",
        "response_length_explosion",
        "tool_failure_spike",
        "logprob_gap",
        "agent_prefix_breaks",
    }
    # the same figures sampled by the policy: its alerts
    sampled = [monitor.observe(StepEvidence(step, demonstrated)) for step in (4, 5)]
    assert {"no_tool_calls", "all_truncated"} <= {event["code"] for found in sampled for event in found}


def test_a_tool_that_fails_from_the_first_step_spikes_and_one_that_stays_failing_clears():
    failing = HEALTHY | {"tools/lookup/failure_rate": 1.0}
    assert observe_all([failing] * 8) == [(2, "tool_failure_spike", False), (6, "tool_failure_spike", True)]


def test_held_out_divergence_with_an_evaluation_every_step():
    rising = [HEALTHY | {"reward/mean": 0.4 + 0.1 * step, "eval/reward": 0.5 - 0.1 * step} for step in range(3)]
    assert observe_all(rising) == [(2, "heldout_divergence", False)]


def test_a_held_out_alert_clears_at_the_next_evaluation_that_does_not_show_it():
    sequence, _, _ = RULE_CASES["heldout_divergence"]
    recovered = [HEALTHY, HEALTHY | {"reward/mean": 0.6, "eval/reward": 0.4}]
    assert observe_all(sequence + recovered) == [(4, "heldout_divergence", False), (6, "heldout_divergence", True)]


def episode(group, sample, *, reward=0.0, status="finished", length=4, failed_tool=None, logprob=-1.0):
    turn = TurnRecord(
        index=0,
        assistant="",
        tool_calls=[ToolCallRecord(id="c", name=failed_tool, arguments={}, raw="", error="boom")]
        if failed_tool
        else [],
    )
    return Episode(
        task_id=str(group),
        group=group,
        sample=sample,
        prompt_messages=[],
        tool_schemas=[],
        loss_mask=[1] * length,
        rollout_logprobs=[logprob] * length,
        turns=[turn],
        outcome_reward=reward,
        status=status,
    )


def test_groups_flat_at_the_top_after_the_reward_rose_are_called_solved_and_flat_from_the_start_are_not():
    solved_step = [episode(group, sample, reward=1.6) for group in range(4) for sample in range(2)]
    flat = HEALTHY | {"health/zero_variance_groups": 1.0, "reward/mean": 1.6}
    judge, config = RULE_BY_CODE["zero_variance_groups"].judge, HealthConfig()
    rose = History(recent=[{"reward": 0.65, "length": 20.0, "tools": {}}, {"reward": 1.4, "length": 20.0, "tools": {}}])
    solved = judge(StepEvidence(8, flat, solved_step), config, rose)
    assert "the policy solves these prompts" in solved.explanation and "rose from 0.650" in solved.explanation
    stuck = judge(
        StepEvidence(8, flat, solved_step), config, History(recent=[{"reward": 1.6, "length": 20.0, "tools": {}}])
    )
    assert "learns nothing from them" in stuck.explanation and "solves" not in stuck.explanation
    mixed = [*solved_step[:6], episode(3, 0, reward=0.0), episode(3, 1, reward=0.0)]  # one group flat at the bottom
    assert "learns nothing from them" in judge(StepEvidence(8, flat, mixed), config, rose).explanation
    higher = [*solved_step[:6], episode(3, 0, reward=1.6), episode(3, 1, reward=2.0)]  # a sample above the flat ones
    assert "learns nothing from them" in judge(StepEvidence(8, flat, higher), config, rose).explanation
    assert "the tasks are solved: stop" in RULE_BY_CODE["zero_variance_groups"].fix


def test_the_trajectory_ids_name_episodes_that_show_the_problem():
    episodes = [
        episode(0, 0, reward=1.0),
        episode(0, 1, reward=0.0, status="truncated", length=30),
        episode(1, 0, failed_tool="lookup", logprob=-0.01),
        episode(1, 1, failed_tool="lookup", logprob=-0.02),
        *[episode(group, sample) for group in range(2, 7) for sample in range(2)],
    ]
    evidence = StepEvidence(7, HEALTHY, episodes, {"logprob_gap": [0.0] * 13 + [0.9], "kl_ref": [0.3] + [0.0] * 13})
    by_code = {code: RULE_BY_CODE[code].judge for code in RULE_BY_CODE}
    history = History(first_entropy=50.0, recent=[{"reward": 0.4, "length": 20.0, "tools": {"lookup": [0.0, 9.0]}}] * 8)
    config = HealthConfig()
    zero = by_code["zero_variance_groups"](replace(evidence, metrics=FLAT), config, history)
    assert zero.trajectory_ids == ["7-1-0", "7-2-0", "7-3-0", "7-4-0", "7-5-0"]  # one per flat group, at most 5
    truncated = by_code["high_truncation"](
        replace(evidence, metrics=HEALTHY | {"health/truncation_rate": 0.5}), config, history
    )
    assert truncated.trajectory_ids == ["7-0-1"]
    spike = by_code["tool_failure_spike"](
        replace(evidence, metrics=HEALTHY | {"tools/lookup/failure_rate": 1.0}), config, history
    )
    assert spike.trajectory_ids == ["7-1-0"] and "'lookup' failed 100% of its 9 calls" in spike.explanation
    collapse = by_code["entropy_collapse"](evidence, config, history)
    assert collapse.trajectory_ids[:2] == ["7-1-0", "7-1-1"]  # the most certain episodes first
    longest = by_code["response_length_explosion"](
        replace(evidence, metrics=HEALTHY | {"episode/response_length_mean": 40.0}),
        config,
        History(
            recent=[{"reward": 0.4, "length": 20.0, "tools": {}}] * 4
            + [{"reward": 0.4, "length": 40.0, "tools": {}}] * 3
        ),
    )
    assert longest.trajectory_ids[0] == "7-0-1"
    gap = by_code["logprob_gap"](replace(evidence, metrics=HEALTHY | {"actor/logprob_gap": 0.1}), config, history)
    assert gap.trajectory_ids[0] == "7-6-1"
    kl = by_code["kl_above_bound"](replace(evidence, metrics=HEALTHY | {"actor/kl_ref": 0.3}), config, history)
    assert kl.trajectory_ids[0] == "7-0-0"
    assert (
        len(
            by_code["no_tool_calls"](
                replace(evidence, metrics=HEALTHY | {"tools/calls": 0.0}), config, history
            ).trajectory_ids
        )
        == MAX_EXAMPLES
    )


def test_a_non_finite_event_is_an_error_with_the_explanation():
    event = non_finite_event(3, "step 3: the gradient norm is nan")
    validator_for("healthEvent").validate(event)
    assert (event["code"], event["severity"], event["step"], event["since_step"]) == ("non_finite", "error", 3, 3)
    assert "the gradient norm is nan" in event["message"] and "resume" in event["fix"]


def test_the_streaks_and_history_survive_a_checkpoint():
    monitor = HealthMonitor()
    monitor.observe(StepEvidence(1, FLAT))
    state = json.loads(json.dumps(monitor.state_dict()))  # as state.json holds it
    state["health"]["retired_check"] = {"active": True, "since_step": 1, "held": 3, "absent": 0}
    restored = HealthMonitor()
    restored.load_state_dict(state)
    assert restored.active == []  # a check since removed is forgotten
    assert restored.history == monitor.history
    assert [(e["code"], e["since_step"]) for e in restored.observe(StepEvidence(2, FLAT))] == [
        ("zero_variance_groups", 1)
    ]


def test_the_metrics_the_checks_read_count_offered_tools_and_no_groups_of_one():
    episodes = [
        Episode(task_id=str(group), group=group, sample=0, prompt_messages=[], tool_schemas=[{"name": "lookup"}])
        for group in range(4)
    ]
    metrics = rollout_metrics(episodes)
    assert metrics["tools/offered"] == 1.0 and metrics["tools/calls"] == 0.0
    assert metrics["health/zero_variance_groups"] == 0.0  # group_size 1 (PPO, REINFORCE++) is not a flat group


NEVER_REWARDED_ENV = '''
from agentrl import EpisodeScore, ToolEnv
from agentrl.examples.lookup.env import LookupEnv

class NeverRewarded(LookupEnv):
    """The lookup task with its tool, but no reward for anything: every group is flat, as in the old demo."""
    def step(self, assistant_text, calls):
        return ToolEnv.step(self, assistant_text, calls)
    def score(self, final_text):
        return EpisodeScore(reward=0.0)
'''


def never_rewarded(tmp_path, *overrides):
    (tmp_path / "never_rewarded.py").write_text(NEVER_REWARDED_ENV)
    return load_config(
        EXAMPLE_CONFIG,
        [
            f"env.module={tmp_path / 'never_rewarded.py'}",
            "env.class_name=NeverRewarded",
            "rollout.group_size=4",
            "train.batch_size=8",
            "train.micro_batch_size=8",
            *overrides,
        ],
    )


def health_events(run_dir):
    return [e["data"] for e in read_events(run_dir) if e["type"] == "health"]


def test_a_run_that_cannot_learn_warns_at_step_2_in_the_log_and_the_step_line(tmp_path, capsys):
    run_dir = train(
        never_rewarded(tmp_path, "train.steps=2"),
        runs_dir=tmp_path / "runs",
        config_base_dir=EXAMPLE_CONFIG.parent,
        progress=True,
    )
    events = health_events(run_dir)
    assert ("zero_variance_groups", 2, 1, False) in [
        (e["code"], e["step"], e["since_step"], e["resolved"]) for e in events
    ]
    for event in events:
        validator_for("healthEvent").validate(event)
    flat = next(e for e in events if e["code"] == "zero_variance_groups")
    assert flat["metrics"] == {"health/zero_variance_groups": 1.0, "reward/mean": 0.0}
    recorded = {e["data"]["id"]: e["data"] for e in read_events(run_dir) if e["type"] == "trajectory"}
    assert flat["trajectory_ids"] == ["2-0-0", "2-1-0"]  # one per flat group of step 2, each recorded
    assert all(recorded[trajectory]["step"] == 2 for trajectory in flat["trajectory_ids"])
    printed = capsys.readouterr().err
    step_line = next(line for line in printed.splitlines() if line.startswith("step 2/2"))
    assert "WARN zero_variance_groups" in step_line
    assert f"WARN zero_variance_groups: {flat['message']}" in printed and f"fix: {flat['fix']}" in printed


def test_a_resumed_run_reports_the_alerts_an_unbroken_one_would(tmp_path):
    config = never_rewarded(tmp_path, "train.steps=4", "train.checkpoint_every=2")
    straight = train(config, runs_dir=tmp_path / "a", config_base_dir=EXAMPLE_CONFIG.parent)
    halved = train(config, runs_dir=tmp_path / "b", max_steps=2, config_base_dir=EXAMPLE_CONFIG.parent)
    train(None, runs_dir=tmp_path / "b", resume_dir=halved)
    assert health_events(straight) == health_events(halved)
    assert health_events(straight)  # the run above does warn


def test_a_non_finite_gradient_raises_an_error_event_and_leaves_a_checkpoint_that_loads(tmp_path, capsys):
    """A reward too large for float32 makes the loss and the gradient non-finite at step 2: the step stops before the
    optimizer, with an error health event. The reward bound, which refuses such a reward before the update, is
    lifted here (rollout.max_abs_reward) to reach the gradient's own check."""
    (tmp_path / "huge.py").write_text(HUGE_REWARD_ENV)
    config = never_rewarded(
        tmp_path,
        "train.steps=3",
        "train.checkpoint_every=1",
        f"env.module={tmp_path / 'huge.py'}",
        "env.class_name=HugeFromStep2",
        "rollout.max_abs_reward=1e300",
    )
    with pytest.raises(ValueError, match="step 2: the gradient norm is (nan|inf)"):
        train(config, runs_dir=tmp_path / "runs", run_id="huge", config_base_dir=EXAMPLE_CONFIG.parent, progress=True)
    run_dir = tmp_path / "runs" / "huge"
    [event] = [e for e in health_events(run_dir) if e["code"] == "non_finite"]
    assert (event["severity"], event["step"], event["resolved"]) == ("error", 2, False)
    assert "the optimizer step was not taken" in event["message"]
    assert f"ERROR non_finite: {event['message']}" in capsys.readouterr().err
    assert latest_status(read_events(run_dir))["status"] == "failed"

    # The checkpoint of step 1 is whole: it loads into a fresh policy and learner, and holds finite weights.
    [checkpoint] = RunStore(run_dir).checkpoints()
    assert checkpoint.name == "step-000001"
    state = json.loads((checkpoint / "state.json").read_text())
    schemas.validator_for("run-folder.schema.json", "checkpointState").validate(state)
    model, _, device = load_policy(config.model, config.seed)
    load_policy_weights(model, checkpoint)  # every tensor present, none extra (it says which otherwise)
    assert all(torch.isfinite(tensor).all() for tensor in model.state_dict().values())
    Learner(model, _, config, device).load_state_dict(torch.load(checkpoint / "learner.pt", weights_only=False))
    assert not (run_dir / "checkpoints" / "step-000002").exists() and not list((run_dir / "checkpoints").glob(".tmp-*"))


HUGE_REWARD_ENV = """
from agentrl import EpisodeScore
from agentrl.examples.lookup.env import LookupEnv

class HugeFromStep2(LookupEnv):
    \"\"\"Rewards 0 or 1 during step 1 (8 episodes), then one episode of each group 1e39, past float32's range.\"\"\"
    scored = 0
    def score(self, final_text):
        HugeFromStep2.scored += 1
        if HugeFromStep2.scored <= 8:
            return EpisodeScore(reward=float(HugeFromStep2.scored % 2))
        return EpisodeScore(reward=1e39 if HugeFromStep2.scored % 4 == 1 else 0.0)
"""


def test_held_out_scores_join_the_metrics_every_eval_every_steps(tmp_path):
    config = never_rewarded(
        tmp_path,
        "train.steps=4",
        "data.eval=tasks.jsonl",
        "train.eval_every=2",
        "train.eval_limit=5",
        "rollout.temperature=1.0",
    )
    run_dir = train(config, runs_dir=tmp_path / "runs", config_base_dir=EXAMPLE_CONFIG.parent)
    metrics = {e["data"]["step"]: e["data"]["metrics"] for e in read_events(run_dir) if e["type"] == "metrics"}
    assert [step for step, values in metrics.items() if "eval/reward" in values] == [2, 4]
    assert metrics[2]["eval/n"] == 5.0 and metrics[2]["eval/reward"] == 0.0  # NeverRewarded scores nothing
    assert metrics[2]["perf/eval_time_s"] > 0
    assert not any(name.startswith("eval/") for name in metrics[1])


def test_eval_every_needs_held_out_data(tmp_path):
    with pytest.raises(ConfigError, match="train.eval_every needs data.eval"):
        never_rewarded(tmp_path, "train.eval_every=2")

"""The trainer says when nothing can be learned: the monitor on made-up metrics, then a real run that cannot learn."""

import pytest

from agentrl.run.config import load_config
from agentrl.rollout.episode import Episode
from agentrl.run.health import CHECKS, CONSECUTIVE_STEPS, HealthMonitor
from agentrl.run.metrics import rollout_metrics
from agentrl.run.runstore import read_events
from agentrl.server.protocol import validator_for
from agentrl.run.trainer import train

from conftest import EXAMPLE_CONFIG

HEALTHY = {"health/zero_variance_groups": 0.25, "reward/mean": 0.4, "tools/offered": 1.0, "tools/calls": 9.0,
           "health/truncation_rate": 0.1}
FLAT = HEALTHY | {"health/zero_variance_groups": 1.0, "reward/mean": 0.0}


def observe_all(steps):
    """(step, code, resolved) of every event a monitor reports over these steps' metrics."""
    monitor = HealthMonitor()
    return [(step, e["code"], e["resolved"]) for step, metrics in enumerate(steps, 1)
            for e in monitor.observe(step, metrics)]


def test_a_healthy_run_reports_nothing():
    assert observe_all([HEALTHY] * 6) == []


def test_an_alert_starts_after_two_steps_in_a_row_once_and_clears_after_two_clear_steps():
    assert CONSECUTIVE_STEPS == 2
    steps = [HEALTHY, FLAT, FLAT, FLAT, HEALTHY, FLAT, HEALTHY, HEALTHY, FLAT]
    assert observe_all(steps) == [(3, "zero_variance_groups", False), (8, "zero_variance_groups", True)]


def test_one_bad_step_now_and_then_is_not_an_alert():
    assert observe_all([FLAT, HEALTHY, FLAT, HEALTHY, FLAT]) == []


@pytest.mark.parametrize(("metrics", "code"), [
    (HEALTHY | {"health/zero_variance_groups": 0.75}, "zero_variance_groups"),
    (HEALTHY | {"tools/calls": 0.0}, "no_tool_calls"),
    (HEALTHY | {"health/truncation_rate": 1.0}, "all_truncated"),
])
def test_each_check_names_its_cause_fix_and_figures(metrics, code):
    monitor = HealthMonitor()
    assert monitor.observe(4, metrics) == []  # one step is not yet a pattern
    [event] = monitor.observe(5, metrics)
    validator_for("healthEvent").validate(event)
    assert event["code"] == code and event["step"] == 5 and event["since_step"] == 4 and not event["resolved"]
    assert "since step 4" in event["message"] and "rollout." in event["fix"]
    assert set(event["metrics"]) == set(next(c for c in CHECKS if c.code == code).metrics)
    assert monitor.active == [code]


def test_an_env_without_tools_never_warns_of_no_tool_calls():
    assert observe_all([HEALTHY | {"tools/offered": 0.0, "tools/calls": 0.0}] * 4) == []


def test_the_streaks_survive_a_checkpoint():
    monitor = HealthMonitor()
    monitor.observe(1, FLAT)
    retired = {"retired_check": {"active": True, "since_step": 1, "held": 3, "absent": 0}}
    restored = HealthMonitor()
    restored.load_state_dict(monitor.state_dict() | retired)
    assert restored.active == []  # a check since removed is forgotten
    assert [(e["code"], e["since_step"]) for e in restored.observe(2, FLAT)] == [("zero_variance_groups", 1)]


def test_the_metrics_the_checks_read_count_offered_tools_and_no_groups_of_one():
    episodes = [Episode(task_id=str(group), group=group, sample=0, prompt_messages=[],
                        tool_schemas=[{"name": "lookup"}]) for group in range(4)]
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
    return load_config(EXAMPLE_CONFIG, [f"env.module={tmp_path / 'never_rewarded.py'}", "env.class_name=NeverRewarded",
                                        "rollout.group_size=4", "train.batch_size=8", "train.micro_batch_size=8",
                                        *overrides])


def health_events(run_dir):
    return [e["data"] for e in read_events(run_dir) if e["type"] == "health"]


def test_a_run_that_cannot_learn_warns_at_step_2_in_the_log_and_the_step_line(tmp_path, capsys):
    run_dir = train(never_rewarded(tmp_path, "train.steps=2"), runs_dir=tmp_path / "runs",
                    config_base_dir=EXAMPLE_CONFIG.parent, progress=True)
    events = health_events(run_dir)
    assert ("zero_variance_groups", 2, 1, False) in [(e["code"], e["step"], e["since_step"], e["resolved"]) for e in events]
    for event in events:
        validator_for("healthEvent").validate(event)
    flat = next(e for e in events if e["code"] == "zero_variance_groups")
    assert flat["metrics"] == {"health/zero_variance_groups": 1.0, "reward/mean": 0.0}
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

"""End to end: the train loop learns, resumes exactly, survives failures, stops gracefully."""

import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agentrl.contract.config import load_config
from agentrl.contract.training_config import ALGORITHM_NAMES, POLICY_LOSS_NAMES
from agentrl.rollout.hf_engine import HfRolloutEngine
from agentrl.rollout.scripted import ScriptedPolicy
from agentrl.run.runstore import latest_status, read_events
from agentrl.run.trainer import train
from conftest import EXAMPLE_CONFIG, PROTOCOL

AGENTRL = [sys.executable, "-m", "agentrl.cli"]


def example(*overrides):
    return load_config(EXAMPLE_CONFIG, list(overrides))


def metrics_by_step(run_dir):
    return {e["data"]["step"]: e["data"]["metrics"] for e in read_events(run_dir) if e["type"] == "metrics"}


def trajectories(run_dir):
    records = []
    for path in sorted((Path(run_dir) / "trajectories").glob("*.trajectories.jsonl")):
        records += [json.loads(line) for line in path.read_text().splitlines()]
    return records


@pytest.mark.parametrize(
    ("algorithm", "policy_loss"),
    # sft learns from given episodes (test_sft.py); rft imitates its best rollouts by its default loss, nll
    [(name, "nll" if name == "rft" else "clipped") for name in ALGORITHM_NAMES if name != "sft"]
    + [("grpo", name) for name in POLICY_LOSS_NAMES if name != "clipped"],
)
def test_tiny_model_learns_the_lookup_task(tmp_path, algorithm, policy_loss):
    """Every algorithm, and every policy loss beside the default, trains the tiny model end to end."""
    config = example(
        f"algorithm.name={algorithm}",
        f"algorithm.policy_loss={policy_loss}",
        "train.steps=20",
        "train.checkpoint_every=20",
    )
    run_dir = train(config, runs_dir=tmp_path, config_base_dir=EXAMPLE_CONFIG.parent)
    rewards = [m["reward/mean"] for _, m in sorted(metrics_by_step(run_dir).items())]
    assert len(rewards) == 20
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert last > first + 0.08, f"{algorithm} with the {policy_loss} loss did not learn: {rewards}"
    assert latest_status(read_events(run_dir))["status"] == "completed"


def test_a_step_trains_under_gradient_checkpointing(tmp_path):
    """model.gradient_checkpointing, which the memory plan suggests for a run that does not fit, trains the example
    (issue 49: its first update died where the learner runs a group's shared prompt once)."""
    config = example("model.gradient_checkpointing=true", "train.steps=1")
    run_dir = train(config, runs_dir=tmp_path, config_base_dir=EXAMPLE_CONFIG.parent)
    metrics = metrics_by_step(run_dir)
    assert list(metrics) == [1] and math.isfinite(metrics[1]["actor/grad_norm"]) and metrics[1]["actor/grad_norm"] > 0
    assert latest_status(read_events(run_dir))["status"] == "completed"


def test_every_trajectory_line_validates(tmp_path, trajectory_validator):
    run_dir = train(example("train.steps=2"), runs_dir=tmp_path, config_base_dir=EXAMPLE_CONFIG.parent)
    records = trajectories(run_dir)
    assert len(records) == 2 * 16
    for record in records:
        trajectory_validator.validate(record)
        tokens = record["tokens"]
        per_sampled = {"trainer_logprob", "entropy", "is_weight"}  # one entry per sampled token
        assert len({len(values) for name, values in tokens.items() if name not in per_sampled}) == 1  # parallel
        sampled = sum(logprob is not None for logprob in tokens["logprob"])
        assert all(len(tokens[name]) == sampled for name in per_sampled & set(tokens))
    summaries = [e for e in read_events(run_dir) if e["type"] == "trajectory"]
    assert [s["data"]["id"] for s in summaries] == [r["id"] for r in records]
    seqs = [e["seq"] for e in read_events(run_dir)]
    assert seqs == list(range(1, len(seqs) + 1))


def test_resume_gives_identical_trajectories_and_metrics(tmp_path):
    config = example("train.steps=4", "train.checkpoint_every=2")
    straight = train(config, runs_dir=tmp_path / "a", config_base_dir=EXAMPLE_CONFIG.parent)
    halved = train(config, runs_dir=tmp_path / "b", max_steps=2, config_base_dir=EXAMPLE_CONFIG.parent)
    assert latest_status(read_events(halved))["status"] == "stopped"
    before = len(read_events(halved))
    train(None, runs_dir=tmp_path / "b", resume_dir=halved)
    assert latest_status(read_events(halved))["status"] == "completed"
    resumed = [(e["type"], e["data"]) for e in read_events(halved)[before:]]
    # where it resumes is said before the model loads, not "step 0" until the first step ends
    assert resumed[0] == (
        "status",
        {"status": "running", "step": 2, "total_steps": 4, "message": "resuming from the checkpoint at step 2"},
    )
    phases = [(data["phase"], data["step"]) for kind, data in resumed if kind == "phase"]
    assert phases[:3] == [("loading_model", 2), ("starting_engine", 2), ("restoring_checkpoint", 2)]

    def comparable(records):
        return [{k: v for k, v in r.items() if k != "run_id"} for r in records]

    assert comparable(trajectories(straight)) == comparable(trajectories(halved))
    a, b = metrics_by_step(straight), metrics_by_step(halved)
    assert sorted(a) == sorted(b) == [1, 2, 3, 4]
    for step in a:
        assert {k: v for k, v in a[step].items() if not k.startswith("perf/")} == {
            k: v for k, v in b[step].items() if not k.startswith("perf/")
        }


FAILING_ENV = """
from agentrl import EpisodeScore, ToolEnv
from failing_tools import Boom, Garbage, Hang  # the tests' folder is on sys.path

class FailingEnv(ToolEnv):
    def __init__(self, **args):
        self.tools = [Boom(), Hang(), Garbage()]
    def reset(self, task):
        return [{"role": "user", "content": task["q"]}]
    def score(self, final_text):
        return EpisodeScore(reward=float("ok" in final_text), breakdown={"ok": float("ok" in final_text)})
"""

SCRIPT = [
    '<tool_call>{"name": "boom", "arguments": {}}</tool_call><tool_call>{"name": "hang", "arguments": {}}</tool_call>'
    '<tool_call>{"name": "garbage", "arguments": {}}</tool_call><tool_call>{"name": "nope", "arguments": {}}</tool_call>',
    '<tool_call>{"name": "boom", "arguments": {</tool_call>',
    "ok",
]


def test_tool_failures_malformed_calls_and_overflow_are_counted(tmp_path):
    (tmp_path / "env.py").write_text(FAILING_ENV)
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"q": "go"}) + "\n")
    (tmp_path / "f.agentrl.yaml").write_text(
        "env: {module: env.py, class_name: FailingEnv}\ndata: {train: tasks.jsonl}\n"
        "rollout: {group_size: 2, max_turns: 3, max_new_tokens: 200, max_context: 2000}\n"
        "train: {steps: 1, batch_size: 2}\n"
    )

    run_dir = train(
        load_config(tmp_path / "f.agentrl.yaml"),
        runs_dir=tmp_path / "runs",
        config_base_dir=tmp_path,
        policy=ScriptedPolicy(SCRIPT),
    )
    metrics = metrics_by_step(run_dir)[1]
    assert metrics["tools/errors/exception"] == 2  # boom raised once per episode
    assert metrics["tools/errors/timeout"] == 2
    assert metrics["tools/errors/bad_result"] == 2
    assert metrics["tools/errors/unknown_tool"] == 2
    assert metrics["tools/errors/bad_json"] == 2
    assert metrics["health/malformed_calls"] == 2
    assert metrics["reward/ok"] == 1.0
    [record, _] = trajectories(run_dir)
    assert record["status"] == "finished" and record["stats"]["num_tool_errors"] == 5

    overflow = train(
        load_config(tmp_path / "f.agentrl.yaml", ["rollout.max_context=420"]),
        runs_dir=tmp_path / "runs",
        config_base_dir=tmp_path,
        policy=ScriptedPolicy(SCRIPT),
    )
    assert metrics_by_step(overflow)[1]["health/truncation_rate"] == 1.0
    assert latest_status(read_events(overflow))["status"] == "completed"


def test_a_tool_that_ends_its_process_fails_only_its_call_under_process_isolation(tmp_path):
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"q": "go"}) + "\n")
    (tmp_path / "f.agentrl.yaml").write_text(
        "env: {module: failing_tools, class_name: FailingToolsEnv}\ndata: {train: tasks.jsonl}\n"
        "rollout: {group_size: 2, max_turns: 3, max_new_tokens: 200, max_context: 8000, tool_isolation: process}\n"
        "train: {steps: 2, batch_size: 2}\n"
    )
    policy = ScriptedPolicy(
        [
            '<tool_call>{"name": "ends_process", "arguments": {}}</tool_call>',
            '<tool_call>{"name": "counter", "arguments": {}}</tool_call>',
            "ok",
        ]
    )
    run_dir = train(
        load_config(tmp_path / "f.agentrl.yaml"), runs_dir=tmp_path / "runs", config_base_dir=tmp_path, policy=policy
    )
    assert latest_status(read_events(run_dir))["status"] == "completed"
    assert [m["tools/errors/exception"] for m in metrics_by_step(run_dir).values()] == [2, 2]
    for record in trajectories(run_dir):
        ended, counted = (turn["tool_calls"][0] for turn in record["turns"][:2])
        assert "ends_process did not answer: the tool worker process ended (exit code 3)" in ended["error"]
        assert (counted["error"], counted["result"]) == (None, 1)  # a new worker, and this episode's own env


NAN_ENV = '''
import math
from agentrl import EpisodeScore
from agentrl.examples.lookup.env import LookupEnv

class NonFiniteFromStep2(LookupEnv):
    """Scores finitely during step 1 (4 episodes), then gives the first episode of each later step a NaN."""
    scored = 0
    def score(self, final_text):
        NonFiniteFromStep2.scored += 1
        score = super().score(final_text)
        if NonFiniteFromStep2.scored > 4 and NonFiniteFromStep2.scored % 4 == 1:
            return EpisodeScore(reward=math.nan, breakdown={**score.breakdown, "bonus": math.inf})
        return score
'''


@pytest.mark.parametrize("policy", ["fail", "drop"])
def test_a_non_finite_reward_stops_the_step_or_is_dropped_and_counted(tmp_path, policy):
    (tmp_path / "env.py").write_text(NAN_ENV)
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps({"key": str(k)}) + "\n" for k in range(4)))
    config = example(
        "env.module=" + str(tmp_path / "env.py"),
        "env.class_name=NonFiniteFromStep2",
        "data.train=" + str(tmp_path / "tasks.jsonl"),
        "rollout.group_size=2",
        "train.batch_size=4",
        "train.micro_batch_size=4",
        "train.steps=3",
        "train.checkpoint_every=1",
        f"train.non_finite_rewards={policy}",
    )
    if policy == "fail":
        with pytest.raises(
            ValueError,
            match=r"step 2: episode 0/0 of task .*: the outcome reward from the env's score\(\) is nan, not a finite "
            r"number; the reward breakdown's 'bonus' from the env's score\(\) is inf, not a finite number\. Nothing was "
            r"updated",
        ):
            train(config, runs_dir=tmp_path / "runs", run_id="nan")
        events = read_events(tmp_path / "runs" / "nan")
        failed = latest_status(events)
        assert failed["status"] == "failed" and failed["step"] == 1  # step 1 completed, step 2 did not
        assert "train.non_finite_rewards: drop" in failed["message"]
        assert [e["data"]["step"] for e in events if e["type"] == "checkpoint"] == [1]  # the last good one stands
        return
    run_dir = train(config, runs_dir=tmp_path / "runs", run_id="nan")
    metrics = metrics_by_step(run_dir)
    assert "health/dropped_non_finite" not in metrics[1]
    assert metrics[2]["health/dropped_non_finite"] == metrics[3]["health/dropped_non_finite"] == 1.0
    assert all(math.isfinite(value) for step in metrics.values() for value in step.values())
    assert len(trajectories(run_dir)) == 4 + 3 + 3  # the dropped episodes are not recorded
    assert latest_status(read_events(run_dir))["status"] == "completed"


def test_a_nan_gradient_stops_before_the_optimizer_step(tiny):
    import copy

    import torch
    from agentrl.learning.learner import Learner, NonFiniteError

    model, tokenizer = tiny
    config = example("rollout.group_size=2", "train.batch_size=2")
    engine = HfRolloutEngine(
        model,
        tokenizer,
        __import__("agentrl.examples.lookup.env", fromlist=["LookupEnv"]).LookupEnv,
        config.rollout,
        torch.device("cpu"),
    )
    episodes = engine.run([{"key": "1"}], group_size=2, seed=0)
    episodes[0].outcome_reward, episodes[1].outcome_reward = 0.0, 1.0
    broken = copy.deepcopy(model)
    with torch.no_grad():
        next(broken.parameters()).view(-1)[0] = float("nan")
    before = [p.detach().clone() for p in broken.parameters()]
    with pytest.raises(NonFiniteError, match="the gradient norm is nan .*the optimizer step was not taken"):
        Learner(broken, tokenizer, config, torch.device("cpu")).update(episodes)
    assert all(torch.equal(a.nan_to_num(), b.nan_to_num()) for a, b in zip(broken.parameters(), before))  # unchanged


def test_a_try_run_builds_no_learner(tmp_path, monkeypatch):
    def no_learner(*args, **kwargs):
        raise AssertionError("a Try run built a learner")

    monkeypatch.setattr("agentrl.run.trainer.Learner", no_learner)
    config = example("algorithm.kl.coef=0.1")  # a learner would also copy the model as its reference
    run_dir = train(config, runs_dir=tmp_path, config_base_dir=EXAMPLE_CONFIG.parent, rollout_only_episodes=2)
    assert latest_status(read_events(run_dir))["status"] == "completed" and len(trajectories(run_dir)) == 2


def test_a_try_run_samples_with_the_hf_engine_where_its_config_leaves_the_engine_to_auto(tmp_path, monkeypatch):
    """A Try is a handful of episodes: vLLM's start (half a minute or more) would be most of it. Its frozen config
    says the engine that ran; rollout.engine vllm, asked for by name, is kept."""
    from agentrl.rollout import factory

    asked = []
    original = factory.make_rollout_engine

    def recording(model, tokenizer, env_factory, rollout_cfg, *args, **kwargs):
        asked.append(rollout_cfg.engine)
        return original(model, tokenizer, env_factory, rollout_cfg.model_copy(update={"engine": "hf"}), *args, **kwargs)

    monkeypatch.setattr(factory, "make_rollout_engine", recording)
    for engine in ("auto", "hf", "vllm"):
        config = example(f"rollout.engine={engine}")
        run_dir = train(config, runs_dir=tmp_path, config_base_dir=EXAMPLE_CONFIG.parent, rollout_only_episodes=1)
        assert load_config(run_dir / "config.yaml", inside=run_dir).rollout.engine == asked[-1]
    assert asked == ["hf", "hf", "vllm"]


def test_a_run_says_what_it_does_a_handful_of_times_a_step(tmp_path):
    """What the editor shows instead of a silent minute: loading, the engine, each step's rollouts (with a count of
    the episodes ended), update, evaluation and checkpoint, in order."""
    config = example(
        "train.steps=2", "train.checkpoint_every=2", "train.eval_every=2", "data.eval=tasks.jsonl", "train.eval_limit=2"
    )
    run_dir = train(config, runs_dir=tmp_path, config_base_dir=EXAMPLE_CONFIG.parent)
    said = [
        (e["data"]["phase"], e["data"]["step"]) if e["type"] == "phase" else (e["type"], e["data"].get("step"))
        for e in read_events(run_dir)
        if e["type"] in ("phase", "status", "metrics")
    ]
    rollouts_of = [step for phase, step in said if phase == "rollouts"]
    assert said[:3] == [("status", 0), ("loading_model", 0), ("starting_engine", 0)]
    assert said[3:] == [
        *[("rollouts", 1)] * rollouts_of.count(1),
        ("updating", 1),
        ("metrics", 1),
        ("status", 1),
        *[("rollouts", 2)] * rollouts_of.count(2),
        ("updating", 2),
        ("evaluating", 2),
        ("metrics", 2),
        ("status", 2),
        ("checkpointing", 2),
        ("status", 2),
    ]
    assert 1 <= rollouts_of.count(1) <= 4  # the step's start, then at most a count at each quarter


def test_cli_trains_the_example_and_validates(tmp_path, trajectory_validator):
    """How fast it trains is benchmarks/bench_step.py's to say: a timed assertion here failed on a loaded machine."""
    done = subprocess.run(
        [*AGENTRL, "train", str(EXAMPLE_CONFIG), "--set", "train.steps=3", "--runs-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "step 3/3" in done.stderr
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    for record in trajectories(run_dir):
        trajectory_validator.validate(record)


def test_cli_config_error_names_key_value_and_allowed(tmp_path):
    done = subprocess.run(
        [*AGENTRL, "train", str(EXAMPLE_CONFIG), "--set", "algorithm.name=a2c", "--set", "train.bogus=1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert (
        "algorithm.name: Input should be 'gigpo', 'grpo', 'ppo', 'reinforce_pp', 'rft', 'rloo', 'sft' or 'step_ppo', or MODULE:NAME "
        "of your own (e.g. my_rl.py:MyAlgorithm) (got 'a2c')" in done.stderr
    )
    assert "train.bogus: unknown key" in done.stderr
    done = subprocess.run(
        [*AGENTRL, "train", str(EXAMPLE_CONFIG), "--set", "rollout.group_size=3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "train.batch_size (16) must be divisible by rollout.group_size (3)" in done.stderr


def test_schema_command_matches_the_committed_schema():
    done = subprocess.run([*AGENTRL, "schema"], capture_output=True, text=True, timeout=60, check=True)
    committed = (PROTOCOL / "schemas" / "run-config.schema.json").read_text()
    assert json.loads(done.stdout) == json.loads(committed), (
        "run `agentrl schema > protocol/schemas/run-config.schema.json`"
    )


def test_sigterm_stops_gracefully_with_a_checkpoint(tmp_path):
    proc = subprocess.Popen(
        [
            *AGENTRL,
            "train",
            str(EXAMPLE_CONFIG),
            "--set",
            "train.steps=500",
            "--set",
            "train.checkpoint_every=1000",
            "--runs-dir",
            str(tmp_path),
            "--run-id",
            "r",
            "--quiet",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    run_dir = tmp_path / "r"
    deadline = time.time() + 60
    while time.time() < deadline and not any(e["type"] == "metrics" for e in read_events(run_dir)):
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    status = latest_status(read_events(run_dir))
    assert status["status"] == "stopped" and 1 <= status["step"] < 500
    statuses = [e["data"]["status"] for e in read_events(run_dir) if e["type"] == "status"]
    assert statuses[-2:] == ["stopping", "stopped"]  # said when asked, not a step later
    assert (run_dir / "checkpoints" / f"step-{status['step']:06d}" / "policy" / "model.safetensors").exists()
    assert not (run_dir / "pid").exists()


def test_env_check_cli(tmp_path):
    done = subprocess.run(
        [*AGENTRL, "env", "check", str(EXAMPLE_CONFIG.parent), "--json"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    [info] = json.loads(done.stdout)
    assert "status finished, reward 2" in info["message"]
    (tmp_path / "x.agentrl.yaml").write_text("env: {module: missing.py, class_name: E}\ndata: {train: t.jsonl}\n")
    done = subprocess.run([*AGENTRL, "env", "check", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "env.module: file not found" in done.stderr

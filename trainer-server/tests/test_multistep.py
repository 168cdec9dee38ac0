"""Agents that take several steps: the parcel-lockers recipe (state the agent changes, a directory that is busy at
random, a reward on the building's final state), the step-level algorithms trained end to end on it, the state
keys and step figures in trajectories, and the `steps/` metrics."""

import functools
import json
import subprocess
import sys

import pytest
from agentrl import ToolCallOutcome
from agentrl.contract.config import load_config
from agentrl.environment.tool import ToolCallRecord
from agentrl.environment.toolprocess import ToolWorker
from agentrl.recipes.lockers import tasks as lockers_tasks
from agentrl.recipes.lockers.env import BUSY, EXAMPLE, LockersEnv
from agentrl.rollout.episode import Episode, TurnRecord
from agentrl.rollout.scripted import ScriptedPolicy
from agentrl.run.metrics import step_metrics
from agentrl.run.runstore import latest_status, read_events
from agentrl.run.trainer import train
from conftest import REPO, rollout_only_records

LOCKERS = REPO / "trainer-server" / "agentrl" / "recipes" / "lockers"
TASK = {
    "id": "t",
    "question": "Deliver the parcel to Rosa.",
    "recipient": "Rosa",
    "directory": {"Rosa": 11, "Emil": 92},
}


def started(seed=0, **args):
    env = LockersEnv(**args)
    env.episode_seed = seed
    env.reset(TASK)
    return env


def call(env, name, argument):
    """One call as the rollout makes it: the Tool runs, its outcome goes to env.step."""
    tool = env.tool_map()[name]
    key = "name" if name == "find" else "locker"
    outcome = ToolCallOutcome(id="c", name=name, arguments={key: argument}, raw="")
    try:
        outcome.result = tool.execute(argument)
    except Exception as err:  # noqa: BLE001 - as execute_call reports a ToolFailure
        outcome.error = str(err)
    return outcome, env.step("", [outcome])


def test_splits_are_reproducible_disjoint_and_reveal_the_locker_only_through_the_directory(tmp_path):
    lockers_tasks.write_splits(tmp_path)
    for name in ("train.jsonl", "heldout.jsonl"):
        assert (tmp_path / name).read_bytes() == (lockers_tasks.DATA / name).read_bytes(), name
    train_tasks = [json.loads(line) for line in (tmp_path / "train.jsonl").open()]
    heldout = [json.loads(line) for line in (tmp_path / "heldout.jsonl").open()]
    assert len(heldout) >= 200
    assert not {lockers_tasks.task_key(t) for t in train_tasks} & {lockers_tasks.task_key(t) for t in heldout}
    for task in heldout:
        assert task["recipient"] in task["directory"] and task["recipient"] != lockers_tasks.EXAMPLE_NAME
        assert str(task["directory"][task["recipient"]]) not in task["question"]  # only `find` reveals it


def test_the_tools_change_the_building_and_the_reward_judges_its_final_state():
    env = started(busy_rate=0.0)
    assert env.state_key() == "parcel at the desk; recipient's locker unknown"
    outcome, _ = call(env, "find", "rosa")
    assert outcome.result == "Rosa: locker 11"
    assert env.state_key() == "parcel at the desk; recipient's locker known"
    call(env, "put", "92")  # the wrong locker: the parcel is there now
    assert env.state_key() == "parcel in locker 92; recipient's locker known"
    assert env.score("Done.").reward == 0.0
    call(env, "put", "locker 11")
    assert env.score("I put it in locker 92.").reward == 1.0  # the building's state, not the text
    call(env, "put", "92")
    assert env.score("Delivered to locker 11.").breakdown == {"accuracy": 0.0, "looked_up": 1.0, "put": 1.0}
    for bad, says in (("Rosa", "not a locker number"), ("7", "no locker 7")):
        outcome, _ = call(env, "put", bad)
        assert says in outcome.error
    outcome, _ = call(env, "find", "Bob")
    assert outcome.error == "No one called Bob lives here."


def test_the_directory_is_busy_at_random_seeded_per_episode():
    def lookups(seed):
        env = started(seed)
        return [call(env, "find", "Rosa")[0].error == BUSY for _ in range(6)]

    assert lookups(3) == lookups(3)  # the same episode seed replays the same answers
    assert len({tuple(lookups(seed)) for seed in range(20)}) > 5  # and the samples of a group differ
    busy = [started(seed).tools[0].env.building.is_busy("rosa") for seed in range(4000)]
    assert sum(busy) / len(busy) == pytest.approx(0.25, abs=0.03)
    env = started(busy_rate=0.0)
    assert call(env, "find", "Rosa")[0].error is None
    with pytest.raises(ValueError, match="busy_rate"):
        LockersEnv(busy_rate=1.0)


def test_a_failed_lookup_leaves_the_state_as_it_was_and_process_rewards_follow_the_building():
    seed = next(s for s in range(100) if started(s).building.is_busy("rosa"))  # this episode's first lookup fails
    env = started(seed, process_reward=0.2)
    before = env.state_key()
    outcome, result = call(env, "find", "Rosa")
    assert outcome.error == BUSY and env.state_key() == before and result.reward == 0.0
    outcome, result = call(env, "find", "Rosa")
    assert outcome.error is None and result.reward == pytest.approx(0.2)  # the locker revealed: once
    assert call(env, "find", "Rosa")[1].reward == 0.0
    assert call(env, "put", "92")[1].reward == pytest.approx(-0.2)  # into the wrong locker
    assert call(env, "put", "11")[1].reward == 0.0
    assert started(seed).step("", []).done  # an answer without a call ends the episode


def test_a_tool_worker_resets_its_env_with_the_episodes_task_and_seed():
    """Tools that read what reset set up work in a worker process too (rollout.tool_isolation: process), and the
    env follows the worker's building from the outcomes."""
    env = started(7, busy_rate=0.0)
    worker = ToolWorker(functools.partial(LockersEnv, busy_rate=0.0))
    try:
        run = worker.runner(worker.new_episode(TASK, 7))
        find, put = env.tool_map()["find"], env.tool_map()["put"]
        assert run(find, {"name": "Rosa"}).result(timeout=60) == "Rosa: locker 11"
        assert run(put, {"locker": "11"}).result(timeout=60) == "The parcel is in locker 11."
    finally:
        worker.close()
    assert env.building.parcel is None  # the worker's building changed, not this one...
    outcome = ToolCallOutcome(
        id="c", name="put", arguments={"locker": "11"}, raw="", result="The parcel is in locker 11."
    )
    env.step("", [outcome])
    assert env.score("").reward == 1.0  # ...until the env reads the outcome


def episode(group, sample, turns):
    """turns: (state key, [(tool name, failed)])."""
    ep = Episode(task_id="t", group=group, sample=sample, prompt_messages=[], tool_schemas=[])
    for index, (key, calls) in enumerate(turns):
        records = [
            ToolCallRecord(id="c", name=name, arguments={}, raw="", error="x" if failed else None)
            for name, failed in calls
        ]
        ep.turns.append(TurnRecord(index=index, assistant="", tool_calls=records, state_key=key))
    return ep


def test_step_metrics_count_calls_retries_state_changes_and_anchor_groups():
    episodes = [
        episode(0, 0, [("s0", [("find", True)]), ("s0", [("find", False)]), ("s1", [("put", False)]), ("s2", [])]),
        episode(0, 1, [("s0", [("find", True)]), ("s0", [])]),  # gave up after the failure
        episode(1, 0, [("s0", [("put", False)]), ("s3", [])]),
    ]
    metrics = step_metrics(episodes)
    assert metrics["steps/multi_call_share"] == pytest.approx(1 / 3)
    assert metrics["steps/calls_max"] == 3.0
    assert metrics["steps/retry_rate"] == 0.5
    assert metrics["steps/state_changes_mean"] == pytest.approx((2 + 0 + 1) / 3)
    # anchors: (0, s0) x4, (0, s1), (0, s2), (1, s0), (1, s3)
    assert metrics["steps/anchor_group_size_mean"] == pytest.approx(8 / 5)  # 8 steps in 5 anchor groups
    assert "steps/retry_rate" not in step_metrics([episodes[2]])  # no failed call: no rate


def test_the_recipe_passes_env_check():
    done = subprocess.run(
        [sys.executable, "-m", "agentrl.cli", "env", "check", str(LOCKERS / "lockers_grpo.agentrl.yaml"), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "status finished, reward 1" in json.loads(done.stdout)[-1]["message"]


# The scripted engine numbers a turn by the assistant turns in its context: the worked example's come first.
POLICY = ScriptedPolicy(
    [*["(example)"] * sum(m["role"] == "assistant" for m in EXAMPLE), "<find>Rosa</find>", "<put>11</put>"]
)


def scripted_run(tmp_path, algorithm, *overrides, max_steps=None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "tasks.jsonl").write_text(json.dumps(TASK) + "\n")
    (tmp_path / "run.agentrl.yaml").write_text(
        f"name: lockers-{algorithm}\nmodel: {{path: tiny}}\n"
        f"env: {{module: {LOCKERS / 'env.py'}, class_name: LockersEnv, args: {{busy_rate: 0.5, process_reward: 0.1}}}}\n"
        "data: {train: tasks.jsonl}\n"
        "rollout: {group_size: 4, max_turns: 3, max_new_tokens: 40, max_context: 1024, tool_format: tags}\n"
        f"algorithm: {{name: {algorithm}, gamma: 0.95}}\n"
        "train: {steps: 2, batch_size: 8, micro_batch_size: 4, checkpoint_every: 2}\n"
    )
    config = load_config(tmp_path / "run.agentrl.yaml", list(overrides))
    return train(config, runs_dir=tmp_path / "runs", config_base_dir=tmp_path, policy=POLICY, max_steps=max_steps)


@pytest.mark.parametrize(
    "algorithm, overrides",
    [
        ("gigpo", []),
        ("step_ppo", []),
        ("gigpo", ["model.lora.enabled=true"]),
        ("step_ppo", ["model.lora.enabled=true"]),
    ],
)
def test_step_level_algorithms_train_on_the_multi_step_env(tmp_path, trajectory_validator, algorithm, overrides):
    run_dir = scripted_run(tmp_path, algorithm, *overrides)
    assert latest_status(read_events(run_dir))["status"] == "completed"
    records = [json.loads(line) for path in sorted((run_dir / "trajectories").glob("*.jsonl")) for line in path.open()]
    assert len(records) == 16
    keys = set()
    for record in records:
        trajectory_validator.validate(record)
        turns = record["turns"]
        assert turns[0]["state_key"] == "parcel at the desk; recipient's locker unknown"
        keys |= {t["state_key"] for t in turns}
        assert [t["step_return"] for t in turns] == pytest.approx(
            [record["reward"] - sum(t["process_reward"] for t in turns[:k]) for k in range(len(turns))]
        )
        assert all(t["step_advantage"] is not None for t in turns)
        for t in turns:  # a step-level algorithm gives each token of a step the same advantage
            advantages = {
                round(a, 6)
                for a, turn, sampled in zip(
                    record["tokens"]["advantage"], record["tokens"]["turn"], record["tokens"]["loss_mask"]
                )
                if sampled and turn == t["index"]
            }
            assert len(advantages) == 1
    assert "parcel at the desk; recipient's locker known" in keys  # some first lookups succeeded...
    metrics = [e["data"]["metrics"] for e in read_events(run_dir) if e["type"] == "metrics"]
    assert all("steps/anchor_group_size_mean" in m and "steps/advantage_spread" in m for m in metrics)
    assert max(m["steps/advantage_spread"] for m in metrics) > 0  # ...and credit differs between steps


def test_the_recipe_earns_reward_in_several_steps_with_the_packaged_model(tmp_path):
    """The recipe smoke test: the real default model, greedy, on a few training tasks, looks recipients up and
    delivers some parcels with the number it read, so GRPO has a signal from the first step."""
    records = rollout_only_records(LOCKERS / "lockers_grpo.agentrl.yaml", 16, tmp_path, "rollout.engine=hf")
    assert len(records) == 16
    delivered = [r for r in records if r["reward"] == 1.0]
    assert len(delivered) >= 1
    assert all(r["stats"]["num_tool_calls"] >= 2 for r in delivered)  # a lookup, then the delivery


def test_a_resumed_gigpo_run_replays_the_busy_directory_and_the_advantages_exactly(tmp_path):
    straight = scripted_run(tmp_path / "a", "gigpo", "train.steps=4")
    halved = scripted_run(tmp_path / "b", "gigpo", "train.steps=4", "train.checkpoint_every=2", max_steps=2)
    assert latest_status(read_events(halved))["status"] == "stopped"
    train(None, runs_dir=tmp_path / "b" / "runs", resume_dir=halved, policy=POLICY)
    assert latest_status(read_events(halved))["status"] == "completed"

    def records(run_dir):
        found = []
        for path in sorted((run_dir / "trajectories").glob("*.jsonl")):
            for line in path.open():
                record = {k: v for k, v in json.loads(line).items() if k != "run_id"}
                for turn in record["turns"]:
                    for call in turn["tool_calls"]:
                        call.pop("latency_ms")  # wall-clock, the one thing that may differ
                found.append(record)
        return found

    assert records(straight) == records(halved)  # the same lookups failed, the same state keys and advantages

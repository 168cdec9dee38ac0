"""Supervised fine-tuning (algorithm.name: sft) on a run's picked episodes and on demonstrations: the config that names
them, demonstrations rendered token for token as a rollout renders the same turns, a run's episodes read back exactly,
and the packaged model taught a tool-call format it never wrote."""

import json
import shutil
from pathlib import Path

import pytest
import yaml
from agentrl.contract.config import ConfigError, load_config, load_config_dict, resolve_paths
from agentrl.contract.tasks import load_tasks
from agentrl.environment.loader import config_env_factory
from agentrl.examples.lookup.env import TABLE, correct_call
from agentrl.models.loading import load_policy
from agentrl.rollout.episode import episode_from_record
from agentrl.rollout.scripted import ScriptedPolicy
from agentrl.run.atif import record_to_atif
from agentrl.run.runstore import latest_status, read_events
from agentrl.run.sft_data import sft_episodes_of, turns_over_budget
from agentrl.run.trainer import train
from conftest import EXAMPLE_CONFIG

BASE = {"env": {"module": "m", "class_name": "E"}, "data": {"train": "t.jsonl"}}


def demonstration(key: str, *, call_id: str = "c1") -> dict:
    """The lookup task solved: the call, the tool's answer, the answer."""
    return {
        "task_id": f"key-{key}",
        "reward": 1.5,
        "messages": [
            {"role": "user", "content": f"key {key}"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "lookup", "arguments": json.dumps({"key": key})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": TABLE[key]},
            {"role": "assistant", "content": f"The value is {TABLE[key]}."},
        ],
    }


def lookup_folder(tmp_path: Path, keys: list[str], sft: list[dict] | None = None, **sections) -> Path:
    """The lookup example in a folder of its own, training on `keys`, with `sft` as data.sft (algorithm sft)."""
    folder = tmp_path / "lookup"
    folder.mkdir(exist_ok=True)
    shutil.copy(EXAMPLE_CONFIG.parent / "env.py", folder / "env.py")
    (folder / "tasks.jsonl").write_text("".join(json.dumps({"id": f"key-{k}", "key": k}) + "\n" for k in keys))
    config = yaml.safe_load(EXAMPLE_CONFIG.read_text())
    config["rollout"]["group_size"] = 1
    config["train"].update({"batch_size": 4, "micro_batch_size": 4, "steps": 2, "checkpoint_every": 2})
    if sft is not None:
        config["algorithm"] = {"name": "sft"}
        config["data"]["sft"] = sft
    for name, values in sections.items():
        config.setdefault(name, {}).update(values)
    (folder / "run.agentrl.yaml").write_text(yaml.safe_dump(config))
    return folder / "run.agentrl.yaml"


def test_the_config_says_what_sft_learns_from():
    sft = load_config_dict(
        {**BASE, "data": {"train": "t.jsonl", "sft": [{"demonstrations": "d.jsonl"}]}, "algorithm": {"name": "sft"}}
    )
    assert sft.algorithm.policy_loss == "nll"  # the demonstrations' cross-entropy, unless another loss is given
    kept = {
        **BASE,
        "data": {"train": "t.jsonl", "sft": [{"demonstrations": "d.jsonl"}]},
        "algorithm": {"name": "sft", "policy_loss": "clipped"},
    }
    assert load_config_dict(kept).algorithm.policy_loss == "clipped"
    refused = [
        ({**BASE, "algorithm": {"name": "sft"}}, "algorithm.name: sft learns from the episodes data.sft names"),
        (
            {**BASE, "data": {"train": "t.jsonl", "sft": [{"demonstrations": "d.jsonl"}]}},
            "data.sft is read by algorithm.name: sft, or by the warm start of train.sft_steps",
        ),
        (
            {**BASE, "data": {"train": "t.jsonl", "sft": [{}]}, "algorithm": {"name": "sft"}},
            "give one of run .* not none",
        ),
        (
            {
                **BASE,
                "data": {"train": "t.jsonl", "sft": [{"run": "r", "demonstrations": "d"}]},
                "algorithm": {"name": "sft"},
            },
            "not run and demonstrations",
        ),
        (
            {
                **BASE,
                "data": {"train": "t.jsonl", "sft": [{"demonstrations": "d", "where": {"tool": "x"}}]},
                "algorithm": {"name": "sft"},
            },
            "where picks a run's episodes: a demonstrations or ATIF file is read whole",
        ),
        (
            {
                **BASE,
                "data": {"train": "t.jsonl", "sft": [{"run": "r", "where": {"reward": {"least": 1}}}]},
                "algorithm": {"name": "sft"},
            },
            "least",
        ),
    ]
    for raw, message in refused:
        with pytest.raises(ConfigError, match=message):
            load_config_dict(raw)


def sft_episodes(config_path: Path) -> list:
    """The episodes the sft config at `config_path` learns from, as its run loads them."""
    config = resolve_paths(load_config(config_path), config_path.parent)
    _, tokenizer, _ = load_policy(config.model, config.seed)
    return sft_episodes_of(config, tokenizer, config_env_factory(config), load_tasks(config.data.train, None)[0])


def scripted_try(tmp_path: Path, keys: list[str], episodes: int) -> tuple[Path, Path]:
    """A Try run of the lookup example on `keys` in which every episode plays the right answer for key 3 (so only key
    3's episodes earn a reward): the config's path and the run's folder."""
    config_path = lookup_folder(tmp_path, keys)
    played = train(
        load_config(config_path),
        runs_dir=tmp_path / "runs",
        rollout_only_episodes=episodes,
        config_base_dir=config_path.parent,
        policy=ScriptedPolicy([correct_call("3"), f"The value is {TABLE['3']}."]),
    )
    return config_path, played


def test_a_demonstration_is_the_tokens_a_rollout_of_the_same_turns_has(tmp_path):
    """The same turns sampled (scripted) by the rollout engine and written as a demonstration: the same token ids,
    roles, loss mask and turn records, so what sft teaches is exactly what the run's rollouts will see and write."""
    config_path, played = scripted_try(tmp_path, ["3"], 1)
    [line] = (played / "trajectories" / "step-000000.trajectories.jsonl").read_text().splitlines()
    rolled = episode_from_record(json.loads(line))
    (config_path.parent / "demos.jsonl").write_text(json.dumps(demonstration("3")) + "\n")
    [written] = sft_episodes(lookup_folder(tmp_path, ["3"], sft=[{"demonstrations": "demos.jsonl"}]))
    assert written.token_ids == rolled.token_ids
    assert written.token_roles == rolled.token_roles
    assert written.loss_mask == rolled.loss_mask
    assert written.turn_end_positions == rolled.turn_end_positions
    assert [(t.assistant, t.observation) for t in written.turns] == [(t.assistant, t.observation) for t in rolled.turns]
    assert [(c.name, c.arguments, c.raw, c.result) for c in written.turns[0].tool_calls] == [
        (c.name, c.arguments, c.raw, c.result) for c in rolled.turns[0].tool_calls
    ]
    assert all(lp is None for lp in written.rollout_logprobs)  # written, not drawn: nothing to compare logprobs with


def test_a_runs_episodes_picked_by_where_are_read_back_token_exact(tmp_path):
    _, played = scripted_try(tmp_path, ["3", "4", "3", "5"], 4)
    step_file = played / "trajectories" / "step-000000.trajectories.jsonl"
    records = [json.loads(line) for line in step_file.read_text().splitlines()]
    solved = [r for r in records if r["reward"] >= 1]
    assert [r["task_id"] for r in solved] == ["key-3", "key-3"]
    picked = sft_episodes(
        lookup_folder(tmp_path, ["3"], sft=[{"run": str(played), "where": {"reward": {"min": 1}, "tool": "lookup"}}])
    )
    assert [e.token_ids for e in picked] == [r["tokens"]["ids"] for r in solved]
    assert [e.loss_mask for e in picked] == [r["tokens"]["loss_mask"] for r in solved]

    nothing = lookup_folder(tmp_path, ["3"], sft=[{"run": str(played), "where": {"reward": {"min": 5}}}])
    with pytest.raises(ValueError, match=r"data.sft\[0\]: no episode of .* passes `where`"):
        sft_episodes(nothing)
    records[0]["tokens"]["text"][3] = "a token of another vocabulary"
    step_file.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(ValueError, match=r"step-000000.trajectories.jsonl:1: recorded with another tokenizer"):
        sft_episodes(lookup_folder(tmp_path, ["3"], sft=[{"run": str(played)}]))


def test_a_training_set_is_learned_from_token_exact_from_the_turn_each_line_names(tmp_path):
    """The editor's training set (protocol/schemas/training-set.schema.json): a recorded episode whole is read back
    as its run wrote it; from turn 1, the first turn and what it was told back become context (never trained), and
    only the later turn's sampled tokens are learned. A run trains on it; a damaged line is named by file and line."""
    config_path, played = scripted_try(tmp_path, ["3"], 1)
    [record] = [json.loads(line) for line in (played / "trajectories" / "step-000000.trajectories.jsonl").open()]
    assert len(record["turns"]) == 2  # the call, then the answer
    lines = [{"episode": record, "from_turn": 0}, {"episode": record, "from_turn": 1}]
    (config_path.parent / "picked.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    whole, from_second = sft_episodes(lookup_folder(tmp_path, ["3"], sft=[{"episodes": "picked.jsonl"}]))
    tokens = record["tokens"]
    assert whole.token_ids == tokens["ids"] and whole.loss_mask == tokens["loss_mask"]
    assert from_second.token_ids == tokens["ids"]  # the same sequence: what the model saw is unchanged
    second = [m and turn == 1 for m, turn in zip(tokens["loss_mask"], tokens["turn"])]
    assert from_second.loss_mask == [int(b) for b in second] and sum(second) > 0
    assert [t.assistant for t in from_second.turns] == [record["turns"][1]["assistant"]]
    assert from_second.turn_end_positions == whole.turn_end_positions[1:]
    from_second.check_invariants()

    trained = train(
        load_config(lookup_folder(tmp_path, ["3"], sft=[{"episodes": "picked.jsonl"}], train={"batch_size": 2})),
        runs_dir=tmp_path / "runs",
        config_base_dir=config_path.parent,
    )
    assert latest_status(read_events(trained))["status"] == "completed"
    learned = json.loads((trained / "trajectories" / "step-000001.trajectories.jsonl").read_text().splitlines()[1])
    assert sum(a is not None for a in learned["tokens"]["advantage"]) == sum(second)

    damaged = {
        "from_turn 2: the episode has 2 turns": {"episode": record, "from_turn": 2},
        "not a training set line": {"episode": {"id": "x"}, "from_turn": 0},
        "not a training set line .*from_turn": {"episode": record, "from_turn": -1},
    }
    for message, line in damaged.items():
        (config_path.parent / "damaged.jsonl").write_text(json.dumps(lines[0]) + "\n" + json.dumps(line) + "\n")
        with pytest.raises(ValueError, match=rf"data.sft\[0\]: .*damaged.jsonl:2: {message}"):
            sft_episodes(lookup_folder(tmp_path, ["3"], sft=[{"episodes": "damaged.jsonl"}]))


def foreign_atif(key: str) -> dict:
    """The lookup task solved, as another agent tool writes ATIF: no token ids, no agentrl extra."""
    return {
        "schema_version": "ATIF-v1.7",
        "session_id": "their-session",
        "trajectory_id": f"theirs-{key}",
        "agent": {"name": "their-agent", "version": "1.0"},
        "steps": [
            {"step_id": 1, "source": "user", "message": f"key {key}"},
            {
                "step_id": 2,
                "source": "agent",
                "message": "",
                "tool_calls": [{"tool_call_id": "c1", "function_name": "lookup", "arguments": {"key": key}}],
                "observation": {"results": [{"source_call_id": "c1", "content": TABLE[key]}]},
            },
            {"step_id": 3, "source": "agent", "message": f"The value is {TABLE[key]}."},
        ],
    }


def test_atif_trajectories_ours_token_exact_and_another_tools_as_their_demonstration(tmp_path):
    """An ATIF file agentrl exported keeps its token sequence: read back as the run's episode is. One another tool
    wrote (no tokens, no extra) is rendered as the demonstration of the same turns would be, the env's tools given."""
    config_path, played = scripted_try(tmp_path, ["3"], 2)
    records = [json.loads(line) for line in (played / "trajectories" / "step-000000.trajectories.jsonl").open()]
    agent = {"name": "agentrl", "version": "test"}
    (config_path.parent / "ours.atif.jsonl").write_text(
        "".join(json.dumps(record_to_atif(r, agent)) + "\n" for r in records)
    )
    ours = sft_episodes(lookup_folder(tmp_path, ["3"], sft=[{"atif": "ours.atif.jsonl"}]))
    assert [e.token_ids for e in ours] == [r["tokens"]["ids"] for r in records]
    assert [e.loss_mask for e in ours] == [r["tokens"]["loss_mask"] for r in records]

    (config_path.parent / "theirs.atif.json").write_text(json.dumps(foreign_atif("3")))
    (config_path.parent / "demos.jsonl").write_text(json.dumps(demonstration("3")) + "\n")
    [theirs] = sft_episodes(lookup_folder(tmp_path, ["3"], sft=[{"atif": "theirs.atif.json"}]))
    [demonstrated] = sft_episodes(lookup_folder(tmp_path, ["3"], sft=[{"demonstrations": "demos.jsonl"}]))
    assert theirs.token_ids == demonstrated.token_ids and theirs.loss_mask == demonstrated.loss_mask
    assert theirs.token_ids == records[0]["tokens"]["ids"]  # and what the rollout of those turns sampled

    damaged = [json.dumps(foreign_atif("3")), json.dumps({"schema_version": "ATIF-v1.7", "steps": [{"source": 3}]})]
    (config_path.parent / "damaged.atif.jsonl").write_text("\n".join(damaged) + "\n")
    with pytest.raises(ValueError, match=r"data.sft\[0\]: .*damaged.atif.jsonl:2: "):
        sft_episodes(lookup_folder(tmp_path, ["3"], sft=[{"atif": "damaged.atif.jsonl"}]))
    records[1]["tokens"]["text"][3] = "a token of another vocabulary"
    tampered = "".join(json.dumps(record_to_atif(r, agent)) + "\n" for r in records)
    (config_path.parent / "tampered.atif.jsonl").write_text(tampered)
    with pytest.raises(ValueError, match="recorded with another tokenizer") as refused:
        sft_episodes(lookup_folder(tmp_path, ["3"], sft=[{"atif": "tampered.atif.jsonl"}]))
    assert str(refused.value).count("tampered.atif.jsonl:2") == 1, "the file and line, named once"


@pytest.mark.parametrize(
    ("demo", "message"),
    [
        ({"messages": [{"role": "user", "content": "key 3"}]}, "no assistant message"),
        ({"messages": [{"role": "robot", "content": "x"}]}, r"messages\[0\].role: 'robot'"),
        (
            {
                **demonstration("3"),
                "messages": [
                    demonstration("3")["messages"][0],
                    {"role": "assistant", "tool_calls": [{"function": {"name": "fetch", "arguments": {}}}]},
                ],
            },
            "a call to fetch, which is none of the tools",
        ),
        (
            {
                **demonstration("3"),
                "messages": [
                    demonstration("3")["messages"][0],
                    {"role": "assistant", "tool_calls": [{"function": {"name": "lookup", "arguments": "{key"}}]},
                ],
            },
            "are not JSON",
        ),
        ({**demonstration("3"), "reward": float("nan")}, "reward: nan is not a finite number"),
        ({**demonstration("3"), "prompt_length": 5}, "prompt_length: 5 is not a number of messages below"),
        ({**demonstration("3"), "prompt_length": True}, "prompt_length: True is not a number of messages"),
        ({**demonstration("3"), "prompt_length": 0}, r"messages\[0\]: the first turn must be an assistant message"),
        (
            {
                **demonstration("3"),
                "messages": demonstration("3")["messages"][:1] + [{"role": "assistant", "content": "x " * 600}],
            },
            "over rollout.max_context",
        ),
    ],
)
def test_a_bad_demonstration_is_named_by_its_file_and_line(tmp_path, demo, message):
    config_path = lookup_folder(tmp_path, ["3"], sft=[{"demonstrations": "demos.jsonl"}])
    lines = [json.dumps(demonstration("3")), json.dumps(demo, allow_nan=True)]
    (config_path.parent / "demos.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=rf"data.sft\[0\]: .*demos.jsonl:2: .*{message}"):
        sft_episodes(config_path)


def test_a_warm_start_warns_of_demonstrated_turns_a_rollout_would_cut(tmp_path):
    """A demonstrated turn longer than rollout.max_new_tokens teaches what no rollout can finish (a call cut before its
    closing tag is no call): the run says how many episodes, and the longest turn, in its log; none when all fit."""
    demos = [demonstration("3"), {**demonstration("4")}]
    demos[1]["messages"] = [*demos[1]["messages"][:3], {"role": "assistant", "content": "The value is " + "v4 " * 40}]
    config_path = lookup_folder(tmp_path, ["3", "4"], sft=[{"demonstrations": "demos.jsonl"}])
    (config_path.parent / "demos.jsonl").write_text("".join(json.dumps(d) + "\n" for d in demos))
    episodes = sft_episodes(config_path)
    longest = max(sum(m for t, m in zip(e.token_turns, e.loss_mask, strict=True) if t == 1) for e in episodes)
    said = turns_over_budget(episodes, longest - 1)
    assert said and said.startswith("data.sft: 1 of 2 episodes learn a turn longer than rollout.max_new_tokens")
    assert f"the longest, {longest} tokens" in said
    assert turns_over_budget(episodes, longest) is None

    config_path = lookup_folder(
        tmp_path, ["3", "4"], sft=[{"demonstrations": "demos.jsonl"}], rollout={"max_new_tokens": 16}
    )
    run_dir = train(load_config(config_path), runs_dir=tmp_path / "runs", config_base_dir=config_path.parent)
    logged = [e["data"]["message"] for e in read_events(run_dir) if e["type"] == "log"]
    assert any(m.startswith("data.sft: 1 of 2 episodes learn a turn longer") for m in logged), logged


def test_an_sft_run_trains_on_the_assistant_tokens_and_resumes_exactly(tmp_path):
    """The tiny model's loss falls on demonstrations; the records say what it learned from (advantage 1 on each
    assistant token, nothing on the prompt's or the tool's); no logprob-gap figure, as nothing was sampled; and a run
    stopped halfway and resumed takes the same episodes and ends with the same loss."""
    demos = [demonstration(k) for k in "0123456789"]
    sft = [{"demonstrations": "demos.jsonl"}]
    config_path = lookup_folder(
        tmp_path, list("0123456789"), sft=sft, train={"steps": 6, "lr": 0.01, "checkpoint_every": 3}
    )
    (config_path.parent / "demos.jsonl").write_text("".join(json.dumps(d) + "\n" for d in demos))
    straight = train(load_config(config_path), runs_dir=tmp_path / "a", config_base_dir=config_path.parent)
    metrics = {e["data"]["step"]: e["data"]["metrics"] for e in read_events(straight) if e["type"] == "metrics"}
    assert metrics[6]["loss/policy"] < 0.8 * metrics[1]["loss/policy"]  # the mean NLL of the demonstrated tokens
    assert 0 <= metrics[1]["actor/token_accuracy"] < metrics[6]["actor/token_accuracy"] <= 1
    assert "actor/logprob_gap" not in metrics[1]
    assert metrics[1]["reward/mean"] == 1.5 and metrics[1]["tools/calls_per_episode"] == 1.0
    assert not [e for e in read_events(straight) if e["type"] == "health"]
    record = json.loads((straight / "trajectories" / "step-000001.trajectories.jsonl").read_text().splitlines()[0])
    tokens = record["tokens"]
    assert {a for a, role in zip(tokens["advantage"], tokens["role"]) if role == "assistant"} == {1.0}
    assert {a for a, role in zip(tokens["advantage"], tokens["role"]) if role != "assistant"} == {None}

    halved = train(load_config(config_path), runs_dir=tmp_path / "b", max_steps=3, config_base_dir=config_path.parent)
    train(None, runs_dir=tmp_path / "b", resume_dir=halved)
    resumed = {e["data"]["step"]: e["data"]["metrics"] for e in read_events(halved) if e["type"] == "metrics"}
    assert resumed[6]["loss/policy"] == pytest.approx(metrics[6]["loss/policy"], rel=1e-5)


def test_sft_teaches_the_packaged_model_a_tool_call_format_it_never_wrote(tmp_path):
    """SmolLM2-135M-Instruct, told to call `lookup` as <lookup>KEY</lookup> (rollout.tool_format: tags), writes no such
    call; 4 steps of sft on 32 demonstrations of it and it calls the tool and answers on every held-out task."""
    config_path = lookup_folder(
        tmp_path,
        [str(i % 10) for i in range(32)],
        sft=[{"demonstrations": "demos.jsonl"}],
        model={"path": "smollm2"},
        data={"eval": "heldout.jsonl"},
        rollout={"tool_format": "tags", "engine": "hf", "max_new_tokens": 24, "max_context": 1024},
        train={"steps": 4, "batch_size": 8, "micro_batch_size": 8, "lr": 1e-4, "eval_every": 4, "checkpoint_every": 4},
    )
    (config_path.parent / "demos.jsonl").write_text(
        "".join(json.dumps(demonstration(str(i % 10))) + "\n" for i in range(32))
    )
    (config_path.parent / "heldout.jsonl").write_text(
        "".join(json.dumps({"id": f"heldout-{k}", "key": k}) + "\n" for k in "0123456789")
    )
    before = train(
        load_config(config_path, ["algorithm.name=grpo", "data.sft=[]", "rollout.temperature=0"]),
        runs_dir=tmp_path / "runs",
        rollout_only_episodes=4,
        config_base_dir=config_path.parent,
    )
    untrained = [json.loads(line) for line in (before / "trajectories" / "step-000000.trajectories.jsonl").open()]
    assert not [call for r in untrained for turn in r["turns"] for call in turn["tool_calls"] if not call["error"]]

    trained = train(
        load_config(config_path),
        runs_dir=tmp_path / "runs",
        config_base_dir=config_path.parent,
    )
    metrics = {e["data"]["step"]: e["data"]["metrics"] for e in read_events(trained) if e["type"] == "metrics"}
    assert metrics[4]["eval/n"] == 10
    assert metrics[4]["eval/looked_up"] == 1.0 and metrics[4]["eval/answered"] >= 0.9, metrics[4]


def test_a_warm_start_is_sft_steps_then_the_algorithms_on_rollouts_in_one_run_and_resumes_exactly(tmp_path):
    """train.sft_steps: 2 then GRPO: steps 1-2 learn from the demonstrations (no rollout, no logprob gap), steps 3-4
    from rollouts; the switch is in the run's log; a run stopped at the end of the warm start and resumed ends where
    an unbroken one does."""
    sft = [{"demonstrations": "demos.jsonl"}]
    config_path = lookup_folder(
        tmp_path,
        list("0123456789"),
        rollout={"group_size": 4},
        train={"steps": 4, "sft_steps": 2, "batch_size": 8, "lr": 0.01, "checkpoint_every": 2},
    )
    config = yaml.safe_load(config_path.read_text())
    config["data"]["sft"] = sft
    config_path.write_text(yaml.safe_dump(config))
    (config_path.parent / "demos.jsonl").write_text("".join(json.dumps(demonstration(k)) + "\n" for k in "0123456789"))
    straight = train(load_config(config_path), runs_dir=tmp_path / "a", config_base_dir=config_path.parent)
    events = read_events(straight)
    metrics = {e["data"]["step"]: e["data"]["metrics"] for e in events if e["type"] == "metrics"}
    assert [("perf/rollout_time_s" in metrics[step]) for step in (1, 2, 3, 4)] == [False, False, True, True]
    assert [("actor/logprob_gap" in metrics[step]) for step in (1, 2)] == [False, False]
    assert metrics[1]["reward/mean"] == metrics[2]["reward/mean"] == 1.5  # the demonstrations' own reward
    assert "warm start done: steps 1-2 were sft on data.sft, from step 3 on grpo on rollouts" in [
        e["data"]["message"] for e in events if e["type"] == "log"
    ]

    halved = train(load_config(config_path), runs_dir=tmp_path / "b", max_steps=2, config_base_dir=config_path.parent)
    train(None, runs_dir=tmp_path / "b", resume_dir=halved)
    resumed = {e["data"]["step"]: e["data"]["metrics"] for e in read_events(halved) if e["type"] == "metrics"}
    for step in (3, 4):  # the rollouts after the warm start: the same episodes, the same update
        figures = {name: value for name, value in metrics[step].items() if not name.startswith("perf/")}
        assert {name: resumed[step][name] for name in figures} == pytest.approx(figures, rel=1e-5)


def test_a_warm_start_learns_at_train_sft_lr(tmp_path):
    """train.sft_lr: with train.lr too small to move the weights, the warm start's second step fits the
    demonstrations better than in a run without one (the same batches in both)."""
    demos = tmp_path / "demos.jsonl"
    demos.write_text("".join(json.dumps(demonstration(k)) + "\n" for k in "0123456789"))

    def policy_loss(step: int, **train_section) -> float:
        folder = tmp_path / str(len(train_section))
        folder.mkdir()
        config_path = lookup_folder(
            folder,
            list("0123456789"),
            rollout={"group_size": 4},
            train={"steps": 3, "sft_steps": 2, "batch_size": 8, "lr": 1e-12, "checkpoint_every": 3, **train_section},
        )
        config = yaml.safe_load(config_path.read_text())
        config["data"]["sft"] = [{"demonstrations": str(demos)}]
        config_path.write_text(yaml.safe_dump(config))
        run = train(load_config(config_path), runs_dir=folder / "runs", config_base_dir=config_path.parent)
        metrics = {e["data"]["step"]: e["data"]["metrics"] for e in read_events(run) if e["type"] == "metrics"}
        return metrics[step]["loss/policy"]

    # The same batches in both runs: the second step's loss falls by what the first step's update taught.
    assert policy_loss(2, sft_lr=0.01) < policy_loss(2) - 0.1


def test_a_warm_start_is_refused_where_it_cannot_run():
    demos = {"train": "t.jsonl", "sft": [{"demonstrations": "d.jsonl"}]}
    for raw, message in [
        ({**BASE, "train": {"sft_steps": 2}}, "train.sft_steps learns from the episodes data.sft names"),
        ({**BASE, "data": demos, "train": {"steps": 2, "sft_steps": 2}}, r"train.sft_steps \(2\) leaves no step"),
        (
            {**BASE, "data": demos, "algorithm": {"name": "sft"}, "train": {"sft_steps": 1}},
            "algorithm.name: sft is all sft",
        ),
        (
            {**BASE, "data": demos, "train": {"sft_steps": 1}, "cluster": {"backend": "ray"}},
            "run the sft as a run of its own",
        ),
        ({**BASE, "train": {"sft_lr": 1e-4}}, "without a warm start set train.lr"),
    ]:
        with pytest.raises(ConfigError, match=message):
            load_config_dict(raw)

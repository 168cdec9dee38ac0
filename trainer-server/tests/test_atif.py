"""Trajectories in Harbor's ATIF (agentrl/run/atif.py, `agentrl export-trajectories`): a record converted to ATIF is
valid ATIF v1.7 and reads back as the record it was; an ATIF trajectory another tool wrote reads as a record whose
messages, calls and results, exported again, are the ones it had. protocol/examples/atif/ holds the files the
TypeScript reader (test/unit/atif.test.ts) is held to as well."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentrl.cli.main import main
from agentrl.run.atif import ATIF_VERSION, atif_problems, atif_to_record, content_text, record_to_atif
from agentrl.run.runstore import trajectory_file_name
from conftest import PROTOCOL

ATIF = PROTOCOL / "examples" / "atif"
AGENT = {"name": "agentrl", "version": "0.1.0"}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


RECORDS = [
    record
    for path in [
        *sorted((PROTOCOL / "examples" / "trajectories").glob("*.jsonl")),
        ATIF / "episodes.trajectories.jsonl",
    ]
    for record in read_jsonl(path)
]
HARBOR = json.loads((ATIF / "harbor-style.atif.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("record", RECORDS, ids=[f"{r['run_id']}/{r['id']}" for r in RECORDS])
def test_a_record_is_valid_atif_and_reads_back_as_it_was(record, trajectory_validator):
    trajectory = record_to_atif(record, AGENT)
    assert trajectory["schema_version"] == ATIF_VERSION == "ATIF-v1.7"
    assert atif_problems(trajectory) == []
    back = atif_to_record(json.loads(json.dumps(trajectory)))
    assert back == record
    trajectory_validator.validate(back)


def test_the_committed_export_is_the_converters_and_reads_back_as_its_records():
    """episodes.atif.jsonl is what record_to_atif writes today (make_fixtures.py rewrites it), so the TypeScript
    reader, held to read it as episodes.trajectories.jsonl, reads what the exporter writes."""
    records = read_jsonl(ATIF / "episodes.trajectories.jsonl")
    exported = read_jsonl(ATIF / "episodes.atif.jsonl")
    agent = {k: v for k, v in exported[0]["agent"].items() if k != "tool_definitions"}
    assert [record_to_atif(record, agent) for record in records] == exported
    assert [atif_to_record(trajectory) for trajectory in exported] == records


def test_what_atif_has_a_field_for_is_in_that_field():
    record = next(r for r in RECORDS if r["id"] == "3-5-0")  # the worked example of make_fixtures.py
    trajectory = record_to_atif(record, AGENT)
    steps = trajectory["steps"]
    assert [s["step_id"] for s in steps] == list(range(1, len(steps) + 1))
    assert (trajectory["session_id"], trajectory["trajectory_id"]) == (record["run_id"], record["id"])
    assert trajectory["agent"]["tool_definitions"] == record["tools"]
    # the prompt: system and user steps, its assistant messages copied context, its tool messages results
    assert [(s["source"], s.get("is_copied_context", False)) for s in steps[:4]] == [
        ("system", False),
        ("user", False),
        ("agent", True),
        ("agent", True),
    ]
    assert [r["content"] for r in steps[2]["observation"]["results"]] == ["seven", "(a second tool message)"]
    turn_steps = steps[-len(record["turns"]) :]
    for turn, step in zip(record["turns"], turn_steps, strict=True):
        assert step["source"] == "agent" and step["message"] == turn["assistant"] and step["llm_call_count"] == 1
        calls = step.get("tool_calls", [])
        assert [(c["tool_call_id"], c["function_name"]) for c in calls] == [
            (c["id"], c["name"]) for c in turn["tool_calls"]
        ]
        results = step.get("observation", {}).get("results", [])
        assert [r.get("source_call_id") for r in results] == [c["id"] for c in turn["tool_calls"]] + (
            [None] if turn["observation"] is not None else []
        )
        if turn["observation"] is not None:
            assert results[-1]["content"] == turn["observation"]
        # the sampled tokens: their ids and rollout logprobs, and the context they were sampled from
        tokens = record["tokens"]
        sampled = [k for k, (t, m) in enumerate(zip(tokens["turn"], tokens["loss_mask"])) if t == turn["index"] and m]
        assert step["metrics"] == {
            "prompt_tokens": sampled[0],
            "completion_tokens": len(sampled),
            "completion_token_ids": [tokens["ids"][k] for k in sampled],
            "logprobs": [tokens["logprob"][k] for k in sampled],
        }
    first = turn_steps[0]
    # a result that is not a string is JSON text, an error its message; the rest of the call is in its extra
    assert [r["content"] for r in first["observation"]["results"][:2]] == [
        record["turns"][0]["tool_calls"][0]["error"],
        '{"value": "gold", "n": 3}',
    ]
    assert first["tool_calls"][0]["arguments"] == {} and first["tool_calls"][0]["extra"]["agentrl"]["arguments"] is None
    assert set(trajectory["extra"]["agentrl"]) == set(record) - {
        "schema_version",
        "id",
        "run_id",
        "prompt",
        "tools",
        "turns",
    }


def test_harbor_style_fixture_is_valid_atif_and_reads_as_the_committed_record(trajectory_validator):
    assert atif_problems(HARBOR) == []
    record = atif_to_record(HARBOR)
    assert [record] == read_jsonl(ATIF / "harbor-style.trajectories.jsonl")
    trajectory_validator.validate(record)
    assert (record["id"], record["run_id"], record["tools"]) == (
        "notes-task-1",
        "run-7f3a",
        HARBOR["agent"]["tool_definitions"],
    )
    # the steps before the first live agent step are the prompt; images show as their path
    assert [m["role"] for m in record["prompt"]] == ["system", "user", "assistant"]
    assert record["prompt"][1]["content"].endswith("The folder:\n[image: images/folder.png]")
    first, last = record["turns"]
    assert [(c["name"], c["arguments"], c["result"]) for c in first["tool_calls"]] == [
        ("read_file", {"path": "notes.txt"}, "buy milk\ncall the plumber\nwater the plants"),
        ("count_lines", {"path": "notes.txt"}, "3"),
    ]
    # the user's message after a turn is what the agent read next
    assert first["observation"] == "Quote the first line exactly, please." and not first["done"]
    assert last["done"] and last["observation"] is None and last["assistant"].endswith('"buy milk".')
    assert record["stats"] == {
        "num_turns": 2,
        "num_tool_calls": 2,
        "num_tool_errors": 0,
        "response_tokens": 20,
        "total_tokens": 884,
    }


def _conversation(trajectory: dict) -> list[tuple]:
    """What ATIF holds and a record keeps, in order: each message (its source, text and whether copied context), each
    call of a live agent step, each result answering a call. What the agent read after a turn (a user or system step,
    or a result answering no call) is one kind, as it is in a record: the turn's observation."""
    items: list[tuple] = []
    turns_began = False
    for step in trajectory["steps"]:
        text = content_text(step["message"])
        live = step["source"] == "agent" and not step.get("is_copied_context")
        turns_began = turns_began or live
        if step["source"] == "agent" or not turns_began:
            items.append((step["source"], text, bool(step.get("is_copied_context"))))
        elif text:
            items.append(("read", text))
        calls = {call["tool_call_id"] for call in step.get("tool_calls") or []}
        items += [(c["tool_call_id"], c["function_name"], c["arguments"]) for c in step.get("tool_calls") or [] if live]
        for result in (step.get("observation") or {}).get("results", []):
            answers = result.get("source_call_id") in calls
            items.append((result["source_call_id"] if answers else "read", content_text(result["content"])))
    return items


def test_an_atif_trajectory_read_and_exported_again_keeps_its_messages_calls_and_results():
    again = record_to_atif(atif_to_record(HARBOR), AGENT)
    assert atif_problems(again) == []
    assert _conversation(again) == _conversation(HARBOR)
    assert again["agent"]["tool_definitions"] == HARBOR["agent"]["tool_definitions"]
    assert (again["session_id"], again["trajectory_id"]) == (HARBOR["session_id"], HARBOR["trajectory_id"])


def test_atif_problems_says_what_harbors_validator_refuses():
    def broken(change) -> dict:
        trajectory = json.loads(json.dumps(HARBOR))
        change(trajectory)
        return trajectory

    cases = {
        "step_id: 4, not 3": lambda t: t["steps"][2].update(step_id=4),
        "names no tool call of its step": lambda t: t["steps"][3]["observation"]["results"][0].update(
            source_call_id="call_nope"
        ),
        "'call_read_1' is not unique": lambda t: t["steps"][3]["tool_calls"][1].update(tool_call_id="call_read_1"),
        # an agent-only field on a system step; an agent step of no LLM call with metrics
        "steps/0/tool_calls: [] is not of type 'null'": lambda t: t["steps"][0].update(tool_calls=[]),
        "steps/3/metrics: ": lambda t: t["steps"][3].update(llm_call_count=0),
        "schema_version: 'ATIF-v2.0'": lambda t: t.update(schema_version="ATIF-v2.0"),
        "agent: 'version' is a required property": lambda t: t["agent"].pop("version"),
    }
    for expected, change in cases.items():
        problems = atif_problems(broken(change))
        assert any(expected in problem for problem in problems), (expected, problems)


def test_only_atif_v1_reads():
    with pytest.raises(ValueError, match="not an ATIF trajectory"):
        atif_to_record(RECORDS[0])
    with pytest.raises(ValueError, match="ATIF-v2.0: this reads ATIF-v1.x"):
        atif_to_record({**HARBOR, "schema_version": "ATIF-v2.0"})
    assert atif_to_record({**HARBOR, "schema_version": "ATIF-v1.8"})["id"] == "notes-task-1"  # a later 1.x reads


def _run_folder(tmp_path: Path) -> Path:
    """A run folder of two steps, as the trainer leaves it (with a resumed step 1 that wrote one record again)."""
    run_dir = tmp_path / "runs" / "lookup-1"
    (run_dir / "trajectories").mkdir(parents=True)
    (run_dir / "config.yaml").write_text("model:\n  path: /home/someone/models/SmolLM2-135M-Instruct\n")
    step_one = read_jsonl(PROTOCOL / "examples" / "trajectories" / "tool-errors.trajectories.jsonl")
    step_three = read_jsonl(PROTOCOL / "examples" / "trajectories" / "hostile.trajectories.jsonl")
    lines = [*step_one, {**step_one[0], "reward": 0.5}]
    (run_dir / "trajectories" / trajectory_file_name(1)).write_text("".join(json.dumps(r) + "\n" for r in lines))
    (run_dir / "trajectories" / trajectory_file_name(3)).write_text(json.dumps(step_three[0]) + "\n")
    return run_dir


def test_export_trajectories_writes_a_runs_episodes_as_atif(tmp_path, capsys):
    run_dir = _run_folder(tmp_path)
    assert main(["export-trajectories", str(run_dir), "--format", "atif"]) == 0
    out = run_dir / "exports" / "trajectories.atif.jsonl"
    assert json.loads(capsys.readouterr().out) == {"out": str(out), "format": "atif", "trajectories": 3, "skipped": 0}
    exported = read_jsonl(out)
    # the latest record of an id, where the file holds it (as trajectory/get lists a step's)
    assert [t["trajectory_id"] for t in exported] == ["1-0-9", "1-0-0", "3-9-0"]
    assert exported[1]["extra"]["agentrl"]["reward"] == 0.5
    assert exported[0]["agent"] == {
        "name": "agentrl",
        "version": exported[0]["agent"]["version"],
        "model_name": "SmolLM2-135M-Instruct",  # a local folder by its name, not this machine's path
        "tool_definitions": exported[0]["agent"]["tool_definitions"],
    }
    assert all(atif_problems(t) == [] for t in exported)

    # one step, into a .json file (Harbor's layout: one trajectory a file), pretty as Harbor writes it
    single = tmp_path / "trajectory.json"
    assert main(["export-trajectories", str(run_dir), "--format", "atif", "--step", "3", "--out", str(single)]) == 0
    assert json.loads(single.read_text()) == exported[2] and single.read_text().startswith('{\n  "schema_version"')


def test_export_trajectories_says_what_it_cannot_do(tmp_path, capsys):
    run_dir = _run_folder(tmp_path)
    cases = [
        (["--step", "2"], "has no trajectories of step 2; it has steps [1, 3]"),
        (["--out", str(tmp_path / "all.json")], "a .json file holds one ATIF trajectory, and this run has more than"),
        (["--out", str(tmp_path / "all.txt")], "write a .jsonl file (a trajectory a line) or a .json file"),
    ]
    for extra, message in cases:
        assert main(["export-trajectories", str(run_dir), "--format", "atif", *extra]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "all.json").exists() and not list(tmp_path.glob(".*.tmp"))
    assert main(["export-trajectories", str(tmp_path), "--format", "atif"]) == 2
    assert "has no trajectories" in capsys.readouterr().err

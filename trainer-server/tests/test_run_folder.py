"""What real runs write to their folders is what protocol/schemas/run-folder.schema.json declares, and what the
server makes of it (RunInfo, run/event) is what rpc.schema.json declares: a training run that is stopped, warned
about and resumed, a Try run and an eval run, so that every event type and every run mode is written."""

import json

import jsonschema
import yaml
from agentrl.contract.schemas import EVENT_TYPES, load_schema, validator_for
from agentrl.run.eval import evaluate
from agentrl.run.runstore import EVENTS_FILE, read_events
from agentrl.run.trainer import train
from agentrl.server.event_stream import read_new_events
from agentrl.server.protocol import validator_for as rpc_validator_for
from agentrl.server.runs import RunManager
from conftest import EXAMPLE_CONFIG
from test_health import never_rewarded


def folder_validator(definition):
    return validator_for("run-folder.schema.json", definition)


def test_every_file_and_event_real_runs_write_matches_the_schemas(tmp_path):
    runs = tmp_path / "runs"
    config = never_rewarded(tmp_path, "train.steps=3", "train.checkpoint_every=2")  # a health alert at step 2
    trained = train(config, runs_dir=runs, max_steps=2, config_base_dir=EXAMPLE_CONFIG.parent)
    train(None, runs_dir=runs, resume_dir=trained)
    tried = train(config, runs_dir=runs, rollout_only_episodes=3, config_base_dir=EXAMPLE_CONFIG.parent)
    checkpoint = trained / "checkpoints" / "step-000002"
    evaluated = evaluate(
        config,
        str(EXAMPLE_CONFIG.parent / config.data.train),
        limit=2,
        checkpoint=str(checkpoint),
        baseline=None,
        batch_size=2,
        runs_dir=runs,
    ).run_dir

    run_config = jsonschema.Draft202012Validator(load_schema("run-config.schema.json"))
    written_types, modes = set(), set()
    for run_dir in (trained, tried, evaluated):
        record = json.loads((run_dir / "run.json").read_text())
        folder_validator("runRecord").validate(record)
        modes.add(record["mode"])
        for event in read_events(run_dir):
            folder_validator("eventLine").validate(event)
            written_types.add(event["type"])
        folder_validator("codeManifest").validate(json.loads((run_dir / "code.json").read_text()))
        for state in run_dir.glob("checkpoints/step-*/state.json"):
            folder_validator("checkpointState").validate(json.loads(state.read_text()))
        info = RunManager(runs).info(run_dir.name)
        rpc_validator_for("runInfo").validate(info)
        frames, _, _ = read_new_events(run_dir / EVENTS_FILE, 0, run_dir.name)
        for _, frame in frames:
            rpc_validator_for("run/event.params").validate(json.loads(frame)["params"])
        last_status = next(json.loads(frame)["params"] for _, frame in reversed(frames) if '"type": "status"' in frame)
        assert last_status["runInfo"] == {key: info[key] for key in ("status", "step", "totalSteps", "message")}
        run_config.validate(yaml.safe_load((run_dir / "config.yaml").read_text()))
    assert modes == {"train", "try", "eval"}
    # worker_restarted is written only by a run on a Ray cluster whose worker died, and workers only by a run on a
    # Ray cluster (tests/test_cluster.py, through the same RunStore.append_event, which checks every event against
    # the schema as it writes it).
    assert written_types == set(EVENT_TYPES) - {"worker_restarted", "workers"}
    assert any(e["data"].get("superseded_from_seq") for e in read_events(trained) if e["type"] == "status")
    assert json.loads((evaluated / "run.json").read_text())["checkpoint"] == str(checkpoint)
    assert len(json.loads((trained / "code.json").read_text())["resumes"]) == 1, "the resume recorded its code"


def test_a_huge_tool_result_is_stored_cut_with_its_size_and_hash(trajectory_validator):
    """Tool results were stored whole (20 MB results made a 320 MB step file): past RESULT_BUDGET_CHARS a record
    keeps the first characters, the whole's length and its sha256, and says so; a small one is stored as it is."""
    import hashlib

    from agentrl.environment.tool import ToolCallRecord
    from agentrl.rollout.episode import RESULT_BUDGET_CHARS, Episode, TurnRecord

    huge, structured = "ü" * 20_000_000, {"rows": list(range(30_000))}
    episode = Episode("task", 0, 0, prompt_messages=[{"role": "user", "content": "go"}], tool_schemas=[])
    episode.append_tokens([1, 2], "prompt", -1)
    episode.append_tokens([3], "assistant", 0, [-0.5])
    calls = [ToolCallRecord(f"c{i}", "t", {}, "raw", result=r) for i, r in enumerate([huge, structured, "small"])]
    episode.turns.append(TurnRecord(index=0, assistant="x", tool_calls=calls))
    record = episode.to_record(run_id="r", step=1, decode_token=str)
    trajectory_validator.validate(record)
    first, second, small = record["turns"][0]["tool_calls"]
    assert first["result"] == huge[:RESULT_BUDGET_CHARS]
    assert first["result_cut"] == {"chars": 20_000_000, "sha256": hashlib.sha256(huge.encode()).hexdigest()}
    text = json.dumps(structured)
    assert second["result"] == text[:RESULT_BUDGET_CHARS] and second["result_cut"]["chars"] == len(text)
    assert small["result"] == "small" and "result_cut" not in small
    assert len(json.dumps(record, ensure_ascii=False)) < 2 * RESULT_BUDGET_CHARS + 10_000  # not 20 MB

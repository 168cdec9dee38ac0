"""Trackers: a short real run logs to TensorBoard, W&B (offline) and MLflow (a folder store) at once, and each is
read back with that tracker's own reader; a tracker that is missing or unreachable costs one warning, not the run."""

import json
import struct
import sys
import zlib
from pathlib import Path

import pytest
from agentrl.run.runstore import latest_status, read_events
from agentrl.run.trackers.mlflow_tracker import mlflow_name
from agentrl.run.trainer import train
from conftest import EXAMPLE_CONFIG
from test_health import never_rewarded


def tracked_run(tmp_path, *logging):
    """Two steps of a run that cannot learn (a zero_variance_groups alert at step 2), evaluated at step 2."""
    config = never_rewarded(
        tmp_path,
        "train.steps=2",
        "data.eval=tasks.jsonl",
        "train.eval_every=2",
        "train.eval_limit=4",
        "logging.trajectory_sample=3",
        *logging,
    )
    run_dir = train(
        config, runs_dir=tmp_path / "runs", run_id="tracked", config_base_dir=EXAMPLE_CONFIG.parent, progress=True
    )
    events = read_events(run_dir)
    metrics = {e["data"]["step"]: e["data"]["metrics"] for e in events if e["type"] == "metrics"}
    health = [e["data"] for e in events if e["type"] == "health"]
    return run_dir, events, metrics, health


@pytest.fixture(scope="module")
def all_trackers(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("trackers")
    run_dir, events, metrics, health = tracked_run(
        tmp_path,
        f"logging.tensorboard.log_dir={tmp_path / 'tb'}",
        "logging.wandb.project=agentrl-test",
        "logging.wandb.mode=offline",
        f"logging.mlflow.tracking_uri={tmp_path / 'mlruns'}",
        "logging.mlflow.experiment=agentrl-test",
    )
    assert [e for e in events if e["type"] == "log" and e["data"]["level"] == "warning"] == []
    assert latest_status(events)["status"] == "completed"
    assert [event["code"] for event in health] == ["zero_variance_groups"] and "eval/reward" in metrics[2]
    return tmp_path, run_dir, metrics, health


def test_tensorboard_event_files_hold_every_metric_the_config_health_and_trajectories(all_trackers):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tmp_path, run_dir, metrics, health = all_trackers
    board = EventAccumulator(str(tmp_path / "tb" / run_dir.name), size_guidance={"scalars": 0, "tensors": 0})
    board.Reload()
    for step, values in metrics.items():
        for name, value in values.items():
            assert [event.value for event in board.Scalars(name) if event.step == step] == [pytest.approx(value)]
    assert [event.step for event in board.Scalars("eval/reward")] == [2]

    def texts(tag):
        return [
            (event.step, event.tensor_proto.string_val[0].decode()) for event in board.Tensors(f"{tag}/text_summary")
        ]

    assert "name: lookup-tiny" in texts("config")[0][1] and "eval_every: 2" in texts("config")[0][1]
    [(step, alert)] = texts("health/zero_variance_groups")
    assert step == 2 and health[0]["message"] in alert and "2-0-0" in alert
    tables = texts("trajectories")
    assert [step for step, _ in tables] == [1, 2] and "| id | step | task_id |" in tables[0][1]
    assert tables[1][1].count("\n| 2-") == 3  # logging.trajectory_sample rows


def wandb_records(path):
    """The protobuf records of a W&B run file (.wandb), parsed by wandb's own `Record`. wandb 0.31 writes the file
    from its Go core and no longer ships a Python reader (wandb.sdk.internal.datastore), so its LevelDB log framing is
    read here: a 7-byte header (':W&B', magic 0xBEE1, version), then 32 KiB blocks of records (crc32, length, type),
    a record split over blocks as FIRST, MIDDLE..., LAST. Every record's checksum is verified."""
    from wandb.proto.wandb_internal_pb2 import Record

    data = path.read_bytes()
    assert struct.unpack("<4sHB", data[:7])[:2] == (b":W&B", 0xBEE1)
    block, header = 32768, 7
    position, pending = 7, b""
    while position + header <= len(data):
        left = block - position % block
        crc, length, kind = struct.unpack("<IHB", data[position : position + header]) if left >= header else (0, 0, 0)
        if kind == 0:  # the zero padding that ends a block
            position += left
            continue
        payload = data[position + header : position + header + length]
        assert zlib.crc32(payload, zlib.crc32(bytes([kind]))) == crc
        position += header + length
        pending += payload
        if kind in (1, 4):  # FULL, or the LAST piece of a split record
            record = Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def test_a_wandb_offline_run_holds_every_metric_the_config_health_and_trajectory_tables(all_trackers):
    tmp_path, run_dir, metrics, health = all_trackers
    [run_file] = (run_dir / "wandb").glob("offline-run-*/run-*.wandb")
    files = run_file.parent / "files"
    history, config = {}, {}
    for record in wandb_records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            config = {item.key: json.loads(item.value_json) for item in record.run.config.update}
        elif kind == "history":
            row: dict = {}
            for item in record.history.item:
                *path, leaf = item.nested_key or [item.key]
                node = row
                for part in path:
                    node = node.setdefault(part, {})
                node[leaf] = json.loads(item.value_json)
            history[row["_step"]] = row
    assert config["name"] == "lookup-tiny" and config["train"]["eval_every"] == 2
    for step, values in metrics.items():
        assert {name: history[step][name] for name in values} == pytest.approx(values)
    table = json.loads((files / history[2]["trajectories"]["path"]).read_text())
    assert table["columns"][:3] == ["id", "step", "task_id"] and len(table["data"]) == 3
    assert all(row[1] == 2 for row in table["data"])
    events = json.loads((files / history[2]["health/events"]["path"]).read_text())
    assert [row[:4] for row in events["data"]] == [[2, "zero_variance_groups", "warning", False]]
    assert events["data"][0][4] == health[0]["message"]


def test_an_mlflow_folder_store_holds_every_metric_the_config_health_and_trajectory_tables(all_trackers, tmp_path):
    from mlflow.tracking import MlflowClient

    store, run_dir, metrics, health = all_trackers
    client = MlflowClient(tracking_uri=str(store / "mlruns"))
    experiment = client.get_experiment_by_name("agentrl-test")
    [run] = client.search_runs([experiment.experiment_id])
    assert run.data.tags["agentrl.run_id"] == run_dir.name and run.info.status == "FINISHED"
    assert run.data.params["train.eval_every"] == "2" and run.data.params["name"] == "lookup-tiny"
    names = {name for values in metrics.values() for name in values}
    for name in names:
        logged = {m.step: m.value for m in client.get_metric_history(run.info.run_id, mlflow_name(name))}
        assert logged == pytest.approx({step: values[name] for step, values in metrics.items() if name in values})

    def artifact(path):
        return json.loads(Path(client.download_artifacts(run.info.run_id, path, str(tmp_path))).read_text())

    assert artifact("config.json")["train"]["eval_every"] == 2
    assert artifact("health/step-000002-zero_variance_groups-warning.json") == health[0]
    table = artifact("trajectories/step-000001.json")
    assert table["columns"][0] == "id" and [row[0] for row in table["data"]] == ["1-0-0", "1-0-2", "1-1-0"]


def warnings_of(events):
    return [e["data"]["message"] for e in events if e["type"] == "log" and e["data"]["level"] == "warning"]


def test_a_missing_tracker_library_is_one_warning_and_the_run_goes_on(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # what `import wandb` meets where it is not installed
    _, events, metrics, _ = tracked_run(tmp_path, "logging.wandb.project=agentrl-test", "logging.wandb.mode=offline")
    [warning] = warnings_of(events)
    assert warning.startswith("logging.wandb: the wandb library is not installed") and "agentrl[wandb]" in warning
    assert f"WARN {warning}" in capsys.readouterr().err
    assert latest_status(events)["status"] == "completed" and sorted(metrics) == [1, 2]


def test_an_unreachable_tracker_is_one_warning_and_the_run_goes_on(tmp_path, capsys):
    _, events, metrics, _ = tracked_run(tmp_path, "logging.mlflow.tracking_uri=http://127.0.0.1:9")
    [warning] = warnings_of(events)
    assert warning.startswith("logging.mlflow: could not start") and "127.0.0.1:9" in warning
    assert f"WARN {warning}" in capsys.readouterr().err
    assert latest_status(events)["status"] == "completed" and sorted(metrics) == [1, 2]


STORE_REMOVING_ENV = '''
import os
import shutil
from agentrl.examples.lookup.env import LookupEnv

class RemovesTheStoreAtStep2(LookupEnv):
    """Step 1 scores 8 episodes; the first score of step 2 deletes the MLflow folder store the run logs to."""
    scored = 0
    def score(self, final_text):
        RemovesTheStoreAtStep2.scored += 1
        if RemovesTheStoreAtStep2.scored == 9:
            shutil.rmtree(os.environ["AGENTRL_TEST_MLFLOW_STORE"])
        return super().score(final_text)
'''


def test_a_tracker_that_fails_mid_run_is_one_warning_and_is_dropped(tmp_path, monkeypatch, capsys):
    store = tmp_path / "mlruns"
    monkeypatch.setenv("AGENTRL_TEST_MLFLOW_STORE", str(store))
    (tmp_path / "removes.py").write_text(STORE_REMOVING_ENV)
    _, events, metrics, _ = tracked_run(
        tmp_path,
        f"logging.mlflow.tracking_uri={store}",
        "train.steps=3",
        f"env.module={tmp_path / 'removes.py'}",
        "env.class_name=RemovesTheStoreAtStep2",
    )
    [warning] = warnings_of(events)
    assert warning.startswith("logging.mlflow: stopped logging at step 2")
    assert capsys.readouterr().err.count("WARN logging.mlflow") == 1
    assert latest_status(events)["status"] == "completed" and sorted(metrics) == [1, 2, 3]

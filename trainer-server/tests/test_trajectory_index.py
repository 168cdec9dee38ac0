"""trajectory/get's offset index: each line indexed once, the latest record of an id wins (a resumed run writes
superseded trajectories again), and a line still being written is left for the next read."""

import json

from agentrl.server.trajectory_index import TrajectoryIndex


def line(trajectory_id, reward, **more):
    return json.dumps({"schema_version": 1, "id": trajectory_id, "reward": reward, **more}) + "\n"


def test_records_come_from_their_offsets_and_the_latest_line_of_an_id_wins(tmp_path):
    path = tmp_path / "step-000003.trajectories.jsonl"
    path.write_text(line("3-0-0", 0.0) + line("3-0-1", 1.0) + line("3-1-0", 0.5))
    index = TrajectoryIndex()
    assert index.records(path, ["3-1-0", "3-0-0", "9-9-9"]) == {
        "3-1-0": json.loads(line("3-1-0", 0.5)),
        "3-0-0": json.loads(line("3-0-0", 0.0)),
    }
    with path.open("a") as handle:  # a resumed run writes 3-0-1 again, and is cut off in the middle of a line
        handle.write(line("3-0-1", 0.25, resumed=True) + line("3-2-0", 1.0)[:20])
    assert index.records(path, ["3-0-1"])["3-0-1"]["resumed"] is True
    assert [r["id"] for r in index.all_records(path)] == ["3-0-0", "3-1-0", "3-0-1"]  # the torn line is not a record
    with path.open("a") as handle:
        handle.write(line("3-2-0", 1.0)[20:])
    assert [r["id"] for r in index.all_records(path)] == ["3-0-0", "3-1-0", "3-0-1", "3-2-0"]


def test_a_line_written_another_way_is_still_indexed(tmp_path):
    path = tmp_path / "step-000001.trajectories.jsonl"
    path.write_text(json.dumps({"id": "1-0-0", "schema_version": 1}) + "\n")
    assert TrajectoryIndex().records(path, ["1-0-0"])["1-0-0"]["id"] == "1-0-0"

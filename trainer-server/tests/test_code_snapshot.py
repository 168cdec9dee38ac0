"""The code each run trained with: a run copies the files of its env folder that its env imported (code/), with their
sha256 and the versions of python, agentrl, torch, transformers and vLLM (code.json); the copy outlives the folder
being edited or deleted, keeps to its size caps, never follows a link out of the folder, records a resume's own
hashes beside the first, and the server serves it (`run/code`, `run/codeFile`) without letting a path leave it."""

import hashlib
import json
import shutil
import sys

import pytest
from agentrl.contract.config import load_config, resolve_paths
from agentrl.contract.schemas import validator_for
from agentrl.environment import code_snapshot
from agentrl.environment.code_snapshot import CODE_DIR, CODE_MANIFEST_FILE, record_code, use_snapshot
from agentrl.rollout.scripted import ScriptedPolicy
from agentrl.run.runstore import read_events
from agentrl.run.trainer import train
from agentrl.server import protocol as p
from server_harness import ServerProcess

ENV = """
from agentrl import EpisodeScore
from agentrl.examples.lookup.env import LookupEnv as ShippedLookupEnv

from helpers.tables import TABLE
from tools import Lookup


class LookupEnv(ShippedLookupEnv):
    \"\"\"agentrl's lookup example with this folder's Lookup, which the tests edit, scored by the folder's table.\"\"\"

    def __init__(self, **args):
        super().__init__(**args)
        self.tools = [Lookup()]

    def score(self, final_text):
        return EpisodeScore(reward=float(TABLE["3"] in final_text))
"""
TOOLS = """
from agentrl import Tool

from helpers.tables import TABLE


class Lookup(Tool):
    name = "lookup"
    description = "Return the value stored under a key."
    parameters = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}

    def execute(self, key):
        return TABLE[key]
"""
CALL = '<tool_call>{"name": "lookup", "arguments": {"key": "3"}}</tool_call>'


@pytest.fixture(autouse=True)
def fresh_env_modules(tmp_path_factory):
    """Each test imports its env folder's tools.py and helpers/ anew: this process would otherwise keep the first
    test's modules under those names (a run's process imports them once)."""

    def forget():
        base = str(tmp_path_factory.getbasetemp())
        for name, module in list(sys.modules.items()):
            if (getattr(module, "__file__", None) or "").startswith(base):
                del sys.modules[name]

    forget()
    yield
    forget()


def write_env(folder, *, steps=1):
    """An env folder: env.py imports tools.py and helpers/tables.py; notes.py is never imported."""
    (folder / "helpers").mkdir(parents=True, exist_ok=True)
    (folder / "env.py").write_text(ENV)
    (folder / "tools.py").write_text(TOOLS)
    (folder / "helpers" / "__init__.py").write_text("")
    (folder / "helpers" / "tables.py").write_text('TABLE = {"3": "gold"}\n')
    (folder / "notes.py").write_text("raise SystemExit('never imported')\n")
    (folder / "tasks.jsonl").write_text(json.dumps({"key": "3"}) + "\n")
    (folder / "env.agentrl.yaml").write_text(
        "name: snap\nmodel: {path: tiny, tiny_layers: 1, tiny_hidden: 32}\n"
        "env: {module: env.py, class_name: LookupEnv}\ndata: {train: tasks.jsonl}\n"
        "rollout: {group_size: 2, max_turns: 2, max_new_tokens: 16}\n"
        f"train: {{steps: {steps}, batch_size: 2, micro_batch_size: 2, checkpoint_every: 1}}\n"
    )
    return load_config(folder / "env.agentrl.yaml")


def try_run(folder, runs_dir):
    return train(
        write_env(folder),
        runs_dir=runs_dir,
        rollout_only_episodes=1,
        config_base_dir=folder,
        policy=ScriptedPolicy([CALL, "gold"]),
    )


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_run_keeps_the_files_its_env_imported_with_their_hashes_and_the_versions(tmp_path):
    folder = tmp_path / "env"
    run_dir = try_run(folder, tmp_path / "runs")
    manifest = json.loads((run_dir / CODE_MANIFEST_FILE).read_text())
    validator_for("run-folder.schema.json", "codeManifest").validate(manifest)
    code = manifest["code"]
    assert code["root"] == str(folder)
    files = {f["path"]: f for f in code["files"]}
    assert set(files) == {"env.py", "tools.py", "helpers/__init__.py", "helpers/tables.py", "tasks.jsonl"}, (
        "the files the env imported, and the run's data file; notes.py was never imported"
    )
    for path, entry in files.items():
        assert entry["sha256"] == sha256(folder / path) == sha256(run_dir / CODE_DIR / path)
        assert entry["size"] == (folder / path).stat().st_size
    versions = code["versions"]
    assert set(versions) == {"python", "agentrl", "torch", "transformers", "vllm"}
    assert versions["agentrl"] and versions["torch"] and versions["transformers"] and versions["python"].count(".") == 2
    assert code["left_out"] == [] and manifest["resumes"] == [] and code["platform"]
    assert manifest["limits"] == {"file_bytes": 2**20, "total_bytes": 10 * 2**20}

    (folder / "tools.py").write_text(TOOLS.replace("return TABLE[key]", "return 'edited'"))
    shutil.rmtree(folder / "helpers")
    assert json.loads((run_dir / CODE_MANIFEST_FILE).read_text()) == manifest
    assert "return TABLE[key]" in (run_dir / CODE_DIR / "tools.py").read_text(), "the snapshot outlives an edit"
    shutil.rmtree(folder)
    for path, entry in files.items():
        assert sha256(run_dir / CODE_DIR / path) == entry["sha256"], "and the env folder's deletion"


def test_the_caps_are_kept_and_a_link_out_of_the_folder_is_never_followed(tmp_path, monkeypatch):
    folder, outside = tmp_path / "env", tmp_path / "elsewhere"
    config = resolve_paths(write_env(folder), folder)
    outside.mkdir()
    (outside / "secret.py").write_text("TABLE = {'3': 'from elsewhere'}\n")
    (folder / "helpers" / "tables.py").unlink()
    (folder / "helpers" / "tables.py").symlink_to(outside / "secret.py")
    (folder / "tasks.jsonl").write_text((json.dumps({"key": "3"}) + "\n") * 40_000)  # 560 KB of data
    monkeypatch.setattr(code_snapshot, "MAX_FILE_BYTES", 500_000)
    monkeypatch.setattr(code_snapshot, "MAX_TOTAL_BYTES", len(ENV) + 10)
    monkeypatch.syspath_prepend(str(folder))
    __import__("tools")  # what loading the env imports; the link is imported through its name in the folder
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    record_code(run_dir, config)
    manifest = json.loads((run_dir / CODE_MANIFEST_FILE).read_text())
    validator_for("run-folder.schema.json", "codeManifest").validate(manifest)
    kept = {f["path"]: f["size"] for f in manifest["code"]["files"]}
    left_out = {f["path"]: f["reason"] for f in manifest["code"]["left_out"]}
    assert kept == {"env.py": len(ENV), "helpers/__init__.py": 0}, "the config's module first, then what fits"
    assert left_out == {
        "helpers/tables.py": "a link out of the env folder",
        "tools.py": f"past {len(ENV) + 10:,} bytes, the cap of the whole snapshot",
        "tasks.jsonl": "over 500,000 bytes, the cap per file",
    }
    assert not (run_dir / CODE_DIR / "helpers" / "tables.py").exists()
    assert sorted(str(p.relative_to(run_dir / CODE_DIR)) for p in (run_dir / CODE_DIR).rglob("*") if p.is_file()) == (
        sorted(kept)
    )


def test_a_resume_keeps_the_first_snapshot_and_records_its_own_hashes(tmp_path):
    folder, runs = tmp_path / "env", tmp_path / "runs"
    config = write_env(folder, steps=2)
    policy = ScriptedPolicy([CALL, "gold"])
    run_dir = train(config, runs_dir=runs, max_steps=1, config_base_dir=folder, policy=policy)
    first = json.loads((run_dir / CODE_MANIFEST_FILE).read_text())
    (folder / "tools.py").write_text(TOOLS.replace("return TABLE[key]", "return TABLE[key].upper()"))
    train(None, runs_dir=runs, resume_dir=run_dir, policy=policy)
    manifest = json.loads((run_dir / CODE_MANIFEST_FILE).read_text())
    validator_for("run-folder.schema.json", "codeManifest").validate(manifest)
    assert {k: v for k, v in manifest.items() if k != "resumes"} == {k: v for k, v in first.items() if k != "resumes"}
    [resume] = manifest["resumes"]
    assert resume["step"] == 1 and resume["changed"] == ["tools.py"]
    assert {f["path"]: f["sha256"] for f in resume["code"]["files"]}["tools.py"] == sha256(folder / "tools.py")
    assert "return TABLE[key]\n" in (run_dir / CODE_DIR / "tools.py").read_text(), "the first snapshot is kept"
    warnings = [e["data"]["message"] for e in read_events(run_dir) if e["data"].get("level") == "warning"]
    assert any("resumed with code that differs from the run's start (tools.py)" in w for w in warnings)


def test_an_agent_configs_files_are_its_code_and_use_snapshot_points_the_config_at_the_copy(tmp_path):
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "agent.py").write_text("def run(task, base_url, api_key):\n    return 'v1'\n")
    (folder / "reward.py").write_text("def score(task, result):\n    return 1.0\n")
    (folder / "tasks.jsonl").write_text(json.dumps({"key": "3"}) + "\n")
    (folder / "a.agentrl.yaml").write_text(
        "name: a\nmodel: {path: tiny}\nagent: {module: agent.py, reward: 'reward.py:score'}\n"
        "data: {train: tasks.jsonl}\n"
    )
    config = resolve_paths(load_config(folder / "a.agentrl.yaml"), folder)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    record_code(run_dir, config)
    manifest = json.loads((run_dir / CODE_MANIFEST_FILE).read_text())
    assert {f["path"] for f in manifest["code"]["files"]} == {"agent.py", "reward.py", "tasks.jsonl"}
    snapshot = run_dir / CODE_DIR
    moved = use_snapshot(config, run_dir)
    assert moved.agent.module == str(snapshot / "agent.py")
    assert moved.agent.reward == f"{snapshot / 'reward.py'}:score" and moved.data.train == str(snapshot / "tasks.jsonl")
    assert sys.path[0] == str(snapshot)
    sys.path.remove(str(snapshot))
    with pytest.raises(ValueError, match="recorded no code snapshot"):
        use_snapshot(config, tmp_path)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A Try run of the env above, its folder then deleted, and a server over its runs folder."""
    tmp = tmp_path_factory.mktemp("served")
    run_dir = try_run(tmp / "env", tmp / "runs")
    shutil.rmtree(tmp / "env")
    server = ServerProcess(tmp / "runs")
    client = server.client()
    yield client, run_dir
    client.close()
    server.stop()


def test_run_code_and_run_code_file_serve_the_snapshot(served):
    client, run_dir = served
    code = client.request("run/code", {"runId": run_dir.name})
    assert code["runId"] == run_dir.name
    assert code["manifest"] == json.loads((run_dir / CODE_MANIFEST_FILE).read_text())
    tools = client.request("run/codeFile", {"runId": run_dir.name, "path": "tools.py"})
    assert tools == {
        "runId": run_dir.name,
        "path": "tools.py",
        "sha256": sha256(run_dir / CODE_DIR / "tools.py"),
        "size": len(TOOLS.encode()),
        "text": TOOLS,
    }
    nested = client.request("run/codeFile", {"runId": run_dir.name, "path": "helpers/tables.py"})
    assert nested["text"] == 'TABLE = {"3": "gold"}\n'


def test_a_run_without_a_snapshot_says_so_and_bad_names_get_documented_errors(served, tmp_path):
    client, run_dir = served
    assert client.call("run/code", {"runId": "nope"})["error"]["code"] == p.RUN_NOT_FOUND
    assert client.call("run/codeFile", {"runId": "nope", "path": "env.py"})["error"]["code"] == p.RUN_NOT_FOUND
    older = run_dir.parent / "older-run"  # a run from before runs recorded their code
    older.mkdir()
    (older / "run.json").write_text(json.dumps({"run_id": older.name, "created_at": "2026-01-01T00:00:00+00:00"}))
    assert client.request("run/code", {"runId": older.name}) == {"runId": older.name, "manifest": None}
    no_code = client.call("run/codeFile", {"runId": older.name, "path": "env.py"})["error"]
    assert no_code["code"] == p.INVALID_PARAMS and "recorded no code" in no_code["message"]
    assert client.call("run/codeFile", {"runId": run_dir.name, "path": "notes.py"})["error"]["code"] == (
        p.INVALID_PARAMS
    ), "a file of the folder the env never imported is not in the snapshot"


@pytest.mark.parametrize(
    "path",
    [
        "../config.yaml",
        "../run.json",
        "helpers/../../config.yaml",
        "/etc/passwd",
        "./env.py",
        "helpers//tables.py",
        "helpers\\tables.py",
        "env.py\0",
        "",
        "helpers",
    ],
)
def test_a_path_never_leaves_the_snapshot(served, path):
    client, run_dir = served
    error = client.call("run/codeFile", {"runId": run_dir.name, "path": path})["error"]
    assert error["code"] == p.INVALID_PARAMS, error


def test_a_link_planted_in_the_snapshot_is_not_followed(served, tmp_path):
    client, run_dir = served
    (tmp_path / "outside.py").write_text("SECRET = 1\n")
    target = run_dir / CODE_DIR / "tools.py"
    saved = target.read_bytes()
    target.unlink()
    target.symlink_to(tmp_path / "outside.py")
    try:
        error = client.call("run/codeFile", {"runId": run_dir.name, "path": "tools.py"})["error"]
    finally:
        target.unlink()
        target.write_bytes(saved)
    # The run folder's damage, not the request's: a run state conflict, never invalid params.
    assert error["code"] == p.RUN_STATE_CONFLICT and "SECRET" not in error["message"]
    assert "tools.py is a link" in error["message"]


def test_a_code_folder_that_is_a_link_is_not_followed(served, tmp_path):
    """code/ planted as a link to a folder outside (/etc, where a manifest listing `passwd` made run/codeFile serve
    /etc/passwd): refused, and nothing of the folder it leads to is read."""
    client, run_dir = served
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "tools.py").write_text("SECRET = 1\n")
    (run_dir / CODE_DIR).rename(run_dir / "code-saved")
    (run_dir / CODE_DIR).symlink_to(outside)
    try:
        error = client.call("run/codeFile", {"runId": run_dir.name, "path": "tools.py"})["error"]
    finally:
        (run_dir / CODE_DIR).unlink()
        (run_dir / "code-saved").rename(run_dir / CODE_DIR)
    assert error["code"] == p.RUN_STATE_CONFLICT and "SECRET" not in error["message"]
    assert "code is a link" in error["message"]


def test_a_snapshot_file_over_the_cap_is_refused_unread(served):
    """A snapshot file grown past the cap it was recorded under (a file of gigabytes was served whole)."""
    client, run_dir = served
    target = run_dir / CODE_DIR / "tools.py"
    saved = target.read_bytes()
    target.write_bytes(b"#" * (code_snapshot.MAX_FILE_BYTES + 1))
    try:
        error = client.call("run/codeFile", {"runId": run_dir.name, "path": "tools.py"})["error"]
    finally:
        target.write_bytes(saved)
    assert error["code"] == p.RUN_STATE_CONFLICT and "over the 1,048,576 read" in error["message"]

"""What a Ray run carries to its workers (agentrl/cluster/code_shipping.py): the env folder as the code snapshot
chooses its files, the files the config names outside it, a model folder; and the worker's config reading them from
its own folder. The cluster tests (test_cluster.py, test_ray_nodes.py) run it on Ray."""

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from agentrl.cluster.code_shipping import MAX_SHIPPED_BYTES, Unpacked, pack
from agentrl.contract.config import RunConfig, load_config, resolve_paths

ENV = """
from agentrl import ToolEnv
from helper import WORD

class Echo(ToolEnv):
    tools = []
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    env = tmp_path / "project" / "env"
    (env / "sub").mkdir(parents=True)
    (env / "env.py").write_text(ENV)
    (env / "helper.py").write_text("WORD = 'hi'\n")
    (env / "server.sh").write_text("#!/bin/sh\necho serving\n")
    (env / "server.sh").chmod(0o755)
    (env / "sub" / "corpus.json").write_text('{"a": 1}')
    (env / ".venv" / "lib").mkdir(parents=True)
    (env / ".venv" / "lib" / "big.py").write_text("x = 1\n")
    (env / "__pycache__").mkdir()
    (env / "__pycache__" / "env.cpython-311.pyc").write_bytes(b"\0")
    (env / "runs" / "r1").mkdir(parents=True)
    (env / "runs" / "r1" / "events.jsonl").write_text("{}\n")
    (env / "secret-link").symlink_to("/etc/hostname")
    data = tmp_path / "project" / "data"
    data.mkdir()
    (data / "tasks.jsonl").write_text('{"id": "t1", "prompt": "p"}\n')
    (data / "eval.jsonl").write_text('{"id": "e1", "prompt": "p"}\n')
    (env / "run.agentrl.yaml").write_text(
        "model: {path: tiny}\nenv: {module: env.py, class_name: Echo}\n"
        "data: {train: ../data/tasks.jsonl, eval: ../data/eval.jsonl}\n"
    )
    return env


def config_of(env: Path) -> RunConfig:
    return resolve_paths(load_config(env / "run.agentrl.yaml"), env)


def test_the_env_folder_and_the_named_files_travel_and_nothing_else(project: Path) -> None:
    shipped = pack(config_of(project), runs_dir=project / "runs")
    assert sorted(shipped.files) == [
        "env/env.py",
        "env/helper.py",
        "env/run.agentrl.yaml",
        "env/server.sh",
        "env/sub/corpus.json",
        "files/0/tasks.jsonl",
        "files/1/eval.jsonl",
    ]
    assert shipped.files["env/sub/corpus.json"] == b'{"a": 1}'
    assert shipped.import_root == "env"


def test_the_worker_reads_every_path_from_its_own_folder(project: Path) -> None:
    config = config_of(project)
    unpacked = Unpacked(config.model_dump(mode="json"), pack(config, runs_dir=project / "runs"))
    try:
        assert unpacked.folder is not None and oct(unpacked.folder.stat().st_mode & 0o777) == "0o700"
        moved = RunConfig.model_validate(unpacked.config)
        assert moved.env is not None and moved.env.module == str(unpacked.folder / "env" / "env.py")
        assert Path(moved.env.module).read_text() == ENV
        assert moved.data.train == str(unpacked.folder / "files" / "0" / "tasks.jsonl")
        assert Path(moved.data.eval).read_text() == (project.parent / "data" / "eval.jsonl").read_text()
        assert str(unpacked.folder / "env") in os.sys.path  # the env's sibling imports
        assert os.access(unpacked.folder / "env" / "server.sh", os.X_OK)  # an MCP server's program runs
        assert not os.access(unpacked.folder / "env" / "helper.py", os.X_OK)
    finally:
        unpacked.close()
    assert not unpacked.folder.exists()
    os.sys.path.remove(str(unpacked.folder / "env"))


def test_a_module_name_with_a_function_moves_with_its_file(project: Path, tmp_path: Path) -> None:
    algorithm = tmp_path / "my_algorithm.py"
    algorithm.write_text("def advantages(*args): ...\n")
    config = config_of(project).model_copy(deep=True)
    config.algorithm.name = f"{algorithm}:advantages"
    unpacked = Unpacked(config.model_dump(mode="json"), pack(config))
    try:
        module, name = unpacked.config["algorithm"]["name"].rsplit(":", 1)
        assert name == "advantages" and Path(module).read_text() == algorithm.read_text()
        assert Path(module).is_relative_to(unpacked.folder)
    finally:
        unpacked.close()
        os.sys.path.remove(str(unpacked.folder / "env"))


def test_a_model_folder_travels(project: Path, tmp_path: Path) -> None:
    model = tmp_path / "checkpoint"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights")
    config = config_of(project).model_copy(deep=True)
    config.model.path = str(model)
    shipped = pack(config)
    assert shipped.files["model/model.safetensors"] == b"weights"
    unpacked = Unpacked(config.model_dump(mode="json"), shipped)
    try:
        assert (Path(unpacked.config["model"]["path"]) / "config.json").read_text() == "{}"
    finally:
        unpacked.close()
        os.sys.path.remove(str(unpacked.folder / "env"))


def test_an_env_folder_too_large_is_refused_naming_its_largest_file(project: Path) -> None:
    with open(project / "sub" / "huge.bin", "wb") as out:
        out.truncate(MAX_SHIPPED_BYTES + 1)  # sparse: no disk is used
    with pytest.raises(ValueError, match=r"over 256 MiB \(largest: .*huge\.bin \(256\.0 MiB\)"):
        pack(config_of(project))


def test_agentrl_s_own_env_ships_only_its_named_files() -> None:
    from conftest import EXAMPLE_CONFIG

    shipped = pack(resolve_paths(load_config(EXAMPLE_CONFIG), EXAMPLE_CONFIG.parent))
    assert "env/env.py" in shipped.files and "env/tasks.jsonl" in shipped.files


def test_an_installed_program_a_config_names_stays_each_node_s_own(project: Path) -> None:
    """An MCP server started by this interpreter: each node runs its own Python, never a copy of this one."""
    import sys

    from agentrl.contract.env_sources import McpServerConfig

    config = config_of(project).model_copy(deep=True)
    assert config.env is not None
    config.env.mcp_servers = [McpServerConfig(name="m", command=sys.executable, args=[str(project / "helper.py")])]
    shipped = pack(config)
    assert not any(place.startswith("files/") and Path(place).name.startswith("python") for place in shipped.files)
    unpacked = Unpacked(config.model_dump(mode="json"), shipped)
    try:
        [server] = unpacked.config["env"]["mcp_servers"]
        assert server["command"] == sys.executable
        assert server["args"] == [str(unpacked.folder / "env" / "helper.py")]
    finally:
        unpacked.close()
        os.sys.path.remove(str(unpacked.folder / "env"))


def test_a_worker_removes_the_folders_of_this_node_s_workers_that_are_gone(project: Path, tmp_path: Path, monkeypatch):
    """A worker Ray kills never runs `close`: the next worker on the node removes its folder. Folders of running
    workers, and folders that name no owner, stay."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ended = subprocess.Popen(["true"])
    ended.wait()
    for name, owner in (("gone", str(ended.pid)), ("running", str(os.getpid())), ("unnamed", None)):
        folder = tmp_path / f"agentrl-shipped-{name}"
        (folder / "env").mkdir(parents=True)
        if owner is not None:
            (folder / ".owner-pid").write_text(owner)
    config = config_of(project)
    unpacked = Unpacked(config.model_dump(mode="json"), pack(config))
    try:
        left = sorted(p.name for p in tmp_path.glob("agentrl-shipped-*"))
        assert left == sorted(["agentrl-shipped-running", "agentrl-shipped-unnamed", unpacked.folder.name])
        assert (unpacked.folder / ".owner-pid").read_text() == str(os.getpid())
    finally:
        unpacked.close()
        os.sys.path.remove(str(unpacked.folder / "env"))

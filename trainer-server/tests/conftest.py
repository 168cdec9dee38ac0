import json
import os
import socket
from pathlib import Path

import jsonschema
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[2]
PROTOCOL = REPO / "protocol"
EXAMPLE_CONFIG = REPO / "trainer-server" / "agentrl" / "examples" / "lookup" / "lookup.agentrl.yaml"


@pytest.fixture(scope="session")
def trajectory_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads((PROTOCOL / "schemas" / "trajectory.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="session")
def tiny():
    from agentrl.models.tiny import build_tiny_model_and_tokenizer

    return build_tiny_model_and_tokenizer(layers=1, hidden=32, seed=0)


def rollout_only_records(config: Path, episodes: int, runs_dir: Path, *overrides: str) -> list[dict]:
    """A Try run of a recipe (`agentrl train CONFIG --rollout-only N`, greedy): its trajectory records."""
    import subprocess
    import sys

    sets = [arg for override in ("rollout.temperature=0", *overrides) for arg in ("--set", override)]
    done = subprocess.run(
        [sys.executable, "-m", "agentrl.cli", "train", str(config), "--rollout-only", str(episodes), *sets]
        + ["--runs-dir", str(runs_dir), "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    [run_dir] = list(runs_dir.iterdir())
    return [json.loads(line) for line in (run_dir / "trajectories" / "step-000000.trajectories.jsonl").open()]


def free_port() -> int:
    """A loopback port no one listens on now (the OS picks it; it stays free until someone binds it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]

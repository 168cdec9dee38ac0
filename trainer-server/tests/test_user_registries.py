"""A user's own algorithm and policy loss, named MODULE:NAME in the run config, as docs/algorithms.md's example gives
them: loaded from a file beside the config (its path relative to it), trained end to end by the learner; a name that
is not what its key needs is refused, naming the key and what it found."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from agentrl.contract.config import load_config
from agentrl.environment.user_code import EnvLoadError
from agentrl.learning.algorithms import get_algorithm
from agentrl.learning.policy_losses import get_policy_loss
from agentrl.run.runstore import latest_status, read_events
from agentrl.run.trainer import train
from conftest import EXAMPLE_CONFIG, REPO

PAGE = (REPO / "docs" / "algorithms.md").read_text()


def _block(language: str, defining: str) -> str:
    [code] = [c for c in re.findall(rf"^```{language}\n(.*?)^```$", PAGE, flags=re.S | re.M) if defining in c]
    return code


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The lookup example's folder with the page's my_rl.py beside its config, which names both as the page does."""
    shutil.copytree(EXAMPLE_CONFIG.parent, tmp_path / "example", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "example" / "my_rl.py").write_text(_block("python", "class BatchBaseline"))
    config = yaml.safe_load(EXAMPLE_CONFIG.read_text())
    config["algorithm"] = yaml.safe_load(_block("yaml", "my_rl.py:BatchBaseline"))["algorithm"]
    (tmp_path / "example" / EXAMPLE_CONFIG.name).write_text(yaml.safe_dump(config))
    return tmp_path / "example"


def test_the_pages_algorithm_and_loss_train_the_tiny_model(folder, tmp_path):
    config = load_config(folder / EXAMPLE_CONFIG.name, ["train.steps=20", "train.checkpoint_every=20"])
    run_dir = train(config, runs_dir=tmp_path / "runs", config_base_dir=folder)
    metrics = [e["data"]["metrics"] for e in read_events(run_dir) if e["type"] == "metrics"]
    rewards = [m["reward/mean"] for m in metrics]
    assert latest_status(read_events(run_dir))["status"] == "completed"
    assert len(rewards) == 20
    assert sum(rewards[-5:]) / 5 > sum(rewards[:5]) / 5 + 0.08, f"did not learn: {rewards}"
    # The run folder's copy of the config names the file it used, and those names load the page's code.
    frozen = yaml.safe_load((run_dir / "config.yaml").read_text())["algorithm"]
    assert frozen["name"] == f"{folder / 'my_rl.py'}:BatchBaseline"
    assert frozen["policy_loss"] == f"{folder / 'my_rl.py'}:reinforce"
    assert type(get_algorithm(frozen["name"])).__name__ == "BatchBaseline"
    assert get_policy_loss(frozen["policy_loss"]).__name__ == "reinforce"


def test_a_name_that_is_not_what_its_key_needs_is_refused(folder):
    user_file = folder / "my_rl.py"
    with pytest.raises(ValueError, match=r"algorithm\.name: .*:reinforce is not a subclass of .*Algorithm"):
        get_algorithm(f"{user_file}:reinforce")
    with pytest.raises(EnvLoadError, match=r"algorithm\.policy_loss: .* defines no 'nowhere'"):
        get_policy_loss(f"{user_file}:nowhere")
    with pytest.raises(EnvLoadError, match=r"algorithm\.name: file not found"):
        get_algorithm(f"{folder / 'missing.py'}:BatchBaseline")
    with pytest.raises(ValueError, match=r"unknown algorithm 'grpoo'.*MODULE:NAME"):
        get_algorithm("grpoo")

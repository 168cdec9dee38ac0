"""model.path takes a local folder, a .gguf file, a built-in or a Hugging Face Hub id; offline, a Hub id missing
from the local Hub cache fails at once, naming the id and what to do. Tests stay offline (conftest sets
HF_HUB_OFFLINE): a Hub id is served from a Hub cache laid out in a temporary folder."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from agentrl.contract.config import ModelConfig, load_config_dict, model_source, resolve_paths
from agentrl.models.loading import load_policy
from agentrl.models.smollm2 import cache_dir, load_smollm2


def test_each_kind_of_model_path_is_told_apart(tmp_path):
    (tmp_path / "my-model").mkdir()
    (tmp_path / "weights.gguf").write_bytes(b"GGUF")
    assert model_source("tiny", tmp_path) == "builtin"
    assert model_source("smollm2", tmp_path) == "builtin"
    assert model_source("my-model", tmp_path) == "folder"
    assert model_source(str(tmp_path / "my-model"), Path("/")) == "folder"
    assert model_source("weights.gguf", tmp_path) == "gguf"
    assert model_source("Qwen/Qwen2.5-0.5B-Instruct", tmp_path) == "hub"
    assert model_source("./Qwen/Qwen2.5-0.5B-Instruct", tmp_path) == "missing"  # written as a path: a local one
    assert model_source("no-such-folder", tmp_path) == "missing"
    (tmp_path / "Qwen" / "Qwen2.5-0.5B-Instruct").mkdir(parents=True)
    assert model_source("Qwen/Qwen2.5-0.5B-Instruct", tmp_path) == "folder"  # a folder of that name wins


@pytest.mark.parametrize(
    "path, what",
    [("/etc", "a folder without config.json"), ("/dev/zero", "not a folder nor a .gguf file"), (__file__, "not a")],
)
def test_a_path_that_is_no_model_says_so_not_what_the_tokenizer_made_of_it(path, what):
    """model.path /etc or /dev/zero gave the tokenizer's own, misleading messages."""
    with pytest.raises(FileNotFoundError) as raised:
        load_policy(ModelConfig(path=path), seed=0)
    assert str(raised.value).startswith(f"model.path {path!r} is {what}")
    assert "save_pretrained" in str(raised.value)


def test_a_hub_id_stays_an_id_when_paths_are_resolved(tmp_path):
    config = load_config_dict(
        {
            "model": {"path": "Qwen/Qwen2.5-0.5B-Instruct"},
            "env": {"module": "env.py", "class_name": "Env"},
            "data": {"train": "tasks.jsonl"},
        }
    )
    assert resolve_paths(config, tmp_path).model.path == "Qwen/Qwen2.5-0.5B-Instruct"
    (tmp_path / "weights" / "model").mkdir(parents=True)
    config.model.path = "weights/model"
    assert resolve_paths(config, tmp_path).model.path == str(tmp_path / "weights" / "model")
    config.model.path = "./not/there"  # a missing local path stays a local path, made absolute for the error
    assert resolve_paths(config, tmp_path).model.path == str(tmp_path / "not" / "there")


def test_offline_a_hub_id_not_in_the_cache_fails_at_once_and_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(FileNotFoundError) as raised:
        load_policy(ModelConfig(path="agentrl-tests/no-such-model"), seed=0)
    message = str(raised.value)
    assert "'agentrl-tests/no-such-model' is a Hugging Face Hub id" in message
    assert "HF_HUB_OFFLINE" in message and "hf download agentrl-tests/no-such-model" in message


def test_a_hub_id_in_the_local_hub_cache_loads_offline(tmp_path):
    load_smollm2(torch.float32)  # makes the packaged model's transformers folder, once
    revision = "0" * 40
    repo = tmp_path / "models--agentrl-tests--smollm2"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    for file in cache_dir().iterdir():  # the Hub cache's snapshots are links too
        (snapshot / file.name).symlink_to(file)
    probe = (
        "from agentrl.models.loading import load_policy; from agentrl.contract.config import ModelConfig;"
        "model, tokenizer, _ = load_policy(ModelConfig(path='agentrl-tests/smollm2'), seed=0);"
        "print(float(model.get_input_embeddings().weight.double().sum()), tokenizer('hi').input_ids)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_CACHE": str(tmp_path), "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr
    model, tokenizer = load_smollm2(torch.float32)
    assert done.stdout.split(" ", 1) == [
        str(float(model.get_input_embeddings().weight.double().sum())),
        f"{tokenizer('hi').input_ids}\n",
    ]

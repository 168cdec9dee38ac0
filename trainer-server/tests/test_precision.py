"""`auto` precision: bfloat16 only where the hardware multiplies it; an explicit bfloat16 request elsewhere is warned
about, since torch then multiplies in scalar loops, tens of times slower than float32."""

import pytest
import torch
from agentrl.contract.config import ConfigError, load_config, load_config_dict
from agentrl.learning.learner import Learner
from agentrl.models import precision
from agentrl.rollout import vllm_engine
from agentrl.run.runstore import read_events
from agentrl.run.trainer import train
from conftest import EXAMPLE_CONFIG

CPU = torch.device("cpu")
BASE = {
    "env": {"module": "agentrl.examples.lookup.env", "class_name": "LookupEnv"},
    "data": {"train": "x.jsonl"},
}


@pytest.fixture(params=[True, False], ids=["native", "emulated"])
def native(request, monkeypatch):
    for module in (precision, vllm_engine):
        monkeypatch.setattr(module, "bfloat16_is_native", lambda device: request.param)
    return request.param


def test_the_cpu_check_is_what_onednn_says():
    assert precision.bfloat16_is_native(CPU) == torch.ops.mkldnn._is_mkldnn_bf16_supported()
    assert precision.bfloat16_is_native(torch.device("meta")) is False


def test_autocast_auto_follows_the_hardware_and_true_or_false_are_kept(native):
    assert precision.uses_bf16_autocast("auto", CPU) is native
    assert precision.uses_bf16_autocast(True, CPU) is True
    assert precision.uses_bf16_autocast(False, CPU) is False


def test_the_learner_resolves_auto(tiny, native):
    model, tokenizer = tiny
    cfg = load_config_dict({**BASE, "train": {"bf16_autocast": "auto"}})
    assert Learner(model, tokenizer, cfg, CPU).bf16_autocast is native


def test_vllm_dtype_auto_is_bfloat16_where_native_else_the_policys(native):
    assert vllm_engine._engine_dtype("auto", torch.float32, CPU) == ("bfloat16" if native else "float32")
    assert vllm_engine._engine_dtype("policy", torch.float16, CPU) == "float16"
    assert vllm_engine._engine_dtype("bfloat16", torch.float32, CPU) == "bfloat16"  # as written, even where it is slow


def test_the_settings_take_auto_and_name_what_else_they_take():
    cfg = load_config_dict({**BASE, "train": {"bf16_autocast": "auto"}})
    assert cfg.train.bf16_autocast == "auto" and cfg.rollout.vllm_dtype == "auto"
    with pytest.raises(ConfigError, match="train.bf16_autocast: Input should be False, True or .auto."):
        load_config_dict({**BASE, "train": {"bf16_autocast": "sometimes"}})


@pytest.mark.parametrize("setting", [True, "auto"])
def test_bfloat16_asked_for_where_it_is_emulated_is_one_warning(tmp_path, monkeypatch, capsys, setting):
    monkeypatch.setattr(precision, "bfloat16_is_native", lambda device: False)
    config = load_config(EXAMPLE_CONFIG, ["train.steps=1", f"train.bf16_autocast={str(setting).lower()}"])
    run_dir = train(config, runs_dir=tmp_path, config_base_dir=EXAMPLE_CONFIG.parent, progress=True)
    warnings = [e["data"]["message"] for e in read_events(run_dir) if e["type"] == "log"]
    warnings = [m for m in warnings if "bf16_autocast" in m]
    if setting is True:
        [warning] = warnings
        assert "no bfloat16 matrix instructions" in warning and f"WARN {warning}" in capsys.readouterr().err
    else:
        assert warnings == []  # auto turns it off without a word

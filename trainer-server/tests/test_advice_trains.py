"""Every change the product advises is a configuration that trains (issue: following the memory plan's own advice,
model.gradient_checkpointing: true, crashed every run). Each way the memory plan gives to fit a device, and a trial
of every setting a health alert's fix names, changed as the fix says, each trains one step of the bundled tiny example
into a completed run."""

from __future__ import annotations

import re

import pytest
from agentrl.contract.config import load_config
from agentrl.learning.memory_advice import ways_to_fit
from agentrl.learning.memory_plan import Device, MemoryPlan, plan_memory
from agentrl.run.health_rules import RULES
from agentrl.run.runstore import latest_status, read_events
from agentrl.run.trainer import train
from conftest import EXAMPLE_CONFIG

# The example at its smallest: one step of two groups of two.
SMALL = ["train.steps=1", "train.batch_size=4", "train.micro_batch_size=4", "rollout.group_size=2"]
# A setting each health alert's fix names, changed the way the fix says (raise, lower, turn on, set to...). A fix that
# names a setting not listed here fails `test_every_setting_a_fix_names_has_its_trial`: give it its trial.
VLLM_TRIAL = [
    "rollout.engine=vllm",
    "rollout.vllm_dtype=policy",
    "algorithm.rollout_is.enabled=true",
    "model.tiny_head_dim=32",
]
FIX_TRIALS: dict[str, list[str]] = {
    "rollout.temperature": ["rollout.temperature=1.2"],
    "rollout.group_size": ["rollout.group_size=4"],
    "rollout.tool_format": ["rollout.tool_format=hermes"],
    "rollout.max_new_tokens": ["rollout.max_new_tokens=32"],
    "rollout.max_turns": ["rollout.max_turns=3"],
    "rollout.max_context": ["rollout.max_context=1024"],
    "rollout.tool_timeout_s": ["rollout.tool_timeout_s=10"],
    "rollout.max_abs_reward": ["rollout.max_abs_reward=100"],
    # The two vLLM-side fixes share one run: a vLLM engine starts in about 30 s on 2 cores.
    "rollout.vllm_dtype": VLLM_TRIAL,
    "train.lr": ["train.lr=0.001"],
    "train.non_finite_rewards": ["train.non_finite_rewards=drop"],
    "train.bf16_autocast": ["train.bf16_autocast=false"],
    "algorithm.entropy_coef": ["algorithm.entropy_coef=0.001"],
    "algorithm.kl.coef": ["algorithm.kl.coef=0.05"],
    "algorithm.clip_eps_high": ["algorithm.clip_eps_high=0.28"],
    "algorithm.loss_agg": ["algorithm.loss_agg=seq-mean-token-mean"],
    "algorithm.rollout_is": VLLM_TRIAL,
}
TRIALS = sorted({tuple(trial) for trial in FIX_TRIALS.values()})
SETTING = re.compile(r"\b(?:model|env|data|rollout|algorithm|train|health|logging|cluster|agent)(?:\.[a-z0-9_]+)+")


def trains(tmp_path, overrides: list[str]) -> None:
    config = load_config(EXAMPLE_CONFIG, [*SMALL, *overrides])
    run_dir = train(config, runs_dir=tmp_path, config_base_dir=EXAMPLE_CONFIG.parent)
    status = latest_status(read_events(run_dir))
    assert status["status"] == "completed", (overrides, status)


def test_every_setting_a_fix_names_has_its_trial():
    named = {setting for rule in RULES for setting in SETTING.findall(rule.fix)}
    assert named - set(FIX_TRIALS) == set(), "a health alert's fix names a setting with no trial here"
    assert set(FIX_TRIALS) - named == set(), "a trial for a setting no fix names any more"


@pytest.mark.parametrize("trial", TRIALS, ids=[" ".join(trial) for trial in TRIALS])
def test_each_setting_a_health_alerts_fix_names_trains(trial, tmp_path):
    if "rollout.engine=vllm" in trial:
        pytest.importorskip("vllm")
    trains(tmp_path, list(trial))


def test_each_way_the_memory_plan_gives_to_fit_trains(tmp_path):
    """A device a byte smaller than the example's plan: every change that lowers the peak is a way to fit it. The
    context is the example's doubled, so that the halved one the plan offers still holds its prompts (the advice says
    it must: the plan cannot see how long the env makes them)."""
    config = load_config(EXAMPLE_CONFIG, [*SMALL, "rollout.max_context=1024"])
    plan = plan_memory(config, EXAMPLE_CONFIG.parent)
    assert isinstance(plan, MemoryPlan)
    device = Device("cpu", "a device a byte too small", plan.peak_bytes - 1)
    ways = ways_to_fit(config, EXAMPLE_CONFIG.parent, plan_memory(config, EXAMPLE_CONFIG.parent, device))
    changed = {key for way in ways for key in way.settings}
    # On a CPU device: the cuda-only ways (bfloat16 weights, FSDP shards, the hf engine beside vLLM) are not offered.
    assert changed == {
        "train.micro_batch_size",
        "model.gradient_checkpointing",
        "model.lora.enabled",
        "rollout.max_context",
    }, [way.text for way in ways]
    for way in ways:
        overrides = ["rollout.max_context=1024"] + [
            f"{key}={str(value).lower()}" for key, value in way.settings.items()
        ]
        trains(tmp_path / way.text.split()[0], overrides)

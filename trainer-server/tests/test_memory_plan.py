"""The memory plan (agentrl/learning/memory_plan.py) against what the learner really holds: random Llama models of three
sizes, built in code, each run through two real updates in a fresh process whose peak resident memory (the kernel's
own high-water mark of its address space, which no sampling can miss: cpu_memory.peak_resident_bytes) above what the
process held before the model is compared with the plan's weights, gradients, AdamW moments, activations and logits. And the
refusal: what it says, and train.memory_check's warn and off."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from agentrl.contract.config import load_config_dict
from agentrl.learning import memory_plan
from agentrl.learning.cpu_memory import peak_resident_bytes
from agentrl.learning.memory_advice import check_memory
from agentrl.learning.memory_plan import Device, MemoryPlan, MemoryPlanError, plan_memory
from agentrl.models.tiny import build_tiny_model_and_tokenizer

# How far the plan may be from the measured peak, either way (docs/memory.md).
TOLERANCE = 0.35
# (layers, hidden, vocabulary, micro-batch rows, positions a row, bf16 autocast, gradient checkpointing): a float32
# model at the math attention kernel's widths, one under bf16 autocast at the fused kernel's, a larger float32 one,
# and one under model.gradient_checkpointing (which the plan suggests when a run does not fit).
SIZES = [
    (2, 256, 4096, 4, 128, False, False),
    (4, 512, 8192, 4, 384, True, False),
    (6, 768, 16384, 4, 256, False, False),
    (4, 512, 8192, 4, 384, False, True),
]


def _config(
    layers: int,
    hidden: int,
    rows: int,
    width: int,
    autocast: bool,
    model_dir: Path,
    checkpointing: bool = False,
    **train,
):
    return load_config_dict(
        {
            "env": {"module": "agentrl.examples.lookup.env", "class_name": "LookupEnv"},
            "data": {"train": "tasks.jsonl"},
            "model": {"path": str(model_dir), "device": "cpu", "gradient_checkpointing": checkpointing},
            "rollout": {"engine": "hf", "group_size": 2, "max_context": width, "max_turns": 1, "max_new_tokens": width},
            "train": {"batch_size": 2 * rows, "micro_batch_size": rows, "bf16_autocast": autocast, **train},
        }
    )


def _measure(args: dict) -> dict:
    """In a fresh process: the peak resident memory two learner updates add to the process, and the plan's figure for
    the same (everything but the rollout and the process itself)."""
    import torch
    from agentrl.learning.learner import Learner
    from agentrl.rollout.episode import Episode
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    torch.set_num_threads(1)  # the sizes run side by side
    folder = Path(args["folder"])
    shape = LlamaConfig(
        vocab_size=args["vocab"],
        hidden_size=args["hidden"],
        intermediate_size=args["hidden"] * 3,
        num_hidden_layers=args["layers"],
        num_attention_heads=args["hidden"] // 64,
        num_key_value_heads=args["hidden"] // 128 or 1,
        head_dim=64,
        tie_word_embeddings=True,
    )
    shape.save_pretrained(folder)  # config.json only: what the plan reads
    checkpointing = args["checkpointing"]
    config = _config(
        args["layers"], args["hidden"], args["rows"], args["width"], args["autocast"], folder, checkpointing
    )
    plan = plan_memory(config, folder.parent, Device("cpu", "test", None))
    assert isinstance(plan, MemoryPlan)
    planned = plan.peak_bytes - plan.part("runtime") - plan.part("rollout")

    class Tokenizer:
        pad_token_id = 0
        eos_token_id = 0

    before = peak_resident_bytes()
    model = LlamaForCausalLM(shape).train()
    if checkpointing:  # as agentrl.models.loading.load_policy enables it
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    learner = Learner(model, Tokenizer(), config, torch.device("cpu"))
    prompt = 16
    episodes = []
    for row in range(config.train.batch_size):
        episode = Episode(f"t{row}", group=row // 2, sample=row % 2, prompt_messages=[], tool_schemas=[])
        ids = torch.randint(1, args["vocab"], (args["width"],)).tolist()
        episode.append_tokens(ids[:prompt], "prompt", -1)
        episode.append_tokens(ids[prompt:], "assistant", 0, [-1.0] * (args["width"] - prompt))
        episode.turn_end_positions = [args["width"] - 1]
        episode.outcome_reward = float(row % 2)  # each group of two: one success, one failure
        episodes.append(episode)
    for _ in range(2):
        assert learner.update(episodes).metrics["adv/zero_frac"] == 0.0  # every row carries a gradient
    measured = peak_resident_bytes() - before
    return {"measured": measured, "planned": planned}


def test_the_plan_is_within_its_tolerance_of_the_measured_peak(tmp_path):
    """The sizes run side by side, one process each (a peak is a process's own); they measure memory, not time."""
    keys = ("layers", "hidden", "vocab", "rows", "width", "autocast", "checkpointing")
    runs = []
    for index, size in enumerate(SIZES):
        args = {"folder": str(tmp_path / f"model{index}"), **dict(zip(keys, size))}
        command = [sys.executable, __file__, json.dumps(args)]
        runs.append((args, subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    far = []
    for args, process in runs:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err[-3000:]
        figures = json.loads(out.strip().splitlines()[-1])
        ratio = figures["planned"] / figures["measured"]
        print(f"{args}: measured {figures['measured'] / 2**20:.0f} MiB, planned {figures['planned'] / 2**20:.0f} MiB")
        if not 1 - TOLERANCE <= ratio <= 1 + TOLERANCE:
            far.append((args, figures))
    assert far == []


def test_the_built_in_tiny_model_has_the_parameters_the_plan_counts(tmp_path):
    config = load_config_dict(
        {
            "env": {"module": "agentrl.examples.lookup.env", "class_name": "LookupEnv"},
            "data": {"train": "tasks.jsonl"},
            "model": {"tiny_layers": 3, "tiny_hidden": 96},
        }
    )
    plan = plan_memory(config, tmp_path, Device("cpu", "test", None))
    model, _ = build_tiny_model_and_tokenizer(layers=3, hidden=96)
    assert isinstance(plan, MemoryPlan)
    assert plan.parameters == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("engine", ["hf", "auto", "vllm"])
@pytest.mark.parametrize("head_dim", [16, 32])  # vLLM's CPU kernels refuse 16
def test_the_plan_counts_the_engine_the_factory_makes(tmp_path, engine, head_dim):
    """One rule for which engine samples a run (rollout/engine_choice.py): the plan, made before the model loads,
    counts the engine the factory then chooses with it loaded (rollout.engine vllm where vLLM cannot serve the model
    is planned as vLLM and refused by the factory)."""
    import torch
    from agentrl.rollout.factory import _uses_vllm

    config = load_config_dict(
        {
            "env": {"module": "agentrl.examples.lookup.env", "class_name": "LookupEnv"},
            "data": {"train": "tasks.jsonl"},
            "model": {"tiny_head_dim": head_dim, "tiny_hidden": 64},
            "rollout": {"engine": engine},
        }
    )
    plan = plan_memory(config, tmp_path, Device("cpu", "test", None))
    assert isinstance(plan, MemoryPlan)
    model, _ = build_tiny_model_and_tokenizer(head_dim=head_dim)
    try:
        chosen = "vllm" if _uses_vllm(model, config.rollout, torch.device("cpu")) else "hf"
    except ValueError as refused:
        assert engine == "vllm" and "head sizes" in str(refused)
        chosen = "vllm"
    assert plan.engine == chosen
    [rollout] = [part for part in plan.parts if part.name == "rollout"]
    assert rollout.detail.startswith("vLLM's processes" if chosen == "vllm" else "the hf engine's KV cache")


def test_lora_trains_the_adapters_peft_adds(tmp_path):
    from peft import LoraConfig, get_peft_model

    config = load_config_dict(
        {
            "env": {"module": "agentrl.examples.lookup.env", "class_name": "LookupEnv"},
            "data": {"train": "tasks.jsonl"},
            "model": {"lora": {"enabled": True, "r": 4}},
        }
    )
    plan = plan_memory(config, tmp_path, Device("cpu", "test", None))
    model, _ = build_tiny_model_and_tokenizer()
    adapted = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, task_type="CAUSAL_LM"))
    assert isinstance(plan, MemoryPlan)
    assert plan.trainable == sum(p.numel() for p in adapted.parameters() if p.requires_grad)


def test_fsdp_shards_the_state_and_on_cuda_keeps_float32_masters_and_gathers_a_pass_s_weights(tmp_path):
    """cluster.sharding: fsdp (agentrl/cluster/sharded_learner.py): weights, gradients and moments split over the
    learner workers; on CUDA the shards that train are float32 whatever model.dtype is; a pass holds the embeddings and
    two layers whole."""
    gpu = Device("cuda", "an 80 GiB GPU", 80 << 30)
    whole = _large_run("refuse")
    tree = whole.model_dump(mode="json")
    tree["cluster"].update(backend="ray", learner_workers=4, sharding="fsdp")
    sharded = load_config_dict(tree)
    one, four = plan_memory(whole, tmp_path, gpu), plan_memory(sharded, tmp_path, gpu)
    assert isinstance(one, MemoryPlan) and isinstance(four, MemoryPlan)
    parameters = one.parameters
    assert one.part("optimizer") == 2 * parameters * 2  # bfloat16 moments of a bfloat16 model
    assert four.part("optimizer") == 2 * parameters * 4 // 4  # float32 moments of float32 masters, a quarter each
    assert four.part("weights") == parameters * 4 // 4
    shape = four.shape
    embedding = shape.vocab * shape.hidden * (1 if shape.tied else 2)
    assert four.part("gathered_weights") == (embedding + 2 * ((parameters - embedding) // shape.layers)) * 2
    assert one.part("gathered_weights") == 0


def _large_run(check: str, max_turns: int = 8):
    """SmolLM2 with 16 rows a micro-batch: 8 turns of 128 new tokens and 128 of tool output make 2,048 positions a
    row even without a prompt, too many for 24 GiB; 2 turns make 512, which fit, though 2,048 (max_context) do not."""
    return load_config_dict(
        {
            "env": {"module": "agentrl.examples.lookup.env", "class_name": "LookupEnv"},
            "data": {"train": "tasks.jsonl"},
            "model": {"path": "smollm2"},
            "rollout": {
                "engine": "hf",
                "max_context": 2048,
                "max_turns": max_turns,
                "max_new_tokens": 128,
                "tool_output_tokens": 128,
            },
            "train": {"batch_size": 16, "micro_batch_size": 16, "memory_check": check},
        }
    )


SMALL_MACHINE = Device("cpu", "a small machine (24.0 GiB)", 24 << 30)


def test_a_run_that_cannot_fit_is_refused_naming_its_parts_and_what_to_change(tmp_path, monkeypatch):
    monkeypatch.setattr(memory_plan, "planned_device", lambda config: SMALL_MACHINE)
    with pytest.raises(MemoryPlanError) as refused:
        check_memory(_large_run("refuse"), tmp_path)
    message = str(refused.value)
    assert "even for episodes without a prompt" in message
    assert "is more than a small machine (24.0 GiB)" in message
    for part in ("weights", "gradients", "optimizer", "activations", "logits", "rollout"):
        assert f"{part} " in message
    assert "train.micro_batch_size 16 -> " in message
    assert "model.gradient_checkpointing: true" in message
    assert "cluster.sharding" not in message  # shards on one machine share its memory
    assert "train.memory_check: warn" in message
    # A way it names does fit.
    fitted = _large_run("refuse").model_copy(deep=True)
    fitted.model.gradient_checkpointing = True
    assert check_memory(fitted, tmp_path) is None


def test_a_run_that_fits_but_not_at_its_longest_episodes_starts_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(memory_plan, "planned_device", lambda config: SMALL_MACHINE)
    warning = check_memory(_large_run("refuse", max_turns=2), tmp_path) or ""
    assert "at its shortest full episodes but" in warning
    assert "at its longest (every row at rollout.max_context, 2,048 positions), more than a small machine" in warning
    assert "it may run out of memory at its longest. To be sure it fits, change one of: " in warning
    assert "weights " not in warning  # the parts are the hover's and the refusal's: a warning stays short


def test_memory_check_warn_starts_with_the_message_and_off_checks_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(memory_plan, "planned_device", lambda config: SMALL_MACHINE)
    assert "even for episodes without a prompt" in (check_memory(_large_run("warn"), tmp_path) or "")
    assert check_memory(_large_run("off"), tmp_path) is None


def test_agentrl_train_refuses_before_making_a_run_folder(tmp_path, monkeypatch, capfd):
    from agentrl.cli.main import main

    monkeypatch.setattr(memory_plan, "planned_device", lambda config: SMALL_MACHINE)
    (tmp_path / "tasks.jsonl").write_text('{"id": "a", "prompt": "x"}\n', encoding="utf-8")
    config = tmp_path / "big.agentrl.yaml"
    config.write_text(json.dumps(_large_run("refuse").model_dump(mode="json")), encoding="utf-8")
    assert main(["train", str(config), "--runs-dir", str(tmp_path / "runs"), "--quiet"]) == 2
    assert "planned peak memory" in capfd.readouterr().err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_the_server_answers_config_memory_plan_as_the_protocol_says(tmp_path, monkeypatch):
    import asyncio

    from agentrl.server.handlers_env import config_memory_plan
    from agentrl.server.protocol import validator_for
    from agentrl.server.state import ServerOptions, ServerState

    monkeypatch.setattr(memory_plan, "planned_device", lambda config: SMALL_MACHINE)
    state = ServerState(ServerOptions("127.0.0.1", 0, tmp_path / "runs", tmp_path / "bundles", None))
    config = _large_run("refuse").model_dump(mode="json")
    answer = asyncio.run(config_memory_plan(state, None, {"config": config, "configDir": str(tmp_path)}))
    validator_for("config/memoryPlan.result").validate(answer)
    plan = answer["plan"]
    assert plan["fits"] is False and plan["waysToFit"] and plan["shortestPeakBytes"] > 24 << 30
    for way in plan["waysToFit"]:  # what the editor applies (the settings) is what the user reads (the text)
        assert way["text"].startswith(next(iter(way["settings"]))) and way["peakBytes"] <= SMALL_MACHINE.memory_bytes
    config["model"]["path"] = "missing-folder"
    answer = asyncio.run(config_memory_plan(state, None, {"config": config, "configDir": str(tmp_path)}))
    assert "no config.json" in answer["unavailable"]


def test_a_hostile_model_config_json_gets_a_clear_answer(tmp_path, monkeypatch):
    """A model's config.json can come from anyone who uploads an env bundle: huge or nested values made
    `config/memoryPlan` and `run/start` answer internal errors (issue #44, item 7). Each is a plan that says the
    config.json is invalid and why, and a run/start refused as CONFIG_INVALID."""
    import asyncio
    import os

    from agentrl.models.shape import MAX_SIZE
    from agentrl.server.handlers_env import config_memory_plan
    from agentrl.server.handlers_runs import run_start
    from agentrl.server.protocol import CONFIG_INVALID, RpcError, validator_for
    from agentrl.server.runs import RunManager
    from agentrl.server.state import ServerOptions, ServerState

    async def never_starts(*args):
        raise AssertionError("a run with a hostile config.json was started")

    monkeypatch.setattr(RunManager, "_admit", never_starts)
    state = ServerState(ServerOptions("127.0.0.1", 0, tmp_path / "runs", tmp_path / "bundles", None))
    shape = {"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
    model = tmp_path / "model"
    model.mkdir()
    config = _config(2, 64, 1, 32, False, model).model_dump(mode="json")
    params = {"config": config, "configDir": str(tmp_path)}
    hostile = {
        "hidden_size is 1e+308; it must be a whole number from 1 to 16,777,216": json.dumps(
            shape | {"hidden_size": 1e308}
        ),
        "num_hidden_layers is 'many'; it must be a whole number": json.dumps(shape | {"num_hidden_layers": "many"}),
        "it nests too deep to read": json.dumps(shape)[:-1] + ', "x": ' + "[" * 5000 + "]" * 5000 + "}",
        "it is larger than 4 MiB": json.dumps(shape | {"padding": "x" * (50 << 20)}),
        "it is not a regular file": None,  # a FIFO: refused without waiting for a writer
    }
    for why, text in hostile.items():
        (model / "config.json").unlink(missing_ok=True)
        if text is None:
            os.mkfifo(model / "config.json")
        else:
            (model / "config.json").write_text(text)
        answer = asyncio.run(config_memory_plan(state, None, params))
        validator_for("config/memoryPlan.result").validate(answer)
        assert answer["unavailable"].startswith(f"model.path {str(model)!r}: its config.json is invalid: {why}")
        with pytest.raises(RpcError) as refused:
            asyncio.run(run_start(state, None, params))
        assert refused.value.code == CONFIG_INVALID and why in refused.value.message

    # At the bounds, the plan's arithmetic stays finite: a plan (that fits nowhere), not an error.
    (model / "config.json").unlink()
    sizes = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
    (model / "config.json").write_text(json.dumps(dict.fromkeys(sizes, MAX_SIZE)))
    monkeypatch.setattr(memory_plan, "planned_device", lambda config: SMALL_MACHINE)
    answer = asyncio.run(config_memory_plan(state, None, params))
    validator_for("config/memoryPlan.result").validate(answer)
    assert answer["plan"]["fits"] is False and answer["plan"]["peakBytes"] > 1 << 70


if __name__ == "__main__":
    print(json.dumps(_measure(json.loads(sys.argv[1]))))


def test_memory_check_off_written_bare_in_yaml_is_off_not_a_boolean():
    """YAML 1.1 (PyYAML's) reads a bare `off` as false, so `memory_check: off`, as the docs write it, was refused
    ("Input should be 'refuse', 'warn' or 'off' (got False)"); the configuration-matrix test found it."""
    from agentrl.contract.config import load_config
    from agentrl.contract.safe_yaml import load_yaml
    from conftest import EXAMPLE_CONFIG

    assert load_yaml("memory_check: off") == {"memory_check": False}
    assert load_config(EXAMPLE_CONFIG, ["train.memory_check=off"]).train.memory_check == "off"

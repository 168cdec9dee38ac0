"""The sharded learner (agentrl/cluster/sharded_learner.py, `cluster.sharding: fsdp`) in 2 processes joined by
torch.distributed over gloo, as 2 learner workers are (FSDP2 runs on CPU over gloo in torch 2.13): each holds half of
every weight, yet after a step, a checkpoint of it (whole weights and the optimizer state gathered), a resume into
fresh sharded workers and a second step, the weights are those one process trains, within PARAMETER_TOLERANCE.

The step is planned so that the workers hold different numbers of micro-batches (3 rows carry a gradient, one a
micro-batch: 2 on one worker, 1 on the other): a worker with fewer must run passes that keep it in step, or the
collectives of the next layer would pair up wrong and hang; the test's timeout turns a hang into a failure."""

import copy
import functools
import gc
import multiprocessing
import os
from pathlib import Path

import pytest
import torch
from agentrl.cluster.sharded_learner import Sharded, decoder_layers
from agentrl.contract.config import load_config_dict
from agentrl.learning import forward as forward_module
from agentrl.learning import logprobs as logprobs_module
from agentrl.learning.learner import Learner
from agentrl.models.loading import load_policy
from agentrl.rollout.hf_engine import HfRolloutEngine
from conftest import free_port
from test_learner import BASE, KeepGoingEnv

WORKERS = 2
# Per tensor, how far the sharded run's weights may be from one process's, as a fraction of how far one process
# moved them: the workers add up each gradient in another order (the same bound as tests/test_cluster.py's
# data-parallel runs, where AdamW's division by each entry's own gradient size is explained).
PARAMETER_TOLERANCE = 1e-3
TIMEOUT_S = 240

ALGORITHMS = {
    "grpo": {},
    # A critic (its value head whole on every worker, its gradient all-reduced), a frozen reference model (sharded
    # too) and scoring passes before the update.
    "ppo-kl": {"algorithm": {"name": "ppo", "kl": {"coef": 0.1}}},
    # Only the adapters train; the base weights are sharded and frozen, and the adapter-disabled model is the reference.
    "grpo-lora": {"model": {"lora": {"enabled": True}}, "algorithm": {"kl": {"coef": 0.1}}},
    # The output head's chunked projection re-projecting every chunk in its written-out backward (what a large
    # vocabulary does), with the head's weight (tied to the embeddings) gathered by the root.
    "grpo-reprojected": {"projection": {"chunk_rows": 3, "kept_logits_bytes": 0}},
}


def project_as(name: str) -> None:
    """The learner's vocabulary projection as the variant `name` sets it (in this process)."""
    projection = ALGORITHMS[name].get("projection")
    if projection:
        forward_module.target_logprobs = functools.partial(logprobs_module.target_logprobs, **projection)


def make_config(name: str, sharding: str = "none"):
    extra = ALGORITHMS[name]
    return load_config_dict(
        {
            **BASE,
            "model": {"path": "tiny", "tiny_layers": 2, "tiny_hidden": 32, **extra.get("model", {})},
            "rollout": {**BASE["rollout"], "group_size": 3},
            "algorithm": extra.get("algorithm", {}),
            "train": {"batch_size": 6, "micro_batch_size": 1, "lr": 0.01},
            "cluster": {"backend": "ray", "learner_workers": WORKERS, "sharding": sharding}
            if sharding != "none"
            else {},
        }
    )


def step_episodes(name: str) -> list:
    """One step's episodes: group 0's rewards give its 3 rows a gradient, group 1's (all equal) none."""
    cfg = make_config(name)
    model, tokenizer, _ = load_policy(cfg.model, cfg.seed)
    engine = HfRolloutEngine(model, tokenizer, KeepGoingEnv, cfg.rollout, torch.device("cpu"))
    episodes = engine.run([{"key": "1"}, {"key": "2"}], group_size=3, seed=3)
    for ep in episodes:
        ep.outcome_reward = float(ep.sample == 2) if ep.group == 0 else 1.0
    return episodes


def sharded_worker(rank: int, port: int, name: str, initial: dict, episodes: list, out: str) -> None:
    """One learner worker, in a process of its own joined to the other by gloo."""
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORKERS)
    project_as(name)
    try:
        step_checkpoint_resume_step(rank, name, initial, episodes, out)
        # Leaving cleanly: both workers done with every collective, then the learners (and the work FSDP keeps on
        # the group) freed while the interpreter is whole. A gloo group torn down at the interpreter's exit with
        # work still on it aborts the process ("terminate called without an active exception"), now and then.
        dist.barrier()
        gc.collect()
    finally:
        dist.destroy_process_group()


def step_checkpoint_resume_step(rank: int, name: str, initial: dict, episodes: list, out: str) -> None:
    """The run's initial weights loaded (as the driver hands them out), a step, the checkpoint gathered, fresh
    workers resumed from it, a second step; worker 0 writes the weights after each step to `out`."""
    import torch.distributed as dist

    cfg = make_config(name, "fsdp")

    def fresh_learner() -> tuple[Learner, Sharded]:
        model, tokenizer, device = load_policy(cfg.model, cfg.seed)
        sharded = Sharded(rank, WORKERS, device)
        return Learner(model, tokenizer, cfg, device, sharded), sharded

    first, sharding = fresh_learner()
    sharding.load_policy(first.model, initial)
    local = first.model.get_decoder().layers[0].self_attn.q_proj.weight.to_local()
    assert local.shape[0] * WORKERS == first.model.config.hidden_size  # half of the weight on each worker
    first.update(copy.deepcopy(episodes))
    policy, optimizer = sharding.policy_state(first.model), first.state_dict()  # every worker takes part; 0 gets them
    checkpoint = [policy, optimizer]
    dist.broadcast_object_list(checkpoint)  # as the driver hands the checkpoint to every worker on a resume
    resumed, sharding = fresh_learner()
    sharding.load_policy(resumed.model, checkpoint[0])
    resumed.load_state_dict(checkpoint[1])
    resumed.update(copy.deepcopy(episodes))
    final = sharding.policy_state(resumed.model)
    if rank == 0:
        torch.save({"first": policy, "final": final}, out)


def run_sharded(name: str, initial: dict, episodes: list, out: Path) -> dict:
    context = multiprocessing.get_context("spawn")
    port = free_port()
    workers = [
        context.Process(target=sharded_worker, args=(rank, port, name, initial, episodes, str(out)))
        for rank in range(WORKERS)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(TIMEOUT_S)
    hung = [worker for worker in workers if worker.is_alive()]
    for worker in hung:
        worker.kill()
    assert not hung, f"the sharded workers did not finish in {TIMEOUT_S} s (collectives out of step?)"
    assert [worker.exitcode for worker in workers] == [0] * WORKERS
    return torch.load(out)


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_two_sharded_workers_checkpointed_and_resumed_train_as_one_process_does(tmp_path, monkeypatch, name):
    episodes = step_episodes(name)
    cfg = make_config(name)
    model, tokenizer, device = load_policy(cfg.model, cfg.seed)
    initial = {key: value.clone() for key, value in model.state_dict().items()}
    sharded = run_sharded(name, initial, episodes, tmp_path / "sharded.pt")
    monkeypatch.setattr(forward_module, "target_logprobs", forward_module.target_logprobs)  # restored after the test
    project_as(name)

    one = Learner(model, tokenizer, cfg, device)
    one.update(copy.deepcopy(episodes))
    after_first = {key: value.clone() for key, value in model.state_dict().items()}
    one.update(copy.deepcopy(episodes))
    expected = model.state_dict()

    assert sharded["first"].keys() == expected.keys()  # whole weights, under the model's own names
    for got, reference in ((sharded["first"], after_first), (sharded["final"], expected)):
        moved = {key: float((reference[key] - initial[key]).norm()) for key in reference}
        trained = [key for key in reference if moved[key] > 0]
        assert trained, "the step trained nothing"
        if name == "grpo-lora":
            assert all("lora_" in key for key in trained)  # the base weights stay frozen under sharding
        worst = max(float((got[key] - reference[key]).norm()) / moved[key] for key in trained)
        assert worst <= PARAMETER_TOLERANCE, f"a tensor differs by {worst} of how far one process moved it"
        assert all(torch.equal(got[key], reference[key]) for key in reference if moved[key] == 0)


def test_the_repeated_blocks_are_found_in_a_lora_model_too():
    for lora in (False, True):
        cfg = make_config("grpo-lora" if lora else "grpo")
        model = load_policy(cfg.model, cfg.seed)[0]
        assert [type(layer).__name__ for layer in decoder_layers(model)] == ["LlamaDecoderLayer"] * 2

"""`cluster.weight_sync: broadcast` (agentrl/cluster/weight_broadcast.py): the group's members in threads of this
process (gloo), then one run on a local 2-CPU Ray cluster whose rollout workers are killed after a broadcast."""

import contextlib
import os
import threading
import time

import ray
import torch
from agentrl.cluster import weight_broadcast
from agentrl.cluster.rollout_workers import ClusterRolloutEngine
from agentrl.cluster.weight_broadcast import BroadcastGroup, WeightBroadcast, buckets, layout_of, synced_tensors
from agentrl.run.runstore import latest_status, read_events
from agentrl.run.trainer import train
from conftest import EXAMPLE_CONFIG, free_port
from test_cluster import ON_RAY, TWO_STEPS, assert_same_episodes, final_weights
from test_cluster import local_ray as local_ray  # noqa: F401 - the module's fixture
from test_cluster import one_process_run as one_process_run  # noqa: F401 - the module's fixture
from test_train import example
from transformers import Qwen2Config, Qwen2ForCausalLM


def free_address() -> str:
    return f"tcp://127.0.0.1:{free_port()}"


def members_in_threads(count: int, work) -> list:
    """`work(rank)` for ranks 0..count-1, each in its own thread; what each returned or raised."""
    results: list = [None] * count

    def run(rank: int) -> None:
        try:
            results[rank] = work(rank)
        except Exception as err:  # noqa: BLE001 - handed to the test
            results[rank] = err

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def mixed_weights(seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {
        "embed": torch.randn(50, 8, generator=generator).to(torch.bfloat16),
        "norm": torch.randn(8, generator=generator),
        "layer.0": torch.randn(8, 8, generator=generator).to(torch.bfloat16),
        "layer.1": torch.randn(8, 8, generator=generator),
        "head": torch.randn(3, generator=generator).to(torch.bfloat16),
    }


def test_buckets_hold_one_dtype_each_and_no_more_bytes_than_asked_unless_one_tensor_is_larger():
    layout = layout_of(mixed_weights(0))
    found = buckets(layout, bucket_bytes=300)
    assert sorted(i for bucket in found for i in bucket) == list(range(len(layout)))
    for bucket in found:
        assert len({layout[i][2] for i in bucket}) == 1
        sizes = [torch.Size(layout[i][1]).numel() * layout[i][2].itemsize for i in bucket]
        assert sum(sizes) <= 300 or len(bucket) == 1
    # bf16: embed (800 B) alone, then layer.0 and head (134 B); fp32: norm and layer.1 (288 B)
    assert [[layout[i][0] for i in bucket] for bucket in found] == [["embed"], ["layer.0", "head"], ["norm", "layer.1"]]


def test_the_broadcast_delivers_the_exact_weights_with_their_version_in_the_receivers_dtypes():
    sent = mixed_weights(1)
    sent["norm"] = sent["norm"].double()  # the learner's master copy in another dtype: sent as the receivers hold it
    receivers = [mixed_weights(seed) for seed in (2, 3)]
    layout = layout_of(receivers[0])
    address = free_address()

    def member(rank: int) -> None:
        group = BroadcastGroup(address, rank, 3, torch.device("cpu"), layout, bucket_bytes=300)
        if rank == 0:
            group.send(sent, version=7)
        else:
            group.receive(receivers[rank - 1], version=7)

    assert members_in_threads(3, member) == [None, None, None]
    for received in receivers:
        assert layout_of(received) == layout  # received in place
        for name, tensor in received.items():
            assert torch.equal(tensor, sent[name].to(tensor.dtype)), name


def test_a_receiver_expecting_another_version_refuses_the_broadcast_after_taking_it():
    weights = mixed_weights(1)
    layout = layout_of(weights)
    address = free_address()

    def member(rank: int) -> None:
        group = BroadcastGroup(address, rank, 2, torch.device("cpu"), layout)
        if rank == 0:
            group.send(weights, version=4)
        else:
            group.receive(mixed_weights(2), version=3)

    sender, receiver = members_in_threads(2, member)
    assert sender is None  # the receiver took the whole broadcast before refusing it: nobody is left waiting
    assert isinstance(receiver, RuntimeError)
    assert "got version 4, expected version 3" in str(receiver)


def test_under_lora_only_the_adapter_travels_and_a_tied_tensor_travels_once():
    from peft import LoraConfig, get_peft_model

    config = Qwen2Config(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
    )
    config.vocab_size = 64
    model = Qwen2ForCausalLM(config)
    # The output head is the embeddings (tied): it travels once.
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert list(synced_tensors(model)) == [name for name in model.state_dict() if name != "lm_head.weight"]
    adapted = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    names = list(synced_tensors(adapted))
    assert names and all(".lora_A." in name or ".lora_B." in name for name in names)
    assert len(names) == 2 * 2 * 2  # 2 layers x (q, v) x (A, B)


class _Call:
    def __init__(self, actor: "_Actor", method: str) -> None:
        self.actor, self.method = actor, method

    def remote(self, *args):
        self.actor.calls.append(self.method)
        return self.actor.up


class _Actor:
    """A rollout or learner actor as WeightBroadcast calls it: answers (`up`) or is still restarting."""

    def __init__(self, up: bool) -> None:
        self.up, self.calls = up, []

    def __getattr__(self, method: str) -> _Call:
        return _Call(self, method)


class _Ray:
    @staticmethod
    def get(refs, timeout=None):
        if not all(refs if isinstance(refs, list) else [refs]):
            raise ray.exceptions.ActorUnavailableError("the actor is restarting", None)
        return refs


def test_a_rollout_worker_that_does_not_answer_leaves_the_version_to_the_object_store(monkeypatch):
    """A group's members must all join, or the others wait for the missing one at the rendezvous: while a restarted
    rollout worker is still starting, no group is built and no broadcast starts; `send` says so, and the version
    goes through the object store (ClusterRolloutEngine.weights_updated), to every worker."""
    monkeypatch.setattr(weight_broadcast, "REJOIN_WAIT_S", 0.0)
    learner, rollout = _Actor(up=True), [_Actor(up=True), _Actor(up=False)]
    sync = WeightBroadcast(_Ray(), learner, rollout)
    assert sync.send(2) is False
    assert learner.calls == [] and all("join_weight_broadcast" not in actor.calls for actor in rollout)
    assert not sync.holds(0, 2) and not sync.holds(1, 2)


def test_a_rollout_worker_restarted_after_a_broadcast_catches_up_and_the_run_samples_as_one_process_does(
    tmp_path,
    monkeypatch,
    local_ray,  # noqa: F811 - the fixture imported above
    one_process_run,  # noqa: F811
):
    """Rollout worker 0 is killed once it has received step 1's weights by broadcast, and is back before step 2:
    its new process holds none of the run's weights and is in no group. Its step-2 share finds it without the
    version and is sent again with the object store's copy; the group is built again, with it, for step 2's
    broadcast; every episode is the one a single process samples, and the run's weights are one process's."""
    killed: list[int] = []
    broadcast_weights = ClusterRolloutEngine.weights_updated

    def kill_worker_0_after_the_first_broadcast(engine: ClusterRolloutEngine) -> None:
        broadcast_weights(engine)
        if engine.broadcast is None or killed:
            return
        engine.broadcast.settle()
        assert engine.broadcast.holds(0, engine._weights.version)
        pid = ray.get(engine.actors[0].__ray_call__.remote(lambda worker: os.getpid()))
        ray.kill(engine.actors[0], no_restart=False)
        killed.append(engine._weights.version)
        while True:  # until Ray has restarted it: a call the old process answers before it dies does not count
            with contextlib.suppress(ray.exceptions.RayActorError):
                if ray.get(engine.actors[0].__ray_call__.remote(lambda worker: os.getpid())) != pid:
                    return
            time.sleep(0.1)

    monkeypatch.setattr(ClusterRolloutEngine, "weights_updated", kill_worker_0_after_the_first_broadcast)
    config = example(*TWO_STEPS, *ON_RAY, "cluster.learner_workers=1", "cluster.weight_sync=broadcast")
    run_dir = train(config, runs_dir=tmp_path / "runs", config_base_dir=EXAMPLE_CONFIG.parent)
    assert len(killed) == 1
    events = read_events(run_dir)
    assert latest_status(events)["status"] == "completed"
    assert not [e for e in events if e["type"] == "worker_restarted"]  # its share was not lost: sent again to it
    assert_same_episodes(run_dir, one_process_run)  # step 2 sampled with step 1's exact weights on both workers
    expected, got = final_weights(one_process_run), final_weights(run_dir)
    assert expected.keys() == got.keys()
    assert all(torch.allclose(expected[name], got[name], atol=1e-4) for name in expected)

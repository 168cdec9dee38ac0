"""Runs on a Ray cluster (agentrl/cluster/): a local cluster of 2 CPUs, started once for the module; the rollout and
learner actors reserve half a CPU each, so 2 + 2 fit. The actors import agentrl from the driver's PYTHONPATH.
Every actor costs seconds to start (torch, the model), so each test starts only the workers it needs, and the
single-process run the Ray runs are compared with is trained once for the module."""

import re
import sys
import threading
import time
from pathlib import Path

import pytest
import ray
import torch
from agentrl.cluster import rollout_workers
from agentrl.cluster.worker_states import WorkerStates
from agentrl.contract.config import ConfigError
from agentrl.contract.schemas import validator_for
from agentrl.models.loading import load_policy
from agentrl.run.runstore import latest_status, read_events
from agentrl.run.trainer import train
from agentrl.server.runs import on_ray_cluster
from conftest import EXAMPLE_CONFIG
from safetensors.torch import load_file
from test_train import example, trajectories

# After 2 steps at lr 0.01, how far the weights trained by 2 rollout + 2 learner workers may be from one process's,
# per tensor, as a fraction of how far one process moved them (measured: 7e-5 at worst, 3e-5 over all weights). The
# same tokens are sampled, but a batch of 8 episodes computes logprobs that differ from a batch of 16's in the last
# bits (up to 1e-6), and the workers' gradients are added in another order; AdamW divides each gradient by its own
# running size, so an entry whose gradient is near 0 moves by lr-sized steps decided by those last bits (measured:
# one entry 0.00824 against 0.00814), which is why the bound is on each tensor's movement, not on each entry.
PARAMETER_TOLERANCE = 1e-3
LOGPROB_TOLERANCE = 1e-5

TWO_STEPS = ("train.steps=2", "train.checkpoint_every=2", "train.micro_batch_size=4")
ON_RAY = (
    "cluster.backend=ray",
    "cluster.rollout_workers=2",
    "cluster.learner_workers=2",
    "cluster.rollout_resources.cpus=0.5",
    "cluster.learner_resources.cpus=0.5",
)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def one_process_run(tmp_path_factory) -> Path:
    """The tiny example trained for 2 steps in one process: what every Ray run here must record."""
    runs_dir = tmp_path_factory.mktemp("one")
    return train(example(*TWO_STEPS), runs_dir=runs_dir, config_base_dir=EXAMPLE_CONFIG.parent)


def worker_reports(run_dir: Path) -> list[list[dict]]:
    """The workers each `workers` event of the run listed, in order, each event checked against the schema."""
    events = [e for e in read_events(run_dir) if e["type"] == "workers"]
    for event in events:
        validator_for("rpc.schema.json", "runEvent").validate(event)
    return [e["data"]["workers"] for e in events]


def states_of(reports: list[list[dict]], role: str, index: int) -> list[str]:
    """The states one worker went through, as the reports that list it said."""
    states: list[str] = []
    for workers in reports:
        for worker in workers:
            if (worker["role"], worker["index"]) == (role, index) and states[-1:] != [worker["state"]]:
                states.append(worker["state"])
    return states


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    [checkpoint] = sorted((run_dir / "checkpoints").glob("step-*"))
    [weights] = (checkpoint / "policy").glob("*.safetensors")
    return load_file(weights)


def worst_weight_difference(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> float:
    """The largest difference of a tensor between two runs of the tiny example, as a fraction of how far the
    reference moved it from the initial weights (it must have moved every tensor)."""
    assert expected.keys() == got.keys()
    initial = load_policy(example().model, 0)[0].state_dict()
    moved = {name: float((expected[name] - initial[name]).norm()) for name in expected}
    assert min(moved.values()) > 0  # the two steps did train every tensor
    return max(float((expected[name] - got[name]).norm()) / moved[name] for name in expected)


# What a process computed of each token rather than sampled: equal to float rounding, not bit for bit.
COMPUTED = ("logprob", "trainer_logprob", "entropy", "is_weight")


def episodes_of(run_dir: Path) -> list[tuple]:
    """What makes each recorded episode itself: its place in its step and its tokens, their roles and masks."""
    return [
        (r["step"], r["group"], r["sample"], r["task_id"], {k: v for k, v in r["tokens"].items() if k not in COMPUTED})
        for r in trajectories(run_dir)
    ]


def assert_same_episodes(run_dir: Path, reference: Path) -> None:
    assert episodes_of(run_dir) == episodes_of(reference)
    for got, expected in zip(trajectories(run_dir), trajectories(reference), strict=True):
        for name in COMPUTED:
            pairs = zip(got["tokens"].get(name, []), expected["tokens"].get(name, []), strict=True)
            assert all(a == b or abs(a - b) <= LOGPROB_TOLERANCE for a, b in pairs), name


def test_two_rollout_and_two_learner_workers_train_as_one_process_does(tmp_path, local_ray, one_process_run):
    one = one_process_run
    cluster = train(example(*TWO_STEPS, *ON_RAY), runs_dir=tmp_path / "ray", config_base_dir=EXAMPLE_CONFIG.parent)
    assert latest_status(read_events(cluster))["status"] == "completed"
    assert_same_episodes(cluster, one)
    logged = [e["data"]["message"] for e in read_events(cluster) if e["type"] == "log"]
    assert "rollout engine: ray: 2 rollout workers, hf" in logged
    worst = worst_weight_difference(final_weights(cluster), final_weights(one))
    assert worst <= PARAMETER_TOLERANCE, f"a tensor's weights differ by {worst} of how far one process moved them"
    reports = worker_reports(cluster)
    for role, index in (("rollout", 0), ("rollout", 1), ("learner", 0), ("learner", 1)):
        assert states_of(reports, role, index) == ["starting", "ready"], (role, index)
    assert [(w["role"], w["index"], w["state"], w["restarts"], w["node"]) for w in reports[-1]] == [
        (role, index, "ready", 0, ray.util.get_node_ip_address())  # the test's cluster is this one node
        for role in ("rollout", "learner")
        for index in (0, 1)
    ]
    assert worker_reports(one) == []  # a run in one process has no workers to report


def test_gigpo_on_two_learner_workers_trains_as_one_process_does(tmp_path, local_ray):
    """Every learner worker collates the whole step, so GiGPO's anchor states (here the observations the model read)
    and its group statistics are those of the whole batch, whichever worker trains which rows."""
    gigpo = (*TWO_STEPS, "algorithm.name=gigpo", "algorithm.gamma=0.95")
    one = train(example(*gigpo), runs_dir=tmp_path / "one", config_base_dir=EXAMPLE_CONFIG.parent)
    cluster = train(example(*gigpo, *ON_RAY), runs_dir=tmp_path / "ray", config_base_dir=EXAMPLE_CONFIG.parent)
    assert latest_status(read_events(cluster))["status"] == "completed"
    assert_same_episodes(cluster, one)
    for got, expected in zip(trajectories(cluster), trajectories(one), strict=True):
        assert [t["state_key"] for t in got["turns"]] == [t["state_key"] for t in expected["turns"]]
        pairs = zip(got["tokens"]["advantage"], expected["tokens"]["advantage"], strict=True)
        assert all(a == b or abs(a - b) <= 1e-5 for a, b in pairs)
    expected, got = final_weights(one), final_weights(cluster)
    initial = load_policy(example().model, 0)[0].state_dict()
    worst = max(
        float((expected[name] - got[name]).norm()) / max(float((expected[name] - initial[name]).norm()), 1e-12)
        for name in expected
    )
    assert worst <= PARAMETER_TOLERANCE


SLOW_ENV = """
import time
from pathlib import Path

from agentrl.examples.lookup.env import LookupEnv

# Written where the test looks: the worker runs a copy of this file (agentrl/cluster/code_shipping.py), not this one.
MARKER = Path("MARKER_PATH")


class SlowLookupEnv(LookupEnv):
    def reset(self, task):
        MARKER.touch()  # the test kills a rollout worker once one is at work
        time.sleep(0.05)  # a share of 8 episodes takes 0.4 s: long enough to die in
        return super().reset(task)
"""


def slow_example(folder: Path, *overrides: str):
    folder.mkdir()
    (folder / "env.py").write_text(SLOW_ENV.replace("MARKER_PATH", str(folder / "rollouts-started")))
    config = example(*TWO_STEPS, *overrides)
    config.env.module, config.env.class_name = str(folder / "env.py"), "SlowLookupEnv"
    return config


def test_a_rollout_worker_killed_mid_step_is_restarted_and_its_episodes_run_once(tmp_path, local_ray, one_process_run):
    config = slow_example(tmp_path / "ray", *ON_RAY, "cluster.learner_workers=1")  # the rollout workers are tested
    killed = threading.Event()

    def kill_rollout_worker_0_mid_step() -> None:
        while not (tmp_path / "ray" / "rollouts-started").exists():
            time.sleep(0.01)
        ray.kill(ray.get_actor("agentrl-rollout-killed-0"), no_restart=False)
        killed.set()

    killer = threading.Thread(target=kill_rollout_worker_0_mid_step, daemon=True)
    killer.start()
    run_dir = train(config, runs_dir=tmp_path / "runs", run_id="killed", config_base_dir=EXAMPLE_CONFIG.parent)
    killer.join(timeout=1)
    assert killed.is_set()
    events = read_events(run_dir)
    assert latest_status(events)["status"] == "completed"
    # One death, one event: a call that fails on the worker while Ray restarts it is the same death.
    [restart] = [e["data"] for e in events if e["type"] == "worker_restarted"]
    assert restart.pop("message").startswith("rollout worker 0 died (Actor")  # Died or Unavailable: when it looked
    assert restart == {"step": 1, "worker": 0, "restarts": 1, "episodes_rerun": 8, "rerun_on": 1}
    places = [(r["step"], r["group"], r["sample"]) for r in trajectories(run_dir)]
    assert sorted(places) == [(step, group, sample) for step in (1, 2) for group in (0, 1) for sample in range(8)]
    assert_same_episodes(run_dir, one_process_run)  # no episode lost, none twice, each as one process samples it
    # The Runs view's rows: worker 0 restarting from its death to its next share's answer (step 2), then ready. A
    # loaded machine may still be restarting it at step 2 (that share then runs on worker 1): it stays restarting.
    reports = worker_reports(run_dir)
    rollout_0 = states_of(reports, "rollout", 0)
    assert rollout_0 in (["starting", "ready", "restarting", "ready"], ["starting", "ready", "restarting"])
    assert states_of(reports, "rollout", 1) == ["starting", "ready"]
    assert [(w["role"], w["index"], w["state"], w["restarts"]) for w in reports[-1]] == [
        ("rollout", 0, rollout_0[-1], 1),
        ("rollout", 1, "ready", 0),
        ("learner", 0, "ready", 0),
    ]
    types = [e["type"] for e in events]
    restarting = next(
        i for i, e in enumerate(events) if e["type"] == "workers" and e["data"]["workers"][0]["state"] == "restarting"
    )
    assert types[restarting + 1] == "worker_restarted"  # reported as it died, before its share ran again


HUNG_ENV = """
import os
import time

from agentrl.examples.lookup.env import LookupEnv

HUNG = "HUNG_PATH"


class HungOnceLookupEnv(LookupEnv):
    def reset(self, task):
        try:  # the first reset anywhere makes the file and never returns: its share's answer never comes
            os.close(os.open(HUNG, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return super().reset(task)
        time.sleep(3600)
"""


def test_a_share_whose_answer_never_comes_runs_again_on_another_worker(
    tmp_path, local_ray, one_process_run, monkeypatch, capfd
):
    """A share out long past its peers (a node cut off and back before Ray noticed, its answer lost) is taken for
    lost: its worker is killed, Ray restarts it, the share runs again on the other worker, each episode once."""
    monkeypatch.setattr(rollout_workers, "STRAGGLER_FLOOR_S", 3.0)  # the step's other share: about 1 s
    folder = tmp_path / "ray"
    folder.mkdir()
    (folder / "env.py").write_text(HUNG_ENV.replace("HUNG_PATH", str(folder / "hung")))
    config = example(*TWO_STEPS, *ON_RAY, "cluster.learner_workers=1")
    config.env.module, config.env.class_name = str(folder / "env.py"), "HungOnceLookupEnv"
    started = time.monotonic()
    run_dir = train(config, runs_dir=tmp_path / "runs", run_id="hung", config_base_dir=EXAMPLE_CONFIG.parent)
    assert time.monotonic() - started < 600
    events = read_events(run_dir)
    assert latest_status(events)["status"] == "completed"
    [restart] = [e["data"] for e in events if e["type"] == "worker_restarted"]
    assert restart["step"] == 1 and restart["rerun_on"] == 1 - restart["worker"] and restart["episodes_rerun"] == 8
    # The deadline: 3 times the slowest answered share, at least the floor (a loaded machine's share took 1.7 s: 5 s).
    warned = re.search(
        r"not answered (\d+) s after they were sent \(the slowest of the step's other shares took "
        r"([\d.]+) s\)",
        capfd.readouterr().err,
    )
    assert warned, "no straggler warning"
    deadline_s = max(3.0, rollout_workers.STRAGGLER_FACTOR * float(warned[2]))
    assert abs(int(warned[1]) - deadline_s) <= 0.5 + rollout_workers.STRAGGLER_FACTOR * 0.05  # as printed: rounded
    assert_same_episodes(run_dir, one_process_run)  # no episode lost, none twice, each as one process samples it


def test_a_cluster_too_small_for_the_workers_is_refused_before_any_waits(tmp_path, local_ray):
    config = example(*TWO_STEPS, *ON_RAY, "cluster.learner_resources.cpus=1")
    with pytest.raises(RuntimeError, match=r"need 3 CPUs \(it has 2\)"):
        train(config, runs_dir=tmp_path, config_base_dir=EXAMPLE_CONFIG.parent)


def test_workers_that_fit_in_total_but_on_no_node_are_refused_naming_the_nodes():
    """Ray's totals add nodes up; a worker runs on one. Four 2-CPU nodes hold 8 CPUs and no learner of 4."""
    from types import SimpleNamespace

    from agentrl.cluster.connect import check_capacity, unplaced_worker

    def cluster_of(*nodes):
        return SimpleNamespace(
            cluster_resources=lambda: {
                "CPU": sum(n.get("CPU", 0) for n in nodes),
                "GPU": sum(n.get("GPU", 0) for n in nodes),
            },
            nodes=lambda: (
                [{"Alive": True, "Resources": n} for n in nodes] + [{"Alive": False, "Resources": {"CPU": 64}}]
            ),
        )

    config = example(
        *ON_RAY, "cluster.rollout_workers=2", "cluster.learner_workers=1", "cluster.learner_resources.cpus=4"
    )
    with pytest.raises(RuntimeError, match=r"a learner worker of 4 CPU / 0 GPU finds no node .*2 CPU / 0 GPU, 2 CPU"):
        check_capacity(cluster_of(*[{"CPU": 2.0}] * 4), config.cluster)
    check_capacity(cluster_of({"CPU": 4.0}, {"CPU": 2.0}), config.cluster)  # the learner on the 4, rollouts beside
    # Largest first, each where it leaves the least room: two GPU learners and four rollouts on a 1-GPU and a 0-GPU
    # node of 4 CPUs each, where placing rollouts first on the GPU node would leave a learner nowhere.
    workers = [("rollout", 4, 1.0, 0.0), ("learner", 1, 2.0, 1.0)]
    assert unplaced_worker([{"CPU": 4.0}, {"CPU": 4.0, "GPU": 1.0}], workers) is None
    assert unplaced_worker([{"CPU": 4.0}, {"CPU": 4.0, "GPU": 1.0}], [*workers, ("learner", 1, 1.0, 1.0)]) == (
        "learner",
        1.0,
        1.0,
    )


def test_a_rollout_worker_past_its_restarts_is_reported_dead_once():
    reports = []
    states = WorkerStates(reports.append)
    states.starting("rollout", 2, max_restarts=1)
    states.ready("rollout", {0: "10.0.0.7", 1: "10.0.0.7"})
    assert states.died("rollout", 0) == {
        "role": "rollout",
        "index": 0,
        "state": "restarting",
        "restarts": 1,
        "node": "10.0.0.7",
    }
    states.ready("rollout", {0: "10.0.0.8"})  # Ray may restart it on another node
    assert states.died("rollout", 0)["state"] == "dead"
    assert states.died("rollout", 0)["restarts"] == 1  # its later calls fail at once: nothing new to report
    assert states_of(reports, "rollout", 0) == ["starting", "ready", "restarting", "ready", "dead"]
    assert states_of(reports, "rollout", 1) == ["starting", "ready"]
    assert len(reports) == 5


def test_without_ray_installed_backend_ray_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets without the extra
    with pytest.raises(RuntimeError, match=r"pip install 'agentrl\[ray\]'"):
        train(example(*TWO_STEPS, *ON_RAY), runs_dir=tmp_path, config_base_dir=EXAMPLE_CONFIG.parent)
    assert example().cluster.backend == "local"  # a config without a cluster block runs as it always has


def test_a_server_started_with_ray_runs_configs_on_that_cluster():
    config = example(*TWO_STEPS)
    moved = on_ray_cluster(config, "ray://head:10001")
    assert (moved.cluster.backend, moved.cluster.address) == ("ray", "ray://head:10001")
    own = example(*TWO_STEPS, "cluster.backend=ray", "cluster.address=ray://other:10001")
    assert on_ray_cluster(own, "ray://head:10001").cluster.address == "ray://other:10001"
    with pytest.raises(ConfigError, match="async_steps"):
        on_ray_cluster(example("train.async_steps=1", "rollout.engine=vllm"), "auto")


def test_a_learner_worker_that_dies_fails_the_step_and_the_run_resumes_from_its_checkpoint(tmp_path, local_ray):
    config = slow_example(tmp_path / "ray", *ON_RAY, "cluster.rollout_workers=1", "train.checkpoint_every=1")

    def kill_learner_worker_1_in_step_2() -> None:
        while not (tmp_path / "runs" / "dies" / "checkpoints" / "step-000001").exists():
            time.sleep(0.01)
        ray.kill(ray.get_actor("agentrl-learner-dies-1"))  # step 2's rollouts take 0.8 s: it dies before updating

    killer = threading.Thread(target=kill_learner_worker_1_in_step_2, daemon=True)
    killer.start()
    with pytest.raises(RuntimeError, match="learner worker 1 failed while updating"):
        train(config, runs_dir=tmp_path / "runs", run_id="dies", config_base_dir=EXAMPLE_CONFIG.parent)
    run_dir = tmp_path / "runs" / "dies"
    failed = latest_status(read_events(run_dir))
    assert (failed["status"], failed["step"]) == ("failed", 1)
    reports = worker_reports(run_dir)
    assert states_of(reports, "learner", 1) == ["starting", "ready", "dead"]
    assert states_of(reports, "learner", 0) == ["starting", "ready"]  # ended by the driver, not dead of itself
    assert not list((run_dir / "trajectories").glob("step-000002*"))  # nothing of the failed step was written
    train(None, runs_dir=tmp_path / "runs", resume_dir=run_dir)
    assert latest_status(read_events(run_dir))["status"] == "completed"
    assert sorted({r["step"] for r in trajectories(run_dir)}) == [1, 2]


def test_an_agent_run_on_two_rollout_workers_records_what_one_process_does(tmp_path, local_ray):
    """An agent run (`agent:`) on Ray: each rollout worker runs its share's agents against an endpoint it serves on its
    own loopback; the episodes, each sampled from its own seed, are those one process samples, and the step's counts
    add up over the workers."""
    import json
    import textwrap

    from agentrl.contract.config import load_config_dict
    from test_agent_endpoint import AGENT_PY, REWARD_PY

    (tmp_path / "agent.py").write_text(textwrap.dedent(AGENT_PY))
    (tmp_path / "reward.py").write_text(textwrap.dedent(REWARD_PY))
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps({"id": i, "a": i, "b": 2 * i}) + "\n" for i in range(6)))
    raw = {
        "model": {"path": "tiny", "tiny_layers": 1, "tiny_hidden": 32},
        "agent": {"module": str(tmp_path / "agent.py"), "reward": f"{tmp_path / 'reward.py'}:score", "timeout_s": 60},
        "data": {"train": str(tmp_path / "tasks.jsonl")},
        "rollout": {"group_size": 2, "max_new_tokens": 12, "max_context": 512, "engine": "hf"},
        "train": {"steps": 1, "batch_size": 8, "micro_batch_size": 8, "lr": 1e-3, "checkpoint_every": 1},
    }
    one = train(load_config_dict(raw), runs_dir=tmp_path / "one")
    on_ray = {"backend": "ray", "rollout_workers": 2, "rollout_resources": {"cpus": 0.5}}
    two = train(load_config_dict({**raw, "cluster": on_ray}), runs_dir=tmp_path / "ray")
    assert latest_status(read_events(two))["status"] == "completed"
    logged = [e["data"]["message"] for e in read_events(two) if e["type"] == "log"]
    assert "rollout engine: ray: 2 rollout workers, agent endpoint (hf)" in logged, logged
    assert_same_episodes(two, one)
    [metrics] = [e["data"]["metrics"] for e in read_events(two) if e["type"] == "metrics"]
    assert metrics["agent/requests"] == 16 and metrics["agent/prefix_breaks"] == 0  # 8 episodes, 2 requests each


def test_mcp_servers_restarted_on_two_rollout_workers_add_up_in_the_step(tmp_path, local_ray):
    """Each rollout worker starts its own MCP servers: a server that crashed on each worker in step 1 is restarted by
    each in step 2, and that step's metrics count both restarts, as one process counts its own (tests/test_mcp.py)."""
    from agentrl.contract.config import load_config
    from agentrl.rollout.scripted import ScriptedPolicy
    from test_mcp import call, metrics_by_step, write_env

    config = load_config(
        write_env(tmp_path, steps=2),
        ["model.path=tiny", "train.batch_size=4", "cluster.backend=ray", "cluster.rollout_workers=2"]
        + ["cluster.rollout_resources.cpus=0.5", "cluster.learner_resources.cpus=0.5"],
    )
    policy = ScriptedPolicy([call("crash"), call("pid"), "ok"])
    run_dir = train(config, runs_dir=tmp_path / "runs", config_base_dir=tmp_path, policy=policy)
    assert latest_status(read_events(run_dir))["status"] == "completed"
    logged = [e["data"]["message"] for e in read_events(run_dir) if e["type"] == "log"]
    assert any(message.startswith("rollout engine: ray: 2 rollout workers") for message in logged), logged
    metrics = metrics_by_step(run_dir)
    assert [metrics[step]["tools/mcp_restarts"] for step in (1, 2)] == [0.0, 2.0]


def test_a_sharded_run_stopped_resumed_and_exported_trains_as_one_process_does(tmp_path, local_ray, one_process_run):
    """cluster.sharding: fsdp: each of the 2 learner workers holds half of every weight (agentrl/cluster/
    sharded_learner.py; its own tests check the shards and the passes that keep the workers in step), and learner
    worker 0 broadcasts the gathered weights to the rollout workers (cluster.weight_sync: broadcast), a checkpoint
    after each step asking for them in the object store too. The run stops
    after its first step, resumes from that checkpoint into fresh sharded workers (whole weights and optimizer state
    split again), and its final checkpoint, a `save_pretrained` folder like any other, exports to the weights one
    process trains."""
    from agentrl.cli.export import export

    config = example(
        *TWO_STEPS, *ON_RAY, "cluster.sharding=fsdp", "cluster.weight_sync=broadcast", "train.checkpoint_every=1"
    )
    run_dir = train(config, runs_dir=tmp_path / "runs", max_steps=1, config_base_dir=EXAMPLE_CONFIG.parent)
    assert latest_status(read_events(run_dir))["step"] == 1
    train(None, runs_dir=tmp_path / "runs", resume_dir=run_dir)
    assert latest_status(read_events(run_dir))["status"] == "completed"
    assert_same_episodes(run_dir, one_process_run)
    expected = final_weights(one_process_run)
    [last] = sorted((run_dir / "checkpoints").glob("step-*"))[-1:]
    export(run_dir, tmp_path / "exported")
    [exported_file] = (tmp_path / "exported").glob("*.safetensors")
    exported = load_file(exported_file)
    assert last.name == "step-000002"
    worst = worst_weight_difference(exported, expected)
    assert worst <= PARAMETER_TOLERANCE, f"a tensor's weights differ by {worst} of how far one process moved them"


@pytest.mark.parametrize("sharding", ["none", "fsdp"])
def test_sft_on_two_learner_workers_trains_as_one_process_does(tmp_path, local_ray, sharding):
    """algorithm.name: sft has no rollout: the driver loads data.sft and each step's episodes go to the learner
    workers as rollouts do, data-parallel (each worker a share of the rows) or sharded (each worker half of every
    weight). Both record the episodes and end with the weights one process trains."""
    import json

    from test_sft import demonstration

    demos = tmp_path / "demos.jsonl"
    demos.write_text("".join(json.dumps(demonstration(key)) + "\n" for key in "01234567"))
    sft = (*TWO_STEPS, "algorithm.name=sft", f"data.sft=[{{demonstrations: {demos}}}]", "train.lr=0.01")
    one = train(example(*sft), runs_dir=tmp_path / "one", config_base_dir=EXAMPLE_CONFIG.parent)
    cluster = train(
        example(*sft, *ON_RAY, f"cluster.sharding={sharding}"),
        runs_dir=tmp_path / "ray",
        config_base_dir=EXAMPLE_CONFIG.parent,
    )
    assert latest_status(read_events(cluster))["status"] == "completed"
    reports = worker_reports(cluster)
    assert [states_of(reports, "learner", index) for index in (0, 1)] == [["starting", "ready"]] * 2
    assert_same_episodes(cluster, one)
    worst = worst_weight_difference(final_weights(cluster), final_weights(one))
    assert worst <= PARAMETER_TOLERANCE, f"a tensor's weights differ by {worst} of how far one process moved them"


def test_a_call_that_fails_on_a_worker_already_restarting_is_the_same_death():
    """Under load a share sent to a worker Ray is restarting fails (ActorUnavailableError): one death, one restart
    counted and reported, not two (the fresh-clone CI counted two for one killed straggler)."""
    reports: list = []
    states = WorkerStates(reports.append)
    states.starting("rollout", 2, max_restarts=3)
    assert states.died("rollout", 1)["restarts"] == 1
    assert states.died("rollout", 1) is None and len(reports) == 2
    states.ready("rollout", {1: "10.0.0.2"})
    assert states.died("rollout", 1)["restarts"] == 2

"""Runs on a Ray cluster of three nodes, each in a network namespace of its own (tests/netns_cluster.py): a head
node without CPUs and two worker nodes, where the driver's project folder (the env's code, its tasks, the config)
does not exist. The driver is `agentrl train` on this machine, a machine that is no node of the cluster, reaching it
through Ray Client (cluster.address: ray://HEAD:10001). Skipped where the machine allows no network namespaces."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agentrl.contract.config import ModelConfig, load_config
from agentrl.models.loading import load_policy
from agentrl.run.runstore import latest_status, read_events
from agentrl.run.trainer import train
from netns_cluster import NetnsCluster, Node, unavailable
from server_harness import ServerProcess, is_final_status
from test_cluster import (
    TWO_STEPS,
    assert_same_episodes,
    final_weights,
    states_of,
    worker_reports,
    worst_weight_difference,
)
from test_train import trajectories

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=f"no multi-node cluster here: {unavailable()}")

EXAMPLE = Path(__file__).parents[1] / "agentrl" / "examples" / "lookup"
CONFIG = "lookup.agentrl.yaml"
# Each learner worker asks for 2 of a worker node's 3 CPUs, so that two learner workers land on two nodes.
ACROSS_NODES = (
    "cluster.backend=ray",
    "cluster.rollout_workers=2",
    "cluster.learner_workers=2",
    "cluster.rollout_resources.cpus=1",
    "cluster.learner_resources.cpus=2",
)
PARAMETER_TOLERANCE = 1e-3  # test_cluster.py's, for the same reasons


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The user's project on the driver's machine: the tiny example's env, tasks and config, and nothing else."""
    folder = tmp_path_factory.mktemp("project")
    for name in ("env.py", "tasks.jsonl", CONFIG):
        (folder / name).write_bytes((EXAMPLE / name).read_bytes())
    return folder


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory) -> Path:
    """A transformers model folder on the driver's machine alone, as a Hub download or a checkpoint is: the tiny
    model, saved."""
    folder = tmp_path_factory.mktemp("models") / "tiny-llama"
    model, tokenizer, _ = load_policy(ModelConfig(path="tiny"), seed=0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def cluster(project, model_folder):
    with NetnsCluster(workers=2, cpus=3, hide=[project, model_folder.parent]) as made:
        yield made


@pytest.fixture(scope="module")
def one_process_run(project, tmp_path_factory) -> Path:
    return train(
        load_config(project / CONFIG, list(TWO_STEPS)), runs_dir=tmp_path_factory.mktemp("one"), config_base_dir=project
    )


def train_on(cluster: NetnsCluster, project: Path, runs_dir: Path, *overrides: str) -> subprocess.Popen[str]:
    """`agentrl train` of the project on the cluster, as a user runs it on their own machine."""
    sets = [part for setting in (*TWO_STEPS, *overrides) for part in ("--set", setting)]
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentrl.cli",
            "train",
            str(project / CONFIG),
            "--runs-dir",
            str(runs_dir),
            *sets,
            "--set",
            f"cluster.address={cluster.client_address}",
        ],
        env={**os.environ, **cluster.environment()},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finished_run(process: subprocess.Popen[str], runs_dir: Path, timeout: float = 600) -> Path:
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, output[-4000:]
    [run_dir] = [path for path in runs_dir.iterdir() if path.is_dir()]
    return run_dir


PROBE = """
import json, os, sys, ray
ray.init(address=sys.argv[1], log_to_driver=False, logging_level="ERROR")

@ray.remote(num_cpus=0)
def look(paths):
    import os, ray
    return {"node": ray.util.get_node_ip_address(), "found": [p for p in paths if os.path.exists(p)], "cwd": os.getcwd()}

nodes = [n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]]
print(json.dumps([ray.get(look.options(resources={f"node:{n}": 0.001}).remote(sys.argv[2:])) for n in nodes]))
"""


def test_neither_the_project_nor_the_model_folder_exists_on_any_node(cluster, project, model_folder):
    absent = [str(project / "env.py"), str(model_folder / "config.json")]
    answer = subprocess.run(
        [sys.executable, "-c", PROBE, cluster.client_address, *absent],
        env={**os.environ, **cluster.environment()},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert answer.returncode == 0, answer.stderr[-3000:] + cluster.client_server_errors()
    seen = json.loads(answer.stdout.splitlines()[-1])
    assert sorted(place["node"] for place in seen) == sorted(node.address for node in cluster.nodes)
    assert not any(place["found"] for place in seen), seen
    assert all(Path(path).exists() for path in absent)  # here, on the driver's machine, they do


def test_a_run_across_two_nodes_trains_as_one_process_does(cluster, project, one_process_run, tmp_path):
    """The env's code and tasks reach the nodes through the object store, the learner workers' gloo group and the
    weight broadcast form across the nodes, and the run records one process's episodes and weights."""
    process = train_on(cluster, project, tmp_path, *ACROSS_NODES, "cluster.weight_sync=broadcast")
    run_dir = finished_run(process, tmp_path)
    assert latest_status(read_events(run_dir))["status"] == "completed"
    assert_same_episodes(run_dir, one_process_run)
    worst = worst_weight_difference(final_weights(run_dir), final_weights(one_process_run))
    assert worst <= PARAMETER_TOLERANCE
    placed = {(w["role"], w["index"]): w["node"] for w in worker_reports(run_dir)[-1]}
    workers = {node.address for node in cluster.nodes[1:]}
    assert set(placed.values()) <= workers  # the head offers no CPUs: nothing runs there
    assert placed[("learner", 0)] != placed[("learner", 1)]  # 2 of 3 CPUs each: one per node
    assert (project / "env.py").read_text() == (EXAMPLE / "env.py").read_text()


def test_a_server_started_with_ray_client_runs_the_editors_runs_on_the_cluster(
    cluster, project, one_process_run, tmp_path, monkeypatch
):
    """`agentrl serve --ray ray://HEAD:10001` on this machine: a run the editor starts (run/start of the project's
    config, which names no cluster) trains on the worker nodes as `agentrl train` does there."""
    for name, value in cluster.environment().items():  # Ray's token for the server's runs, as for `agentrl train`
        monkeypatch.setenv(name, value)
    # not cluster.backend: the server's --ray chooses it
    config = load_config(project / CONFIG, [*TWO_STEPS, *ACROSS_NODES[1:]]).model_dump(mode="json")
    server = ServerProcess(tmp_path / "runs", "--ray", cluster.client_address)
    try:
        client = server.client()
        run_id = client.request("run/start", {"config": config, "configDir": str(project)})["runId"]
        client.request("run/subscribe", {"runId": run_id, "since": 0})
        events = client.events_until(run_id, is_final_status, timeout=600)
        assert events[-1]["data"]["status"] == "completed", events[-3:]
    finally:
        server.stop()
    run_dir = tmp_path / "runs" / run_id
    assert_same_episodes(run_dir, one_process_run)
    placed = {(w["role"], w["index"]): w["node"] for w in worker_reports(run_dir)[-1]}
    assert set(placed.values()) <= {node.address for node in cluster.nodes[1:]}, placed


def test_a_model_folder_on_the_driver_alone_reaches_every_node(cluster, project, model_folder, tmp_path):
    """model.path a local folder (a Hub download, a checkpoint) that no node has: Ray carries it to each node, where
    the rollout workers' engines and the learner workers load it, and the run is one process's."""
    folder_model = f"model.path={model_folder}"
    one_process = train(
        load_config(project / CONFIG, [*TWO_STEPS, folder_model]), runs_dir=tmp_path / "one", config_base_dir=project
    )
    process = train_on(cluster, project, tmp_path / "cluster", *ACROSS_NODES, folder_model)
    run_dir = finished_run(process, tmp_path / "cluster")
    assert_same_episodes(run_dir, one_process)
    worst = worst_weight_difference(final_weights(run_dir), final_weights(one_process))
    assert worst <= PARAMETER_TOLERANCE
    placed = {(w["role"], w["index"]): w["node"] for w in worker_reports(run_dir)[-1]}
    assert set(placed.values()) == {node.address for node in cluster.nodes[1:]}  # both nodes loaded it


def test_fsdp_learner_workers_on_two_nodes_train_as_one_process_does(cluster, project, one_process_run, tmp_path):
    process = train_on(cluster, project, tmp_path, *ACROSS_NODES, "cluster.sharding=fsdp")
    run_dir = finished_run(process, tmp_path)
    assert_same_episodes(run_dir, one_process_run)
    worst = worst_weight_difference(final_weights(run_dir), final_weights(one_process_run))
    assert worst <= PARAMETER_TOLERANCE
    placed = {(w["role"], w["index"]): w["node"] for w in worker_reports(run_dir)[-1]}
    assert placed[("learner", 0)] != placed[("learner", 1)]


SLOW_ENV = """
import time
from pathlib import Path

from env import LookupEnv

STARTED = Path("STARTED_PATH")  # outside the project: the nodes can write it, the test reads it


class SlowLookupEnv(LookupEnv):
    def reset(self, task):
        STARTED.touch()
        time.sleep(0.3)  # a share of 8 episodes takes 2.4 s: long enough to lose a node in
        return super().reset(task)
"""


# One learner worker and two rollout workers of 1 CPU: after a worker node is lost, the other (3 CPUs) holds them all.
SLOW_RUN = (
    "cluster.backend=ray",
    "cluster.rollout_workers=2",
    "cluster.learner_workers=1",
    "cluster.rollout_resources.cpus=1",
    "cluster.learner_resources.cpus=1",
    "cluster.max_restarts=2",
    "env.class_name=SlowLookupEnv",
)


@pytest.fixture
def started(project, tmp_path):
    """The slow env beside the project's (slow_env.py) and the file it touches at each episode's start."""
    marker = tmp_path / "shared" / "rollouts-started"
    marker.parent.mkdir()
    (project / "slow_env.py").write_text(SLOW_ENV.replace("STARTED_PATH", str(marker)))
    yield marker
    (project / "slow_env.py").unlink()


def slow_run(cluster, project, runs: Path, *overrides: str) -> subprocess.Popen[str]:
    return train_on(cluster, project, runs, *SLOW_RUN, f"env.module={project / 'slow_env.py'}", *overrides)


def during_step_2(cluster, process, runs: Path, started: Path) -> tuple[Node, dict]:
    """Once step 2's rollouts are under way (the learner worker placed, an episode started in the last second): the
    worker node that holds a rollout worker and not the learner worker, and where each worker is."""
    placed: dict = {}
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.2)
        reports = [worker_reports(run) for run in runs.glob("*/")] if runs.exists() else []
        # a worker still starting has no node yet
        placed = {(w["role"], w["index"]): w.get("node") for w in reports[0][-1]} if reports and reports[0] else {}
        if placed.get(("learner", 0)) and started.exists() and started.stat().st_mtime > time.time() - 1:
            rollout_nodes = {placed[("rollout", 0)], placed[("rollout", 1)]} - {placed[("learner", 0)]}
            assert rollout_nodes, f"both rollout workers share the learner's node: {placed}"
            return next(node for node in cluster.nodes if node.address in rollout_nodes), placed
    if process.poll() is not None:
        output, _ = process.communicate()
        raise AssertionError(
            f"the run ended ({process.returncode}) before step 2's rollouts were seen: {output[-3000:]}\n"
            + cluster.client_server_errors()
        )
    raise AssertionError(f"step 2's rollouts were never seen under way: {placed}")


def assert_each_episode_once(run_dir: Path, steps: int) -> None:
    places = sorted((r["step"], r["group"], r["sample"]) for r in trajectories(run_dir))
    assert places == [(step, group, sample) for step in range(1, steps + 1) for group in (0, 1) for sample in range(8)]


def assert_lost_share_ran_again(run_dir: Path, victim: Node, placed: dict) -> None:
    events = read_events(run_dir)
    assert latest_status(events)["status"] == "completed"
    restarts = [e["data"] for e in events if e["type"] == "worker_restarted"]
    assert restarts and all(r["step"] == 2 for r in restarts), restarts
    lost = next(index for (role, index), node in placed.items() if role == "rollout" and node == victim.address)
    assert "restarting" in states_of(worker_reports(run_dir), "rollout", lost)


def restored(cluster: NetnsCluster, node: Node) -> None:
    """`node` again as it was, for the module's next tests: its processes ended, a fresh node at its address once
    the cluster has let the lost one go (a fresh node started sooner was marked dead with it, and the next test's
    Ray Client connection failed)."""
    cluster.partition(node, down=False)
    cluster.kill(node)
    cluster.wait_for_loss(node)
    cluster.start(node)
    cluster.wait_for_nodes(len(cluster.nodes))


def kill_node(cluster: NetnsCluster, node: Node) -> None:
    cluster.kill(node)


def cut_off_for_30_s(cluster: NetnsCluster, node: Node) -> None:
    cluster.partition(node, down=True)
    time.sleep(30)
    cluster.partition(node, down=False)


@pytest.mark.parametrize("fault", [kill_node, cut_off_for_30_s], ids=["killed", "cut-off"])
def test_a_worker_node_lost_mid_step_costs_no_episode(fault, cluster, project, one_process_run, started, tmp_path):
    """Both worker nodes hold a rollout worker; during step 2's rollouts the node without the learner worker is
    killed (its raylet and every process on it, by pid), or its link is down for 30 s (Ray declares it dead once its
    health checks fail, or the share's answer is lost). Its rollout worker restarts on the other node, its share runs
    again there, and the run records each episode once, as one process does."""
    runs = tmp_path / "runs"
    process = slow_run(cluster, project, runs)
    victim, placed = during_step_2(cluster, process, runs, started)
    try:
        fault_at = time.time()
        fault(cluster, victim)
        run_dir = finished_run(process, runs)
        completed_s = time.time() - fault_at
    finally:
        restored(cluster, victim)
    assert_lost_share_ran_again(run_dir, victim, placed)
    assert_each_episode_once(run_dir, 2)
    assert_same_episodes(run_dir, one_process_run)
    noticed_s = next(e["time"] for e in read_events(run_dir) if e["type"] == "worker_restarted") - fault_at
    print(
        f"node {victim.address}, {fault.__name__} in step 2: the run noticed its worker lost {noticed_s:.1f} s after, "
        f"and completed {completed_s:.1f} s after"
    )


def test_the_head_node_lost_ends_the_run_and_a_new_head_resumes_it(cluster, project, started, tmp_path):
    """The head (the GCS, Ray Client's server) is killed during step 2: the driver loses the cluster, the run ends
    failed with its step-1 checkpoint intact; on a new cluster at the same address, `agentrl train --resume`
    continues from that checkpoint to the end, each episode recorded once."""
    runs = tmp_path / "runs"
    process = slow_run(cluster, project, runs, "train.steps=3", "train.checkpoint_every=1")
    during_step_2(cluster, process, runs, started)
    [run_dir] = list(runs.glob("*/"))
    assert (run_dir / "checkpoints" / "step-000001").is_dir()
    killed_at = time.monotonic()
    cluster.kill(cluster.head)
    output, _ = process.communicate(timeout=600)
    ended_s = time.monotonic() - killed_at
    assert process.returncode != 0, output[-3000:]
    status = latest_status(read_events(run_dir))
    assert status["status"] == "failed" and status["step"] == 1, status
    rebuilt_at = time.monotonic()
    cluster.restart()
    rebuilt_s = time.monotonic() - rebuilt_at
    resumed = subprocess.run(
        [sys.executable, "-m", "agentrl.cli", "train", "--resume", str(run_dir)],
        env={**os.environ, **cluster.environment()},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert latest_status(read_events(run_dir))["status"] == "completed"
    assert_each_episode_once(run_dir, 3)
    print(
        f"head killed in step 2: the driver ended {ended_s:.1f} s later; a new cluster took {rebuilt_s:.1f} s, the "
        f"resume {time.monotonic() - rebuilt_at - rebuilt_s:.1f} s"
    )

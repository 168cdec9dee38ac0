"""A Ray cluster of several nodes on one machine, each node in a network namespace of its own with its own address,
started with Ray's own `ray start`, as on separate machines: the tests of tests/test_ray_nodes.py use it, and
docs/ray.md shows it run by hand (`python tests/netns_cluster.py --hide FOLDER`).

Needs root (network namespaces, a bridge, tmpfs mounts). The namespaces hang off a bridge on this machine
(BRIDGE_ADDRESS .1; the head .10, worker node i .1i); no traffic leaves the machine. Each node's processes run in a
mount namespace of their own where every `hide` folder is covered by an empty tmpfs: the driver's project (its env
folder, its data) does not exist there, as on a machine that never had it; agentrl and Python stay visible (they
are what each node installs). Every node shares one Ray token (Ray 2.60's token authentication, which the driver
needs too: `environment()`).

Teardown kills every process inside each namespace by pid (never `ray stop`, which would stop every Ray cluster
of this user on the machine), then removes the namespaces and the bridge; it runs on exit too, however the test ends.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

GCS_PORT = 6379
CLIENT_PORT = 10001  # Ray Client: a driver on a machine that is not a node (ray://HEAD:10001)
OBJECT_STORE_BYTES = 200 * 2**20  # per node: the tests move a tiny model's weights
RAY = str(Path(sys.executable).with_name("ray"))


def unavailable() -> str | None:
    """Why this machine cannot hold the cluster, or None."""
    if sys.platform != "linux":
        return "network namespaces are Linux's"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is missing"
    if not Path(RAY).exists():
        return f"Ray's `ray` command is not beside {sys.executable}: pip install 'agentrl[ray]'"
    probe = f"agentrl-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str, namespace: str | None = None) -> None:
    command = ["ip", "netns", "exec", namespace, "ip", *args] if namespace else ["ip", *args]
    subprocess.run(command, check=True, capture_output=True, text=True)


@dataclass
class Node:
    name: str
    namespace: str
    address: str
    host_link: str  # its veth's end on this machine, on the bridge: `partition` takes it down
    process: subprocess.Popen[bytes] | None = None


class NetnsCluster:
    """`with NetnsCluster(workers=2, hide=[project]) as cluster:` a head node (no CPUs of its own, so that every
    worker lands on a worker node) and `workers` worker nodes of `cpus` CPUs each."""

    def __init__(self, workers: int = 2, cpus: int = 2, hide: list[Path] | None = None, subnet: int | None = None):
        tag = f"{os.getpid() % 100000}"
        self.prefix = f"arl{tag}"  # interface names have 15 characters at most
        subnet = subnet if subnet is not None else 100 + os.getpid() % 150
        self.network = f"10.{subnet}.0"
        self.bridge = f"{self.prefix}br"
        self.hide = [Path(path).absolute() for path in hide or []]
        self.cpus = cpus
        self.token = secrets.token_hex(16)
        self.folder = Path(tempfile.mkdtemp(prefix="agentrl-netns-"))
        self.nodes = [Node("head", f"{self.prefix}-head", f"{self.network}.10", f"{self.prefix}v0")]
        self.nodes += [
            Node(f"worker{i}", f"{self.prefix}-w{i}", f"{self.network}.1{i}", f"{self.prefix}v{i}")
            for i in range(1, workers + 1)
        ]
        self._made: list[str] = []  # what teardown removes: namespaces and links, in the order made

    # Addresses a driver uses: on this machine (Ray Client), or in the head's namespace (the GCS).
    @property
    def head(self) -> Node:
        return self.nodes[0]

    @property
    def client_address(self) -> str:
        return f"ray://{self.head.address}:{CLIENT_PORT}"

    @property
    def gcs_address(self) -> str:
        return f"{self.head.address}:{GCS_PORT}"

    def environment(self) -> dict[str, str]:
        """What a driver (or `ray` command) needs besides the address: the cluster's token."""
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token}

    def __enter__(self) -> NetnsCluster:
        atexit.register(self.close)
        try:
            self._network()
            for node in self.nodes:
                self.start(node)
            self.wait_for_nodes(len(self.nodes))
            self.wait_for_client()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _network(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        self._made.append(f"link:{self.bridge}")
        _ip("addr", "add", f"{self.network}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for node in self.nodes:
            _ip("netns", "add", node.namespace)
            self._made.append(f"netns:{node.namespace}")
            _ip("link", "add", node.host_link, "type", "veth", "peer", "name", "eth0", "netns", node.namespace)
            _ip("link", "set", node.host_link, "master", self.bridge, "up")
            _ip("addr", "add", f"{node.address}/24", "dev", "eth0", namespace=node.namespace)
            _ip("link", "set", "eth0", "up", namespace=node.namespace)
            _ip("link", "set", "lo", "up", namespace=node.namespace)

    def _in_node(self, node: Node, command: str) -> list[str]:
        """`command` (a shell line) run in `node`'s namespaces, with the `hide` folders covered."""
        covers = " && ".join(f"mount -t tmpfs -o size=1m,mode=0700 hidden {shlex.quote(str(p))}" for p in self.hide)
        return ["ip", "netns", "exec", node.namespace, "sh", "-c", f"{covers + ' && ' if covers else ''}{command}"]

    def start(self, node: Node) -> None:
        """`ray start --block` for `node` (again, after `kill`: a replacement node at the same address)."""
        common = (
            f"--node-ip-address {node.address} --temp-dir {self.folder / node.name} --block --disable-usage-stats "
            f"--object-store-memory {OBJECT_STORE_BYTES}"
        )
        if node is self.head:
            line = f"{RAY} start --head --port {GCS_PORT} --ray-client-server-port {CLIENT_PORT} --num-cpus 0 {common}"
        else:
            line = f"{RAY} start --address {self.gcs_address} --num-cpus {self.cpus} {common}"
        log = open(self.folder / f"{node.name}.log", "ab")  # noqa: SIM115  # the node's process owns it
        node.process = subprocess.Popen(
            self._in_node(node, f"exec {line}"),
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **self.environment()},
            start_new_session=True,
        )
        log.close()
        if node is self.head:
            self._wait_for_port(node)

    def _wait_for_port(self, node: Node, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            probe = subprocess.run(
                ["ip", "netns", "exec", node.namespace, sys.executable, "-c", _PORT_PROBE, node.address, str(GCS_PORT)],
                capture_output=True,
            )
            if probe.returncode == 0:
                return
            self._check_alive(node)
            time.sleep(1)
        raise TimeoutError(f"{node.name}'s Ray did not listen within {timeout:.0f} s: {self.log_tail(node)}")

    def _check_alive(self, node: Node) -> None:
        if node.process is not None and node.process.poll() is not None:
            raise RuntimeError(f"{node.name}'s `ray start` ended ({node.process.returncode}): {self.log_tail(node)}")

    def log_tail(self, node: Node, lines: int = 15) -> str:
        path = self.folder / f"{node.name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no log)"

    def client_server_errors(self, lines: int = 30) -> str:
        """The tail of the head's Ray Client server logs: why a client's connection failed."""
        logs = sorted((self.folder / self.head.name).glob("session_latest/logs/ray_client_server*"))
        return "\n".join(
            f"{path.name}: " + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) for path in logs
        )

    def alive_nodes(self) -> list[str]:
        """The addresses of the nodes the cluster's GCS holds alive (asked from the head's namespace)."""
        answer = subprocess.run(
            ["ip", "netns", "exec", self.head.namespace, sys.executable, "-c", _ALIVE_PROBE, self.gcs_address],
            capture_output=True,
            text=True,
            env={**os.environ, **self.environment()},
            timeout=120,
        )
        if answer.returncode != 0:
            raise RuntimeError(f"asking the cluster for its nodes failed: {answer.stderr[-2000:]}")
        return answer.stdout.split()

    def wait_for_loss(self, node: Node, timeout: float = 180.0) -> None:
        """Until the GCS holds `node` alive no more (its health checks failed). A node started again at its address
        before then is counted as the lost one still alive, and is marked dead with it moments later."""
        deadline = time.monotonic() + timeout
        while node.address in self.alive_nodes():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the cluster still holds {node.name} alive {timeout:.0f} s after it was lost")
            time.sleep(1)

    def wait_for_nodes(self, count: int, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node in self.nodes:
                self._check_alive(node)
            if len(self.alive_nodes()) >= count:
                return
            time.sleep(2)
        raise TimeoutError(f"the cluster has not {count} nodes alive after {timeout:.0f} s")

    def wait_for_client(self, attempts: int = 5) -> None:
        """Until a Ray Client connection from this machine succeeds. The first one to a head that has just started
        can fail ("Starting Ray client server failed", its log empty) while its nodes are already alive."""
        for attempt in range(attempts):
            answer = subprocess.run(
                [sys.executable, "-c", _CLIENT_PROBE, self.client_address],
                capture_output=True,
                text=True,
                env={**os.environ, **self.environment()},
                timeout=120,
            )
            if answer.returncode == 0:
                return
            time.sleep(2 * (attempt + 1))
        raise RuntimeError(f"no Ray Client connection after {attempts} attempts: {answer.stderr[-2000:]}")

    def pids(self, node: Node) -> list[int]:
        listed = subprocess.run(["ip", "netns", "pids", node.namespace], capture_output=True, text=True)
        return [int(pid) for pid in listed.stdout.split()]

    def kill(self, node: Node) -> None:
        """Every process of `node` (its raylet, its workers, its `ray start`), by pid, at once: a machine lost."""
        for pid in self.pids(node):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if node.process is not None:
            node.process.wait()

    def restart(self) -> None:
        """Every node ended and started again, the head first: a new cluster at the same addresses (after the head
        was lost, the other nodes' raylets cannot join a new head)."""
        for node in self.nodes:
            self.kill(node)
        for node in self.nodes:
            self.start(node)
        self.wait_for_nodes(len(self.nodes))
        self.wait_for_client()

    def partition(self, node: Node, down: bool) -> None:
        """Cuts `node` off the network (its link on the bridge down), or joins it again."""
        _ip("link", "set", node.host_link, "down" if down else "up")

    def run_on(self, node: Node, argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        """`argv` run in `node`'s namespaces (its `hide` folders covered), with the cluster's token."""
        return subprocess.run(
            self._in_node(node, shlex.join(argv)),
            env={**os.environ, **self.environment()},
            text=True,
            capture_output=True,
            **kwargs,  # type: ignore[arg-type]
        )

    def close(self) -> None:
        for node in self.nodes:
            if any(made == f"netns:{node.namespace}" for made in self._made):
                self.kill(node)
        for made in reversed(self._made):
            kind, name = made.split(":", 1)
            subprocess.run(
                ["ip", "netns", "del", name] if kind == "netns" else ["ip", "link", "del", name], capture_output=True
            )
        self._made.clear()
        shutil.rmtree(self.folder, ignore_errors=True)


_PORT_PROBE = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()"
_CLIENT_PROBE = "import sys, ray; ray.init(address=sys.argv[1], logging_level='ERROR'); ray.shutdown()"
_ALIVE_PROBE = (
    "import sys, ray; ray.init(address=sys.argv[1], log_to_driver=False, logging_level='ERROR'); "
    "print(' '.join(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']))"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="worker nodes (default: 2)")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs each worker node offers Ray (default: 2)")
    parser.add_argument("--hide", action="append", default=[], type=Path, help="a folder absent on every node")
    args = parser.parse_args()
    reason = unavailable()
    if reason:
        print(f"netns_cluster: {reason}", file=sys.stderr)
        return 2
    with NetnsCluster(args.workers, args.cpus, args.hide) as cluster:
        print(f"nodes: {', '.join(f'{n.name} {n.address}' for n in cluster.nodes)}")
        print(f"export {' '.join(f'{k}={v}' for k, v in cluster.environment().items())}")
        print(f"cluster.address: {cluster.client_address}   (Ray Client, from this machine)")
        print("Ctrl-C tears the cluster down.")
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())

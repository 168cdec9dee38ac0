"""The server keeps answering while clients attack it with work: decompression bombs uploaded at once, subscribers
that never read, and listing a run with a long event log. Liveness is checked with generous bounds only; how fast
the server answers meanwhile is measured by benchmarks/bench_load.py, not asserted here."""

import base64
import bz2
import json
import os
import socket
import tarfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from agentrl.run.runstore import EVENTS_FILE, RunStore
from agentrl.server.bundles import MAX_FILE_BYTES, MAX_TOTAL_BYTES
from agentrl.server.event_stream import BEHIND_THRESHOLD
from server_harness import ServerProcess

LONG_RUN_EVENTS = 100_000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = ServerProcess(tmp_path_factory.mktemp("load") / "runs")
    yield proc
    proc.stop()
    log = proc.process.stderr.read()
    assert "Traceback" not in log and "internal error" not in log, log[-3000:]


@pytest.fixture(scope="module")
def long_run(server):
    """A finished run of 100,000 events of about 500 bytes (50 MB), written straight into its log."""
    RunStore.create(server.runs_dir, "long", {}, {"name": "long", "mode": "train"})
    padding = {f"pad/{index:02d}": 0.123456789 for index in range(20)}
    with (server.runs_dir / "long" / EVENTS_FILE).open("w", encoding="utf-8") as log:
        for seq in range(1, LONG_RUN_EVENTS):
            data = {"step": seq, "metrics": {"reward/mean": seq * 1e-6, **padding}}
            log.write(json.dumps({"seq": seq, "time": 1e9 + seq, "type": "metrics", "data": data}) + "\n")
        data = {"status": "completed", "step": LONG_RUN_EVENTS, "total_steps": LONG_RUN_EVENTS}
        log.write(json.dumps({"seq": LONG_RUN_EVENTS, "time": 2e9, "type": "status", "data": data}) + "\n")
    return "long"


def server_rss_mb(server: ServerProcess) -> float:
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def bomb():
    """A 600-byte .tar.bz2 whose first four members inflate to the bundle limit (256 MiB of zeros, extracted
    for a second or more) and whose fifth header is one byte over it: every upload of it extracts, then fails."""
    zeros = bytes(MAX_FILE_BYTES)
    compressor = bz2.BZ2Compressor()
    parts = []
    for index in range(MAX_TOTAL_BYTES // MAX_FILE_BYTES):
        member = tarfile.TarInfo(f"zeros-{index}.bin")
        member.size = len(zeros)
        parts += [compressor.compress(member.tobuf(format=tarfile.GNU_FORMAT)), compressor.compress(zeros)]
    over = tarfile.TarInfo("one-byte-over.bin")
    over.size = 1
    parts += [compressor.compress(over.tobuf(format=tarfile.GNU_FORMAT)), compressor.flush()]
    return base64.b64encode(b"".join(parts)).decode()


def upload_frame(request_id: int, archive: str) -> str:
    params = {"name": "bomb", "archive": archive}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "env/upload", "params": params})


class ExtractionWatch(threading.Thread):
    """Samples the bundle store's staging folders (one per extraction in progress) until `done` is set: the most
    seen at once, and every one seen."""

    def __init__(self, bundles: Path, done: threading.Event) -> None:
        super().__init__()
        self.bundles, self.done = bundles, done
        self.most, self.seen = 0, set()

    def run(self) -> None:
        while not self.done.is_set():
            staging = {path.name for path in self.bundles.glob(".tmp-*")} if self.bundles.is_dir() else set()
            self.most, self.seen = max(self.most, len(staging)), self.seen | staging
            time.sleep(0.002)


def test_a_third_concurrent_upload_waits_for_an_extraction_slot_while_new_clients_are_answered(server, bomb):
    uploaders = [server.client() for _ in range(3)]
    replies: list[dict] = []
    all_replied = threading.Event()
    watch = ExtractionWatch(server.runs_dir / ".bundles", all_replied)
    watch.start()

    def upload(client) -> None:
        replies.append(client.call("env/upload", {"name": "bomb", "archive": bomb}, timeout=300))
        if len(replies) == len(uploaders):
            all_replied.set()

    threads = [threading.Thread(target=upload, args=(client,)) for client in uploaders]
    for thread in threads:
        thread.start()
    deadline = time.time() + 60
    while not watch.seen:  # the first extraction has started
        assert time.time() < deadline, "no upload was extracted"
        time.sleep(0.002)
    fresh = server.client()  # connects and initializes while the bombs are extracted
    assert "time" in fresh.request("server/ping")
    answered_meanwhile = not all_replied.is_set()
    for thread in [*threads, watch]:
        thread.join(timeout=300)
    assert [reply["error"]["code"] for reply in replies] == [-32020] * 3
    assert all("bytes uncompressed; at most" in reply["error"]["message"] for reply in replies)
    assert answered_meanwhile, "the new client was answered only after every upload had finished"
    assert watch.most == 2, f"{watch.most} uploads were extracted at once; the server's bound is 2"
    assert len(watch.seen) == 3  # the third, having waited, was extracted once a slot was free


def test_one_connection_extracts_one_upload_at_a_time(server, bomb):
    client = server.client()
    for request_id in (101, 102):  # sent together, without waiting for the first answer
        client.ws.send(upload_frame(request_id, bomb))
    done = threading.Event()
    watch = ExtractionWatch(server.runs_dir / ".bundles", done)
    watch.start()
    replies = [json.loads(client.ws.recv(timeout=300)) for _ in range(2)]
    done.set()
    watch.join()
    assert [(reply["id"], reply["error"]["code"]) for reply in replies] == [(101, -32020), (102, -32020)]
    assert watch.most == 1 and len(watch.seen) == 2, (watch.most, watch.seen)


def masked_text_frame(text: str) -> bytes:
    """One client-to-server WebSocket text frame (RFC 6455 5.2: a client masks what it sends)."""
    payload, mask = text.encode(), os.urandom(4)
    length = bytes([0x80 | len(payload)]) if len(payload) < 126 else bytes([0x80 | 126]) + len(payload).to_bytes(2)
    return bytes([0x81]) + length + mask + bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))


def silent_subscriber(server: ServerProcess, run_id: str) -> socket.socket:
    """A real client with the smallest socket buffers the OS gives that subscribes to a run from its first event,
    then never reads its socket again."""
    url = urlparse(server.url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)  # the kernel rounds it up to its minimum
    sock.connect((url.hostname, url.port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET / HTTP/1.1\r\nHost: {url.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {server.token}\r\n\r\n".encode()
    )
    handshake = b""
    while not handshake.endswith(b"\r\n\r\n"):  # byte by byte: nothing after the handshake is read
        handshake += sock.recv(1)
    assert handshake.startswith(b"HTTP/1.1 101"), handshake
    for request_id, method, params in (
        (1, "initialize", {"protocolVersion": "2.0"}),
        (2, "run/subscribe", {"runId": run_id, "since": 0}),
    ):
        sock.sendall(
            masked_text_frame(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
        )
    return sock


def test_subscribers_that_never_read_cost_bounded_memory_and_hear_they_are_behind(server, long_run):
    """Six clients stop reading a 50 MB replay: buffering it for them would take 300 MB. The server holds a
    bounded amount for each, tells each it is behind, and answers everyone else."""
    assert LONG_RUN_EVENTS > BEHIND_THRESHOLD  # a replay from seq 0 starts behind
    server.client().request("run/get", {"runId": long_run})  # what any first client costs is not counted
    before = server_rss_mb(server)
    silent = [silent_subscriber(server, long_run) for _ in range(6)]
    try:
        time.sleep(8)  # their streams run until the server's send buffers for them are full
        grown = server_rss_mb(server) - before
        assert grown < 100, f"the server's memory grew {grown:.0f} MB for six subscribers that do not read"
        other = server.client()  # connects and initializes meanwhile
        assert other.request("run/get", {"runId": long_run})["lastSeq"] == LONG_RUN_EVENTS
        assert "time" in other.request("server/ping")
        received, dropped = b"", False
        silent[0].settimeout(30)
        while b'"method": "run/behind"' not in received:  # near the start of what it was sent, or it was dropped
            chunk = silent[0].recv(1 << 16)
            if not chunk:
                dropped = True  # the server closed it (it answered no keepalive ping): also a bound
                break
            received += chunk
            assert len(received) < 4 * 2**20, "no run/behind in the first 4 MiB sent to a subscriber far behind"
        if not dropped:
            assert f'"sentSeq": 0, "latestSeq": {LONG_RUN_EVENTS}'.encode() in received
    finally:
        for sock in silent:
            sock.close()


def test_run_list_and_run_get_of_a_long_log_leave_other_clients_answered(server, long_run):
    results: list[dict] = []
    errors: list[BaseException] = []

    def list_and_get() -> None:
        try:
            client = server.client()
            for _ in range(10):
                listed = client.request("run/list", timeout=120)["runs"]
                results.append(next(run for run in listed if run["runId"] == long_run))
                results.append(client.request("run/get", {"runId": long_run}, timeout=120))
            client.close()
        except BaseException as err:  # noqa: BLE001 - reported by the test's thread below
            errors.append(err)

    listers = [threading.Thread(target=list_and_get) for _ in range(2)]
    for thread in listers:
        thread.start()
    answered_while_listing = 0
    while any(thread.is_alive() for thread in listers):
        fresh = server.client()  # connect and initialize
        assert "time" in fresh.request("server/ping", timeout=30)
        fresh.close()
        answered_while_listing += 1
    for thread in listers:
        thread.join()
    assert not errors, errors
    assert answered_while_listing >= 1
    assert len(results) == 40
    assert all(
        (info["status"], info["step"], info["lastSeq"], info["latestMetrics"]["reward/mean"])
        == ("completed", LONG_RUN_EVENTS, LONG_RUN_EVENTS, pytest.approx((LONG_RUN_EVENTS - 1) * 1e-6))
        for info in results
    )

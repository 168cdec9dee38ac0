"""`agentrl serve` over TLS (wss://): off loopback it refuses plain ws:// unless told it may (--allow-cleartext); with
--tls-self-signed it makes a certificate once, keeps it private in RUNS_DIR/.tls/ and prints the fingerprint it serves;
with --tls-cert/--tls-key it refuses a key others may read off loopback. A client that pins another fingerprint stops
in the TLS handshake, before its token is sent. Servers bound off loopback use this machine's own non-loopback address
(`hostname -I`), and those tests are skipped where it has none; the refusals are also checked at the function level."""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import ssl
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import agentrl
import pytest
from agentrl.cli import doctor
from agentrl.cli.serve import serve_tls, tls_flags_problem
from agentrl.server import tls
from server_harness import Client, ServerProcess

TOKEN = "a-token-of-more-than-16-characters"
FINGERPRINT_LINE = "agentrl serve: TLS certificate SHA-256 fingerprint: "
OTHER_FINGERPRINT = ":".join(["00"] * 32)


def local_address() -> str | None:
    """A non-loopback IPv4 address of this machine that a server can bind, or None."""
    try:
        found = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    for address in found:
        try:
            if ipaddress.ip_address(address).version != 4 or ipaddress.ip_address(address).is_loopback:
                continue
        except ValueError:
            continue
        with socket.socket() as probe:
            try:
                probe.bind((address, 0))
            except OSError:
                continue
        return address
    return None


LOCAL_ADDRESS = local_address()
needs_local_address = pytest.mark.skipif(LOCAL_ADDRESS is None, reason="this machine has no non-loopback address")


class LoggedServer(ServerProcess):
    """A server whose stderr (its log) is read as it comes, so a test sees what it logged while it runs."""

    def __init__(self, runs_dir: Path, *extra: str) -> None:
        super().__init__(runs_dir, *extra)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in iter(self.process.stderr.readline, ""):
            self.lines.append(line.rstrip("\n"))

    def logged(self, text: str) -> list[str]:
        return [line for line in self.lines if text in line]

    def wait_logged(self, text: str, count: int = 1, timeout: float = 10) -> list[str]:
        deadline = time.time() + timeout
        while len(self.logged(text)) < count and time.time() < deadline:
            time.sleep(0.05)
        return self.logged(text)

    def stop(self) -> None:
        super().stop()
        self.reader.join(timeout=10)


def token_file(folder: Path) -> Path:
    path = folder / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


def serve(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agentrl.cli", "serve", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "AGENTRL_TOKEN": TOKEN},
    )


def served_fingerprint(url: str) -> str:
    """The fingerprint of the certificate the server at `url` presents, read with the standard library's ssl."""
    host, port = url.removeprefix("wss://").rsplit(":", 1)
    return tls.fingerprint(ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate((host, int(port)), timeout=10)))


def pinned_client(url: str, fingerprint: str) -> Client:
    return Client(
        url, additional_headers={"Authorization": f"Bearer {TOKEN}"}, ssl=tls.pinned_client_context(fingerprint)
    )


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    proc = LoggedServer(
        folder / "runs", "--tls-self-signed", "--token-file", str(token_file(folder)), "--log-level", "debug"
    )
    yield proc
    proc.stop()


def test_a_self_signed_server_prints_the_fingerprint_of_the_certificate_it_serves(tls_server):
    url, fingerprint = tls_server.url, tls_server.ready["tls_fingerprint"]
    assert url.startswith("wss://127.0.0.1:")
    assert len(fingerprint) == 95 and fingerprint == fingerprint.upper() and fingerprint.count(":") == 31
    assert served_fingerprint(url) == fingerprint
    assert tls_server.wait_logged(FINGERPRINT_LINE) == [FINGERPRINT_LINE + fingerprint]
    folder = tls_server.runs_dir / ".tls"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "key.pem").stat().st_mode) == 0o600
    assert tls.certificate_fingerprint(folder / "cert.pem") == fingerprint
    assert {"localhost", "127.0.0.1"} <= set(tls.certificate_names(folder / "cert.pem"))


def test_a_wss_client_with_the_pinned_fingerprint_and_the_token_connects(tls_server):
    client = pinned_client(tls_server.url, tls_server.ready["tls_fingerprint"])
    try:
        assert "time" in client.request("server/ping")
        assert client.ws.socket.version() in ("TLSv1.2", "TLSv1.3")
    finally:
        client.close()


def test_a_client_pinning_another_fingerprint_stops_before_it_sends_the_token(tls_server):
    opened = len(tls_server.wait_logged("connection open"))
    with pytest.raises(ssl.SSLCertVerificationError, match=f"not the pinned {OTHER_FINGERPRINT}"):
        pinned_client(tls_server.url, OTHER_FINGERPRINT)
    # the server logs every request line and header at debug level: the next client's, and nothing before it
    requests = len(tls_server.logged("< GET "))
    pinned_client(tls_server.url, tls_server.ready["tls_fingerprint"]).close()
    assert len(tls_server.wait_logged("connection open", opened + 1)) == opened + 1
    assert len(tls_server.wait_logged("< GET ", requests + 1)) == requests + 1
    assert not tls_server.logged("rejected a connection")


def test_a_plain_client_without_the_fingerprint_does_not_trust_the_self_signed_certificate(tls_server):
    with pytest.raises(ssl.SSLCertVerificationError):
        Client(tls_server.url, additional_headers={"Authorization": f"Bearer {TOKEN}"})


def test_doctor_checks_a_tls_server_by_the_fingerprint_it_printed(tls_server):
    url, fingerprint = tls_server.url, tls_server.ready["tls_fingerprint"]
    ok = doctor.check_server(url, TOKEN, agentrl.__version__, fingerprint)
    assert ok.status == "ok", ok
    for pinned in (OTHER_FINGERPRINT, None):
        check = doctor.check_server(url, TOKEN, agentrl.__version__, pinned)
        assert check.status == doctor.PROBLEM and "its certificate is not trusted" in check.summary, check
        assert "--tls-fingerprint" in check.fix
    done = subprocess.run(
        [sys.executable, "-m", "agentrl.cli", "doctor", "--tls-fingerprint", fingerprint],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--tls-fingerprint goes with --server wss://" in done.stderr


def test_off_loopback_plain_ws_is_refused_naming_the_ways_to_serve_it(tmp_path):
    done = serve("--host", "0.0.0.0", "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 2 and done.stdout == ""
    assert "refusing to serve 0.0.0.0 in clear text" in done.stderr
    for way in ("--tls-self-signed", "--tls-cert FILE --tls-key FILE", "ssh -N -L", "--allow-cleartext"):
        assert way in done.stderr, way


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--tls-cert", "c.pem"], "--tls-cert and --tls-key go together"),
        (["--tls-key", "k.pem"], "--tls-cert and --tls-key go together"),
        (["--tls-self-signed", "--tls-cert", "c.pem", "--tls-key", "k.pem"], "--tls-self-signed makes a certificate"),
        (["--tls-self-signed", "--allow-cleartext"], "--allow-cleartext serves plain ws://"),
    ],
)
def test_tls_flags_that_do_not_go_together_are_refused(tmp_path, flags, problem):
    done = serve("--runs-dir", str(tmp_path / "runs"), *flags)
    assert done.returncode == 2 and problem in done.stderr and done.stdout == ""
    assert not (tmp_path / "runs").exists(), "refused before anything is made"


def serve_args(*argv: str) -> argparse.Namespace:
    from agentrl.cli.serve import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_the_cleartext_refusal_and_warning_at_the_function_level(tmp_path):
    said: list[str] = []
    for host in ("192.0.2.1", "0.0.0.0", "gpu-box.example"):
        with pytest.raises(ValueError, match=f"refusing to serve {host} in clear text"):
            serve_tls(serve_args("--host", host), tmp_path, said.append)
    assert serve_tls(serve_args("--host", "192.0.2.1", "--allow-cleartext"), tmp_path, said.append) == (None, None)
    assert len(said) == 1 and said[0].startswith("warning: --allow-cleartext: 192.0.2.1 is served as plain ws://")
    for host in ("127.0.0.1", "localhost", "::1"):
        assert serve_tls(serve_args("--host", host), tmp_path, said.append) == (None, None)
    assert len(said) == 1, "plain ws:// on loopback, as the editor's local server, without a word"
    assert tls_flags_problem(serve_args("--tls-self-signed")) is None
    assert not (tmp_path / ".tls").exists()


def test_the_self_signed_certificate_is_kept_and_made_again_only_when_it_cannot_serve(tmp_path):
    folder = tmp_path / "runs" / ".tls"
    cert, key, made = tls.self_signed(folder, "127.0.0.1")
    assert made and stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and stat.S_IMODE(cert.stat().st_mode) == 0o600
    first = tls.certificate_fingerprint(cert)
    assert tls.self_signed(folder, "127.0.0.1")[2] is False and tls.certificate_fingerprint(cert) == first
    assert tls.self_signed(folder, "0.0.0.0")[2] is False, "a wildcard bind keeps the certificate clients pinned"
    assert tls.self_signed(folder, "192.0.2.1")[2] is True, "made again for an address it was not made for"
    assert "192.0.2.1" in tls.certificate_names(cert) and tls.certificate_fingerprint(cert) != first
    other = tls.self_signed(tmp_path / "other", "192.0.2.1")[1]
    key.write_bytes(other.read_bytes())  # a key that is not the certificate's: made again
    assert tls.self_signed(folder, "192.0.2.1")[2] is True
    tls.server_context(cert, key)  # the pair loads


def test_a_key_file_others_may_read_is_refused_off_loopback_and_warned_of_on_loopback(tmp_path):
    cert, key, _ = tls.self_signed(tmp_path / "made", "127.0.0.1")
    key.chmod(0o644)
    flags = ["--tls-cert", str(cert), "--tls-key", str(key)]
    done = serve("--host", "0.0.0.0", "--runs-dir", str(tmp_path / "remote"), *flags)
    assert done.returncode == 2 and done.stdout == ""
    assert "refusing to bind 0.0.0.0: --tls-key" in done.stderr and "(mode 0644)" in done.stderr
    assert f"chmod 600 {key}" in done.stderr
    loopback = LoggedServer(tmp_path / "runs", "--token-file", str(token_file(tmp_path)), *flags)
    try:
        fingerprint = tls.certificate_fingerprint(cert)
        assert loopback.url.startswith("wss://") and loopback.ready["tls_fingerprint"] == fingerprint
        pinned_client(loopback.url, fingerprint).close()
        assert loopback.wait_logged("warning: --tls-key") and loopback.logged(FINGERPRINT_LINE + fingerprint)
    finally:
        loopback.stop()


def test_a_certificate_that_cannot_be_read_is_refused_at_start(tmp_path):
    cert, key, _ = tls.self_signed(tmp_path / "made", "127.0.0.1")
    done = serve("--runs-dir", str(tmp_path / "runs"), "--tls-cert", str(key), "--tls-key", str(key))
    assert done.returncode == 2 and "cannot serve TLS with the certificate" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


@needs_local_address
def test_off_loopback_allow_cleartext_serves_plain_ws_with_a_warning(tmp_path):
    server = LoggedServer(
        tmp_path / "runs", "--host", LOCAL_ADDRESS, "--token-file", str(token_file(tmp_path)), "--allow-cleartext"
    )
    try:
        assert server.url.startswith(f"ws://{LOCAL_ADDRESS}:") and "tls_fingerprint" not in server.ready
        client = Client(server.url, additional_headers={"Authorization": f"Bearer {TOKEN}"})
        assert "time" in client.request("server/ping")
        client.close()
        assert server.wait_logged("warning: --allow-cleartext:")
    finally:
        server.stop()


@needs_local_address
def test_off_loopback_self_signed_serves_wss_for_that_address_and_keeps_its_certificate(tmp_path):
    runs = tmp_path / "runs"
    flags = ["--host", LOCAL_ADDRESS, "--token-file", str(token_file(tmp_path)), "--tls-self-signed"]
    fingerprints = []
    for start in ("made now", "made at an earlier start"):
        server = LoggedServer(runs, *flags)
        try:
            assert server.url.startswith(f"wss://{LOCAL_ADDRESS}:")
            fingerprint = server.ready["tls_fingerprint"]
            assert served_fingerprint(server.url) == fingerprint
            client = pinned_client(server.url, fingerprint)
            assert client.request("run/list")["runs"] == []
            client.close()
            assert server.wait_logged(f"({start}) for {LOCAL_ADDRESS}, localhost, 127.0.0.1")
            fingerprints.append(fingerprint)
        finally:
            server.stop()
    assert fingerprints[0] == fingerprints[1]


def test_the_debug_log_shows_the_request_headers_without_the_token(tls_server):
    pinned_client(tls_server.url, tls_server.ready["tls_fingerprint"]).close()
    assert tls_server.wait_logged("< Authorization: <redacted>")
    assert not tls_server.logged(TOKEN)

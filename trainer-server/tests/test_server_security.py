"""Who may connect, what an upload may contain, and what hostile messages get."""

import base64
import bz2
import io
import json
import os
import random
import stat
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
import yaml
from agentrl.server.protocol import RUN_NOT_FOUND, RpcError
from conftest import EXAMPLE_CONFIG
from server_harness import Client, ServerProcess, example_config, is_final_status
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = ServerProcess(tmp_path_factory.mktemp("srv") / "runs")
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    token_file = tmp_path_factory.mktemp("tok") / "token"
    token_file.write_text("s3cret-token\n")
    proc = ServerProcess(
        tmp_path_factory.mktemp("guarded") / "runs",
        "--token-file",
        str(token_file),
        "--allow-origin",
        "vscode-webview://trusted",
    )
    yield proc
    proc.stop()


def test_a_loopback_server_without_a_token_generates_one_only_its_user_can_read(server):
    token_file = Path(server.ready["token_file"])
    assert token_file == server.runs_dir / ".serve-token" and len(server.token) >= 32
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    with pytest.raises(InvalidStatus) as info:
        connect(server.url, open_timeout=10)  # a local user who cannot read the file cannot connect
    assert info.value.response.status_code == 401
    assert "time" in server.client().request("server/ping")


def serve(*args, env=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "agentrl.cli", "serve", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def test_a_token_on_the_command_line_is_refused_with_where_to_put_it():
    done = serve("--token", "a-long-enough-secret-value")
    assert done.returncode == 2 and "--token puts the token in every local user's process list" in done.stderr
    assert "--token-file FILE" in done.stderr and "AGENTRL_TOKEN" in done.stderr


@pytest.mark.parametrize("token", ["a", "fifteen-chars!!"])
def test_a_short_token_off_loopback_is_refused(tmp_path, token):
    done = serve("--host", "0.0.0.0", "--runs-dir", str(tmp_path), env={"AGENTRL_TOKEN": token})
    assert done.returncode == 2 and f"with a token of {len(token)} characters" in done.stderr
    assert done.stdout == ""


def test_the_token_can_come_from_the_environment(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrl.cli", "serve", "--port", "0", "--runs-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AGENTRL_TOKEN": "from-the-environment-0123"},
    )
    try:
        ready = json.loads(proc.stdout.readline())
        assert "token_file" not in ready and not (tmp_path / ".serve-token").exists()
        client = Client(ready["url"], additional_headers={"Authorization": "Bearer from-the-environment-0123"})
        assert "time" in client.request("server/ping")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_non_loopback_bind_without_token_is_refused():
    done = subprocess.run(
        [sys.executable, "-m", "agentrl.cli", "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "refusing to bind 0.0.0.0 without a token" in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}])
def test_missing_or_wrong_token_is_rejected_before_any_message(guarded, headers):
    with pytest.raises(InvalidStatus) as info:
        connect(guarded.url, additional_headers=headers, open_timeout=10)
    assert info.value.response.status_code == 401


def test_right_token_connects(guarded):
    client = Client(guarded.url, additional_headers={"Authorization": "Bearer s3cret-token"})
    assert "time" in client.request("server/ping")


def test_foreign_origin_is_rejected(server, guarded):
    with pytest.raises(InvalidStatus) as info:
        connect(
            server.url,
            origin="https://evil.example",
            open_timeout=10,
            additional_headers={"Authorization": f"Bearer {server.token}"},
        )
    assert info.value.response.status_code == 403
    ok = Client(
        guarded.url, origin="vscode-webview://trusted", additional_headers={"Authorization": "Bearer s3cret-token"}
    )
    ok.request("server/ping")


def zip_of(entries):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return buffer.getvalue()


def tar_of(add):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        add(archive)
    return buffer.getvalue()


def tar_symlink(archive):
    info = tarfile.TarInfo("link")
    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
    archive.addfile(info)


def tar_hardlink(archive):
    info = tarfile.TarInfo("hard")
    info.type, info.linkname = tarfile.LNKTYPE, "../../outside"
    archive.addfile(info)


def zip_symlink():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("link")
        info.external_attr = 0o120777 << 16
        archive.writestr(info, "/etc/passwd")
    return buffer.getvalue()


def zip_bomb():
    # 300 MiB of zeros compress to a few hundred KiB: over the 256 MiB bundle budget
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("bomb.bin", "w", force_zip64=True) as member:
            chunk = bytes(1 << 20)
            for _ in range(300):
                member.write(chunk)
    return buffer.getvalue()


def zip_lying_header():
    """A member whose header claims 10 bytes but inflates to 10 MiB."""
    data = bytearray(zip_of([("small.txt", bytes(10 * 2**20))]))
    # patch the uncompressed size in the local header (offset 22) and the central directory
    data[22:26] = (10).to_bytes(4, "little")
    central = data.rfind(b"PK\x01\x02")
    data[central + 24 : central + 28] = (10).to_bytes(4, "little")
    return bytes(data)


def zip_patched(name, patch):
    """A one-member zip whose bytes `patch` edits (what zipfile refuses to write)."""
    return patch(bytearray(zip_of([(name, b"print('hi')")])))


def zip_flags(data):
    data[6] |= 0x1  # general-purpose flag bit 0: encrypted, in the local header ...
    central = data.rfind(b"PK\x01\x02")
    data[central + 8] |= 0x1  # ... and in the central directory
    return bytes(data)


def zip_method_99(data):
    data[8:10] = (99).to_bytes(2, "little")
    central = data.rfind(b"PK\x01\x02")
    data[central + 10 : central + 12] = (99).to_bytes(2, "little")
    return bytes(data)


def zip_duplicate():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive, pytest.warns(UserWarning, match="Duplicate name"):
        archive.writestr("env.py", b"first")
        archive.writestr("env.py", b"second")
    return buffer.getvalue()


HOSTILE = {
    "zeros": (bytes(4096), "the archive holds no files"),
    "duplicate": (zip_duplicate(), "'env.py' appears twice"),
    "file and folder": (zip_of([("pkg", b"x"), ("pkg/env.py", b"y")]), "'pkg' is both a file and the folder"),
    "long name": (zip_of([("n" * 300 + ".py", b"x")]), "a name of 303 bytes; at most 255"),
    "deep path": (zip_of([("d/" * 2100 + "x.py", b"x")]), "2101 folder levels; at most 32"),
    "encrypted": (zip_patched("env.py", zip_flags), "'env.py' is encrypted"),
    "method 99": (zip_patched("env.py", zip_method_99), "compression method 99"),
    "NUL in a zip name": (
        zip_patched("envXpy.py", lambda d: bytes(d.replace(b"envXpy", b"env\x00py"))),
        "NUL are not allowed",
    ),
    "dotdot": (zip_of([("../escape.py", b"x")]), "'..' would escape"),
    "nested dotdot": (zip_of([("a/../../escape.py", b"x")]), "'..' would escape"),
    "absolute": (zip_of([("/tmp/abs.py", b"x")]), "absolute paths are not allowed"),
    "tar absolute": (tar_of(lambda a: a.addfile(tarfile.TarInfo("/etc/x"), io.BytesIO(b""))), "absolute paths"),
    "tar symlink": (tar_of(tar_symlink), "links and special files are not allowed"),
    "tar hardlink": (tar_of(tar_hardlink), "links and special files are not allowed"),
    "zip symlink": (zip_symlink(), "links and special files are not allowed"),
    "zip bomb": (zip_bomb(), "bytes uncompressed; at most"),
    "lying header": (zip_lying_header(), "zip archive is corrupt: Bad CRC-32"),
    "10,000 files": (zip_of([(f"f{i}.txt", b"") for i in range(10_000)]), "10000 entries; at most 2000"),
    "not an archive": (b"hello world", "neither a zip nor a tar"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_uploads_are_rejected_and_write_nothing(server, tmp_path, name):
    data, message = HOSTILE[name]
    bundles = server.runs_dir / ".bundles"
    before = sorted(p for p in bundles.rglob("*")) if bundles.exists() else []
    client = server.client()
    response = client.call("env/upload", {"name": name, "archive": base64.b64encode(data).decode()}, timeout=120)
    assert response["error"]["code"] == -32020, response
    assert message in response["error"]["message"]
    after = sorted(p for p in bundles.rglob("*")) if bundles.exists() else []
    assert after == before  # no half bundle, no staging leftovers
    assert not (server.runs_dir.parent / "escape.py").exists() and not os.path.exists("/tmp/abs.py")


def test_a_tar_of_the_current_folder_is_accepted(server, tmp_path):
    """`tar czf env.tgz -C dir .` names its members ./env.py, after a ./ entry for the folder itself."""
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "env.py").write_text("print('hi')\n")
    done = subprocess.run(["tar", "czf", str(tmp_path / "env.tgz"), "-C", str(tmp_path / "env"), "."], check=True)
    assert done.returncode == 0
    data = (tmp_path / "env.tgz").read_bytes()
    result = server.client().request("env/upload", {"name": "env", "archive": base64.b64encode(data).decode()})
    assert result["files"] == 1
    bundle = server.runs_dir / ".bundles" / result["bundleId"]
    assert (bundle / "env.py").read_text() == "print('hi')\n"


def test_a_tar_that_declares_gigabytes_is_rejected_before_it_is_decompressed(tmp_path):
    """The header's size is checked before the next header is read: the member's data is never inflated
    (here it is not even there: the archive ends after the header)."""
    from agentrl.server.bundles import BundleStore

    header = tarfile.TarInfo("huge.bin")
    header.size = 4 * 2**30
    data = bz2.compress(header.tobuf(format=tarfile.GNU_FORMAT))
    with pytest.raises(RpcError, match="'huge.bin' is 4294967296 bytes; at most"):
        BundleStore(tmp_path / "bundles").add(base64.b64encode(data).decode())


def test_the_store_cleans_half_uploads_and_keeps_to_its_quota(tmp_path, monkeypatch):
    from agentrl.server import bundles

    leftover = tmp_path / "bundles" / ".tmp-0123"
    leftover.mkdir(parents=True)
    (leftover / "env.py").write_text("x")
    store = bundles.BundleStore(tmp_path / "bundles")
    assert not leftover.exists()  # a kill -9 mid-upload leaves nothing behind for good
    archive = base64.b64encode(zip_of([("env.py", b"print('hi')")])).decode()
    store.add(archive)
    monkeypatch.setattr(bundles, "MAX_STORE_BYTES", store.stored_bytes())
    with pytest.raises(RpcError, match="bundle store holds 11 bytes, its limit is 11"):
        store.add(base64.b64encode(zip_of([("other.py", b"x")])).decode())


def test_bad_base64_is_rejected(server):
    response = server.client().call("env/upload", {"name": "x", "archive": "not base64!!"})
    assert response["error"]["code"] == -32020 and "not valid base64" in response["error"]["message"]


def test_numbers_and_paths_python_cannot_read_get_their_documented_errors(server):
    from agentrl.run.runstore import RunStore

    RunStore.create(server.runs_dir, "numbers", {}, {"name": "numbers", "mode": "train"})
    client = server.client()
    huge = "9" * 5000
    client.ws.send('{"jsonrpc": "2.0", "id": ' + huge + ', "method": "server/ping"}')
    assert json.loads(client.ws.recv(timeout=10))["error"]["code"] == -32700  # not a closed connection
    client.ws.send(
        '{"jsonrpc": "2.0", "id": 1, "method": "run/subscribe", "params": {"runId": "numbers", "since": ' + huge + "}}"
    )
    assert json.loads(client.ws.recv(timeout=10))["error"]["code"] == -32700
    for cursor in ("²", huge, "-1", ""):
        response = client.call("trajectory/query", {"runId": "numbers", "cursor": cursor})
        assert response["error"]["code"] == -32602 and "invalid cursor" in response["error"]["message"], cursor[:40]
    for trajectory_id, code in (("²-0-0", -32030), ("9" * 30 + "-0-0", -32030), (huge + "-0-0", -32602)):
        response = client.call("trajectory/get", {"runId": "numbers", "ids": [trajectory_id]})
        assert response["error"]["code"] == code, trajectory_id[:40]
    config = example_config()
    config["model"]["path"] = "~no-such-user-here/model"
    response = client.call("run/start", {"config": config})
    assert response["error"]["code"] == -32012 and "model.path" in response["error"]["message"]
    assert "time" in client.request("server/ping")


@pytest.mark.parametrize("header", ["Authorization", "Origin"])
def test_a_repeated_header_is_a_bad_request(server, header):
    value = f"Bearer {server.token}" if header == "Authorization" else "vscode-webview://x"
    token = ("Authorization", f"Bearer {server.token}")
    headers = [(header, value), (header, value)] + ([token] if header == "Origin" else [])
    with pytest.raises(InvalidStatus) as info:
        connect(server.url, additional_headers=headers, open_timeout=10)
    assert info.value.response.status_code == 400


def test_connections_past_the_limit_are_refused_until_one_closes(tmp_path):
    capped = ServerProcess(tmp_path / "runs", "--max-connections", "2")
    try:
        first, second = capped.client(), capped.client()
        with pytest.raises(InvalidStatus) as info:
            connect(capped.url, open_timeout=10, additional_headers={"Authorization": f"Bearer {capped.token}"})
        assert info.value.response.status_code == 503
        assert b"2 connections are open" in info.value.response.body
        first.close()
        deadline = time.time() + 10
        while True:  # the server sees the close a moment later
            try:
                third = capped.client()
                break
            except InvalidStatus:
                assert time.time() < deadline, "a closed connection's slot was never given back"
                time.sleep(0.1)
        assert "time" in third.request("server/ping") and "time" in second.request("server/ping")
    finally:
        capped.stop()


def hostile_messages(rng):
    """At least 1,000 malformed or hostile frames, each with what error code it must get (None: no reply)."""
    yield "{", -32700
    yield "", -32700
    yield "[1, 2", -32700
    yield "[" * 5000 + "]" * 5000, -32700  # nesting deeper than the parser will go
    yield "[]", -32600
    yield '"just a string"', -32600
    yield "42", -32600
    yield "null", -32600
    yield json.dumps({"jsonrpc": "1.0", "id": 1, "method": "server/ping"}), -32600
    yield json.dumps({"jsonrpc": "2.0", "id": {"x": 1}, "method": "server/ping"}), -32600
    yield json.dumps({"jsonrpc": "2.0", "id": 1, "method": 7}), -32600
    yield json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server/ping", "params": [1]}), -32602
    yield json.dumps({"jsonrpc": "2.0", "id": 1, "method": "run/get", "params": {"runId": 5}}), -32602
    yield json.dumps({"jsonrpc": "2.0", "id": 1, "method": "run/get", "params": {"runId": "../../etc/passwd"}}), -32602
    yield json.dumps({"jsonrpc": "2.0", "id": 1, "method": "run/stop", "params": {"runId": "x", "mode": "now"}}), -32602
    yield json.dumps({"jsonrpc": "2.0", "id": 1, "method": "run/get", "params": {"runId": "x" * 5000}}), -32602
    yield json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server/ping", "params": {"a": "x" * (2 * 2**20)}}), -32004
    yield (
        json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "trajectory/query", "params": {"runId": "x", "cursor": "abc"}}
        ),
        -32010,
    )
    alphabet = '{}[]":,0123456789abcdefnulltrue\\ \x00\u2028é'
    methods = ["run/start", "run/get", "nope", "", "__proto__", "initialize", "trajectory/get", "env/check"]
    for i in range(1200):
        kind = i % 4
        if kind == 0:
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60)))
            try:
                json.loads(text)
                continue
            except ValueError:
                yield text, -32700
        elif kind == 1:
            yield json.dumps({"jsonrpc": "2.0", "id": i, "method": f"no/such/{i}"}), -32601
        elif kind == 2:
            junk = rng.choice([1, "x", None, [], {"config": "nope"}, {"runId": None}, {"bundleId": 3}])
            method = rng.choice(methods)
            params = junk if isinstance(junk, dict) else {"value": junk}
            expected = -32601 if method in ("nope", "", "__proto__") else -32602
            if method == "initialize":
                expected = -32602
            yield json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}), expected
        else:
            yield json.dumps({"jsonrpc": "2.0", "method": f"notify/{i}"}), None  # a notification: no reply


def test_fuzz_every_hostile_message_is_answered_and_the_server_stays_up(server):
    client = server.client()
    rng = random.Random(1234)
    sent = answered = 0
    for text, expected in hostile_messages(rng):
        client.ws.send(text)
        sent += 1
        if expected is None:
            continue
        reply = json.loads(client.ws.recv(timeout=30))
        assert reply["jsonrpc"] == "2.0" and reply["error"]["code"] == expected, (text[:200], reply)
        assert reply["error"]["message"]
        answered += 1
    assert sent >= 1000 and answered >= 700
    assert "time" in client.request("server/ping")  # same connection still fine
    assert "time" in server.client().request("server/ping")  # and the server takes new ones


def test_the_same_archive_uploaded_twice_at_once_is_stored_once(tmp_path, monkeypatch):
    """Two connections upload one archive: both extract it, and the second to finish finds the bundle there."""
    from agentrl.server import bundles

    store = bundles.BundleStore(tmp_path / "bundles")
    archive = base64.b64encode(zip_of([("env.py", b"print('hi')")])).decode()
    extract = bundles._extract_zip
    other_upload = []

    def extract_while_the_other_upload_finishes(data, dest):
        files = extract(data, dest)
        if not other_upload:
            other_upload.append("extracting")
            other_upload[0] = store.add(archive)  # the other connection's upload of the same archive, done first
        return files

    monkeypatch.setattr(bundles, "_extract_zip", extract_while_the_other_upload_finishes)
    digest, files = store.add(archive)
    assert (digest, files) == other_upload[0] and files == 1
    assert [p.name for p in (tmp_path / "bundles").iterdir()] == [digest]  # no staging folder left


def test_a_run_id_of_dot_dot_or_a_planted_link_reaches_no_run_outside_the_runs_folder(server, tmp_path):
    """A run.json above the runs folder, and a link in it to a folder elsewhere: no method acts on either. `..` and
    `a/b` break every method's runId schema (invalid params); a link named like a run is never followed (not found)."""
    outside = server.runs_dir.parent
    (outside / "run.json").write_text(json.dumps({"run_id": "..", "created_at": ""}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "run.json").write_text(json.dumps({"run_id": "planted", "created_at": ""}))
    (server.runs_dir / "planted-link").symlink_to(elsewhere, target_is_directory=True)
    client = server.client()
    for method in ("run/get", "run/config", "run/export", "run/resume", "run/subscribe", "trajectory/query"):
        for run_id in ("..", "a/b", "-x", ".hidden"):
            error = client.call(method, {"runId": run_id})["error"]
            assert error["code"] == -32602, (method, run_id, error)  # INVALID_PARAMS, from the schema
        error = client.call(method, {"runId": "planted-link"})["error"]
        assert error["code"] == RUN_NOT_FOUND and "is a link" in error["message"], (method, error)
    assert all(run["runId"] != "planted-link" for run in client.request("run/list")["runs"])


def test_any_run_name_gives_a_run_id_every_method_accepts():
    """Non-ASCII names and names starting with '-' or '.' gave ids the protocol's pattern or the trainer's argument
    parser refused after run/start had answered: every id is now ASCII and starts with a letter or digit."""
    from agentrl.contract.schemas import validator_for
    from agentrl.run.runstore import check_run_id, new_run_id

    stop_params = validator_for("rpc.schema.json", "run/stop.params")
    for name in ("naïve-ünïcode", "名前", "-starts-with-dash", ".hidden", "--", "", "a" * 300, "ok_name-1"):
        run_id = new_run_id(name)
        assert check_run_id(run_id) == run_id and run_id.isascii() and run_id[0].isalnum(), run_id
        stop_params.validate({"runId": run_id, "mode": "graceful"})
    for bad in ("..", "a/b", "-x", "_x", ".x", "naïve", ""):
        with pytest.raises(ValueError, match="not a run id"):
            check_run_id(bad)


def test_the_trainer_refuses_a_run_id_that_is_a_path(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "agentrl.cli", "train", str(EXAMPLE_CONFIG), "--run-id", "../escape"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "--run-id: '../escape' is not a run id" in done.stderr
    assert not (tmp_path.parent / "escape").exists()


def test_a_token_file_other_users_can_read_is_refused_off_loopback_and_warned_of_on_loopback(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("a-long-enough-token-0123456789\n")
    token_file.chmod(0o644)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentrl.cli",
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--token-file",
            str(token_file),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "refusing to bind 0.0.0.0" in done.stderr and "(mode 0644)" in done.stderr
    assert f"chmod 600 {token_file}" in done.stderr and done.stdout == ""
    loopback = ServerProcess(tmp_path / "runs", "--token-file", str(token_file))
    try:
        Client(loopback.url, additional_headers={"Authorization": "Bearer a-long-enough-token-0123456789"})
    finally:
        loopback.stop()
    stderr = loopback.process.stderr.read()
    assert "warning: --token-file" in stderr and "(mode 0644)" in stderr


def test_an_agentrl_planted_in_the_servers_working_folder_never_runs_in_its_children(tmp_path):
    """Runs, checks, exports and re-runs start `python -m agentrl...` where the server was started; `-m` alone puts
    that folder first on the child's import path. Every child is started by one function, which leaves it off."""
    from agentrl.server.children import agentrl_command

    (tmp_path / "agentrl").mkdir()
    (tmp_path / "agentrl" / "__init__.py").write_text('raise SystemExit("PLANTED agentrl ran")\n')
    planted = subprocess.run(
        [sys.executable, "-m", "agentrl.cli", "schema"], cwd=tmp_path, capture_output=True, text=True
    )
    assert "PLANTED agentrl ran" in planted.stderr  # what a child started the old way imported
    child = subprocess.run(agentrl_command("agentrl.cli", "schema"), cwd=tmp_path, capture_output=True, text=True)
    assert child.returncode == 0 and "PLANTED" not in child.stderr and json.loads(child.stdout)["$id"]
    server_sources = (Path(__file__).resolve().parents[1] / "agentrl" / "server").glob("*.py")
    starting_python = sorted(path.name for path in server_sources if "sys.executable" in path.read_text())
    assert starting_python == ["children.py"]


def test_runs_bundles_and_incoming_configs_are_private_to_the_servers_user(tmp_path):
    """Another local user read an MCP server's Authorization header from a run's config.yaml and from .incoming/: the
    server and its runs create everything 0700/0600 (umask 077), and run/config answers with the secrets redacted."""
    server = ServerProcess(tmp_path / "runs")
    try:
        client = server.client()
        run_id = client.request("run/start", {"config": example_config(steps=1)})["runId"]
        client.request("run/subscribe", {"runId": run_id, "since": 0})
        client.events_until(run_id, is_final_status, timeout=300)
    finally:
        server.stop()
    runs = tmp_path / "runs"
    folders = [runs, runs / ".bundles", runs / ".incoming", runs / ".logs", runs / run_id]
    assert {path.name: stat.S_IMODE(path.stat().st_mode) for path in folders} == {p.name: 0o700 for p in folders}
    files = [*(runs / run_id).glob("*.*"), *(runs / ".incoming").iterdir(), *(runs / ".logs").iterdir()]
    assert files and {path.name: stat.S_IMODE(path.stat().st_mode) for path in files} == {p.name: 0o600 for p in files}


def test_run_config_answers_with_credentials_redacted(server):
    run = server.runs_dir / "with-secrets-1"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"run_id": run.name, "created_at": ""}))
    frozen = example_config()
    frozen["env"]["mcp_servers"] = [
        {"name": "web", "url": "https://mcp.example/mcp", "headers": {"Authorization": "Bearer sk-live-123"}},
        {"name": "local", "command": "mcp-server", "env": {"API_KEY": "sk-live-456"}},
    ]
    frozen["logging"] = {"mlflow": {"tracking_uri": "https://user:hunter2@mlflow.example", "experiment": "e"}}
    (run / "config.yaml").write_text(yaml.safe_dump(frozen))
    answer = json.dumps(server.client().request("run/config", {"runId": run.name}))
    assert "sk-live" not in answer and "hunter2" not in answer
    shown = json.loads(answer)["config"]
    assert shown["env"]["mcp_servers"][0]["headers"] == {"Authorization": "<redacted>"}
    assert shown["env"]["mcp_servers"][1]["env"] == {"API_KEY": "<redacted>"}
    assert shown["logging"]["mlflow"]["tracking_uri"] == "https://user:<redacted>@mlflow.example"


def test_a_runs_folder_another_user_may_write_to_or_owns_is_refused(tmp_path):
    from agentrl.server.private import private_folder

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    done = subprocess.run(
        [sys.executable, "-m", "agentrl.cli", "serve", "--port", "0", "--runs-dir", str(shared)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "can be written by other users (mode 0777)" in done.stderr
    readable = tmp_path / "readable"
    readable.mkdir(mode=0o755)
    readable.chmod(0o755)
    assert stat.S_IMODE(private_folder(readable).stat().st_mode) == 0o700  # ours: made private
    if os.getuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)  # nobody
    with pytest.raises(ValueError, match="belongs to another user"):
        private_folder(theirs)


@pytest.mark.parametrize(
    ("prepare", "extra", "reason"),
    [
        (lambda runs: (runs / ".serve-token").mkdir(parents=True), [], "is a folder, where the server writes its"),
        (lambda runs: None, ["--max-connections", "0"], "--max-connections must be at least 1 (got 0)"),
    ],
)
def test_a_server_that_could_not_serve_anyone_says_why_at_start(tmp_path, prepare, extra, reason):
    """A folder at .serve-token gave a start-up traceback; --max-connections 0 started and then refused everyone."""
    runs = tmp_path / "runs"
    prepare(runs)
    done = subprocess.run(
        [sys.executable, "-m", "agentrl.cli", "serve", "--port", "0", "--runs-dir", str(runs), *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and reason in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def _tar_with_extended_header(kind: bytes, declared: int, payload: bytes) -> bytes:
    """A .tar.bz2 whose first header is an extended one (`kind`: GNU long name L, PAX x) declaring `declared` bytes,
    followed by `payload` (a liar declares far more than it holds)."""
    block = bytearray(tarfile.TarInfo("././@LongLink").tobuf(format=tarfile.GNU_FORMAT)[:512])
    block[124:136] = f"{declared:011o}\0".encode()  # size
    block[156:157] = kind  # type flag
    block[148:156] = b" " * 8
    block[148:155] = f"{sum(block):06o}\0".encode()  # checksum over the header with its field as spaces
    return bz2.compress(bytes(block) + payload + b"\0" * 1024)


@pytest.mark.parametrize("kind", [tarfile.GNUTYPE_LONGNAME, tarfile.XHDTYPE])
def test_a_tar_whose_extended_header_declares_a_gigabyte_is_refused_before_it_is_read(tmp_path, kind):
    """A 1,399-byte .tar.bz2 whose long-name header declared 1 GiB cost ~1 GB of memory and 13 s of CPU and was
    answered "neither a zip nor a tar file": the header is refused as soon as it is seen, and the answer says why."""
    from agentrl.server.bundles import MAX_EXTENDED_HEADER_BYTES, BundleStore

    archive = _tar_with_extended_header(kind, 2**30, b"a" * 4096)
    started = time.perf_counter()
    with pytest.raises(RpcError, match=f"header of {2**30} bytes; at most {MAX_EXTENDED_HEADER_BYTES}"):
        BundleStore(tmp_path / "bundles").add(base64.b64encode(archive).decode())
    assert time.perf_counter() - started < 2


def test_a_tar_with_long_paths_in_gnu_and_pax_headers_is_accepted(tmp_path):
    from agentrl.server.bundles import BundleStore

    deep = "/".join(f"folder-with-a-long-name-{i:02d}" for i in range(6)) + "/env.py"  # over ustar's 100 bytes
    for tar_format in (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz", format=tar_format) as archive:
            info = tarfile.TarInfo(deep)
            info.size = 4
            archive.addfile(info, io.BytesIO(b"x=1\n"))
        digest, files = BundleStore(tmp_path / "bundles").add(base64.b64encode(buffer.getvalue()).decode())
        assert files == 1 and (tmp_path / "bundles" / digest / deep).read_text() == "x=1\n"


def test_a_second_server_on_the_same_runs_folder_is_refused_and_the_first_keeps_its_token(tmp_path):
    """A second server on the same runs folder overwrote the first's generated token file, locking its clients out,
    and would have managed the same runs."""
    import subprocess
    import sys

    first = ServerProcess(tmp_path / "runs")
    try:
        token = (tmp_path / "runs" / ".serve-token").read_text()
        second = subprocess.run(
            [sys.executable, "-m", "agentrl.cli", "serve", "--port", "0", "--runs-dir", str(tmp_path / "runs")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2
        assert f"another agentrl serve (pid {first.ready['pid']}) serves" in second.stderr, second.stderr
        assert (tmp_path / "runs" / ".serve-token").read_text() == token
        first.client().request("server/ping")  # its clients still get in
    finally:
        first.stop()
    again = ServerProcess(tmp_path / "runs")  # the lock went with the first server
    again.stop()


def test_concurrent_uploads_never_trip_over_each_others_staging_folders(tmp_path):
    """Concurrent env/upload calls answered -32603 with the server's temporary path (6 of 66): the store's size was
    summed while another upload renamed or removed its staging folder."""
    from concurrent.futures import ThreadPoolExecutor

    from agentrl.server import bundles

    store = bundles.BundleStore(tmp_path / "bundles")
    archives = [
        base64.b64encode(zip_of([(f"env{i}/{k}.py", b"x" * 2000) for k in range(40)])).decode() for i in range(24)
    ]
    with ThreadPoolExecutor(max_workers=8) as pool:
        stored = list(pool.map(store.add, archives))
    assert len({digest for digest, _ in stored}) == 24 and all(files == 40 for _, files in stored)
    assert not list((tmp_path / "bundles").glob(".tmp-*"))

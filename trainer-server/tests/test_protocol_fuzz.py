"""Property-based fuzz of the wire protocol: requests drawn from each method's params schema (its keys, with values
plausible, hostile or of any JSON type) go to a live server that holds one real run. Every request must get an
answer to its id that is either a result valid against the method's result schema or an error with a documented
code and a message, never an internal error; the server must log no traceback and stay responsive."""

import base64
import json

from agentrl.run.trainer import train
from agentrl.server import protocol as p
from agentrl.server.protocol import rpc_schema
from conftest import EXAMPLE_CONFIG
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_harness import ServerProcess
from test_train import example

DOCUMENTED_ERRORS = {
    p.PARSE_ERROR,
    p.INVALID_REQUEST,
    p.METHOD_NOT_FOUND,
    p.INVALID_PARAMS,
    p.NOT_INITIALIZED,
    p.INCOMPATIBLE_PROTOCOL,
    p.MESSAGE_TOO_LARGE,
    p.RUN_NOT_FOUND,
    p.RUN_STATE_CONFLICT,
    p.CONFIG_INVALID,
    p.BUNDLE_REJECTED,
    p.BUNDLE_NOT_FOUND,
    p.TRAJECTORY_NOT_FOUND,
    p.CODE_NOT_ALLOWED,
    p.TOOL_RERUN_FAILED,
}
# server/shutdown would end the server under test, and each valid run/export or episode/reroll loads the model in a
# child process (seconds, one at a time; tests/test_server.py and tests/test_reroll.py attack their params instead); a
# valid mcp/listTools starts whatever program or reaches whatever URL it names, which a fuzzer must not choose
# (tests/test_mcp.py attacks its params instead); a valid run/delete removes the one real run, leaving every later
# request nothing real to reach (tests/test_server.py deletes runs and attacks its params). Everything else is fuzzed,
# state-changing methods included.
UNFUZZED = ("server/shutdown", "run/export", "episode/reroll", "mcp/listTools", "run/delete")
FUZZED_METHODS = [method for method in p.METHODS if method not in UNFUZZED]
FRAMES_PER_EXAMPLE, EXAMPLES = 50, 110

ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
NUMBERS = st.integers(-5, 10**30)
HOSTILE_TEXT = st.sampled_from(["", "../../etc/passwd", "²", "x" * 300, "~nouser/x", "\x00", "run-1", "0" * 5000])


def plausible(key: str, run_id: str, trajectory_id: str) -> st.SearchStrategy:
    """Values near what the key means (real ids among them), or anything."""
    by_key = {
        "runId": st.sampled_from([run_id, "no-such-run"]) | HOSTILE_TEXT,
        "id": st.sampled_from([trajectory_id, f"{run_id}:9:9:9"]) | HOSTILE_TEXT | st.text(max_size=20),
        "trajectoryId": st.sampled_from([trajectory_id, "9-9-9"]) | HOSTILE_TEXT,
        "rerollId": st.sampled_from(["20260101-000000-abcdef"]) | HOSTILE_TEXT,
        "turn": st.integers(-1, 3) | NUMBERS,
        "call": st.integers(-1, 3) | NUMBERS,
        "since": NUMBERS,
        "step": NUMBERS,
        "limit": NUMBERS,
        "episodes": NUMBERS,
        "cursor": NUMBERS.map(str) | HOSTILE_TEXT | st.text(max_size=20),
        "mode": st.sampled_from(["graceful", "immediate", "train", "try", "now", ""]),
        "sort": st.sampled_from(["reward", "-reward", "step", "nope"]) | st.text(max_size=8),
        "status": st.sampled_from(["finished", "error", "truncated", "nope"]),
        "archive": st.binary(max_size=300).map(lambda raw: base64.b64encode(raw).decode()) | st.text(max_size=30),
        "name": HOSTILE_TEXT | st.text(max_size=20),
        "bundleId": HOSTILE_TEXT | st.text(max_size=70),
        "config": st.dictionaries(st.sampled_from(["name", "env", "data", "model", "train"]), ANY_JSON, max_size=4),
        "protocolVersion": st.sampled_from(["2.0", "1.0", "0.1", "2"]) | st.text(max_size=5),
        "path": st.sampled_from(["env.py", "tasks.jsonl", "../config.yaml", "./env.py", "/etc/passwd"]) | HOSTILE_TEXT,
        "code": st.sampled_from(["current", "snapshot", "yesterday"]),
    }
    return by_key.get(key, ANY_JSON) | ANY_JSON


def params_for(method: str, run_id: str, trajectory_id: str) -> st.SearchStrategy:
    keys = rpc_schema()["$defs"][f"{method}.params"].get("properties", {})
    known = st.fixed_dictionaries({}, optional={key: plausible(key, run_id, trajectory_id) for key in keys})
    return st.one_of(
        known,
        known.flatmap(
            lambda params: st.dictionaries(st.text(max_size=8), ANY_JSON, max_size=2).map(
                lambda extra: {**extra, **params}
            )
        ),
    )


def test_schema_driven_fuzz_every_request_gets_a_documented_answer(tmp_path):
    runs_dir = tmp_path / "runs"
    run_dir = train(example("train.steps=1"), runs_dir=runs_dir, config_base_dir=EXAMPLE_CONFIG.parent)
    trajectory_id = json.loads(next((run_dir / "trajectories").glob("*.jsonl")).read_text().splitlines()[0])["id"]
    server = ServerProcess(runs_dir)
    client = server.client()
    counts = {"frames": 0, "results": 0, "errors": 0}

    @settings(
        max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(data=st.data())
    def batch(data):
        for _ in range(FRAMES_PER_EXAMPLE):
            method = data.draw(st.sampled_from(FUZZED_METHODS))
            params = data.draw(params_for(method, run_dir.name, trajectory_id))
            response = client.call(method, params)  # checks the id, and a result against the result schema
            counts["frames"] += 1
            if "result" in response:
                counts["results"] += 1
                continue
            error = response["error"]
            assert error["code"] in DOCUMENTED_ERRORS, (method, params, error)
            assert isinstance(error["message"], str) and error["message"], (method, params, error)
            counts["errors"] += 1

    try:
        batch()
        print(f"schema-driven fuzz: {counts}")
        assert counts["frames"] >= 5000 and counts["results"] > 100 and counts["errors"] > 1000, counts
        assert "time" in client.request("server/ping")
        assert "time" in server.client().request("server/ping")
    finally:
        client.close()
        server.stop()
    log = server.process.stderr.read()
    assert "Traceback" not in log and "internal error" not in log, log[-3000:]

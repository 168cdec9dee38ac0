"""The protocol files agree with themselves and with the server (both languages test these examples)."""

import json
import re

import pytest
from agentrl.contract import schemas
from agentrl.contract.schemas import (
    ACTIVE_RUN_STATUSES,
    ENDED_RUN_STATUSES,
    ERROR_CODES,
    RESUMABLE_RUN_STATUSES,
    RUN_STATUSES,
)
from agentrl.server import protocol
from agentrl.server.app import ServerOptions, TrainerServer
from agentrl.server.protocol import METHODS, rpc_schema, validator_for
from conftest import PROTOCOL
from hypothesis import given, settings
from hypothesis import strategies as st

VALID = json.loads((PROTOCOL / "examples" / "rpc" / "valid.json").read_text())
INVALID = json.loads((PROTOCOL / "examples" / "rpc" / "invalid.json").read_text())


@pytest.mark.parametrize("definition", list(VALID))
def test_valid_examples_validate(definition):
    validator_for(definition).validate(VALID[definition])


@pytest.mark.parametrize("definition", list(INVALID))
def test_invalid_examples_are_rejected(definition):
    assert not validator_for(definition).is_valid(INVALID[definition])


def test_every_method_and_notification_has_its_definitions():
    defs = rpc_schema()["$defs"]
    for method in METHODS:
        assert f"{method}.params" in defs and f"{method}.result" in defs
    for notification in rpc_schema()["x-notifications"]:
        assert f"{notification}.params" in defs


def test_server_handles_exactly_the_specified_and_documented_methods(tmp_path):
    documented = (PROTOCOL / "rpc.md").read_text()
    for method in METHODS:
        assert f"`{method}`" in documented
    server = TrainerServer(ServerOptions("127.0.0.1", 0, tmp_path / "runs", tmp_path / "bundles", None))
    assert set(server.handlers) == set(METHODS)


def test_a_status_event_carries_the_run_info_it_sets_and_no_other_event_does():
    status = {
        "runId": "r",
        "seq": 3,
        "time": 1.0,
        "type": "status",
        "data": {"status": "running", "step": 1, "total_steps": 4},
    }
    run_info = {"status": "running", "step": 1, "totalSteps": 4, "message": None}
    log = {"runId": "r", "seq": 4, "time": 1.0, "type": "log", "data": {"level": "info", "message": "m"}}
    params = validator_for("run/event.params")
    assert params.is_valid({**status, "runInfo": run_info}) and params.is_valid(log)
    assert not params.is_valid(status) and not params.is_valid({**log, "runInfo": run_info})


def test_error_codes_are_declared_in_the_schema_and_each_is_documented_and_named_in_python():
    errors_section = (PROTOCOL / "rpc.md").read_text().split("## Errors", 1)[1].split("\n## ", 1)[0]
    assert {int(code) for code in re.findall(r"`(-32\d{3})`", errors_section)} == set(ERROR_CODES.values())
    for name, code in ERROR_CODES.items():
        assert getattr(protocol, name) == code


def test_the_run_status_sets_split_the_statuses_into_active_and_ended():
    assert ACTIVE_RUN_STATUSES | ENDED_RUN_STATUSES == set(RUN_STATUSES)
    assert not ACTIVE_RUN_STATUSES & ENDED_RUN_STATUSES
    assert RESUMABLE_RUN_STATUSES <= ENDED_RUN_STATUSES


_STATUS = "|".join(RUN_STATUSES)
HAND_COPIES = {
    "an error code": re.compile(r"-32[0-7]\d\d\b"),
    "a set of run statuses": re.compile(rf"""[(\[{{]\s*["']({_STATUS})["']\s*,\s*["']({_STATUS})["']"""),
}


@pytest.mark.parametrize("what", HAND_COPIES)
def test_no_python_source_spells_a_shared_name_set_by_hand(what):
    """Error codes and status sets come from agentrl.contract.schemas (the schema), never from a copy."""
    package = PROTOCOL.parent / "trainer-server" / "agentrl"
    copies = [
        f"{path.relative_to(package)}: {match.group(0)}"
        for path in package.rglob("*.py")
        for match in HAND_COPIES[what].finditer(path.read_text(encoding="utf-8"))
    ]
    assert copies == [], f"{what} written by hand; use agentrl.contract.schemas"


_JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(-3, 3, allow_nan=False),
    st.sampled_from([1.0, 2.5]),
    st.text(max_size=3),
    st.sampled_from(["finished", "truncated", "error", "info", "warning"]),
    st.just([]),
    st.just({}),
)
_VALID_OF_TYPE = {"string": "x", "integer": 2, "number": 0.5, "null": None, "boolean": True}


@pytest.mark.parametrize("event_type", [t for t, check in schemas._FLAT_EVENT_DATA.items() if check is not None])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_fast_check_of_a_flat_event_schema_agrees_with_jsonschema(event_type, data):
    """Events read back are checked by a check derived from their flat schema (2 us, not 100): for valid data whose
    fields are kept, dropped, given other values or joined by another at random, it says valid exactly when
    jsonschema does."""
    validator = schemas._EVENT_DATA[event_type]
    schema = rpc_schema()["$defs"][validator.schema["$ref"].split("/")[-1]]
    valid = {
        name: spec["enum"][0]
        if "enum" in spec
        else _VALID_OF_TYPE[spec["type"] if isinstance(spec["type"], str) else spec["type"][0]]
        for name, spec in schema["properties"].items()
    }
    assert schemas._FLAT_EVENT_DATA[event_type](valid) is None and validator.is_valid(valid)
    payload = {}
    for name in [*valid, "extra"]:
        change = data.draw(st.sampled_from(["keep", "drop", "other"] if name != "extra" else ["drop", "other"]))
        if change != "drop":
            payload[name] = valid[name] if change == "keep" else data.draw(_JSON_VALUES)
    assert (schemas._FLAT_EVENT_DATA[event_type](payload) is None) == validator.is_valid(payload), payload

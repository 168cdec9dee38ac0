"""The protocol files agree with themselves and with the server (both languages test these examples)."""

import json

import pytest

from agentrl.server.app import ServerOptions, TrainerServer
from agentrl.server.protocol import METHODS, rpc_schema, validator_for

from conftest import PROTOCOL

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

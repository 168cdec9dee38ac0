"""The wire contract, read from protocol/schemas/rpc.schema.json (the one source of truth):
protocol version, method names, params schemas, error codes."""

from __future__ import annotations

from typing import Any

import jsonschema

from agentrl.contract import schemas

# Error codes (rpc.schema.json#/$defs/errorCode): JSON-RPC 2.0's own, then the application's.
PARSE_ERROR = schemas.ERROR_CODES["PARSE_ERROR"]
INVALID_REQUEST = schemas.ERROR_CODES["INVALID_REQUEST"]
METHOD_NOT_FOUND = schemas.ERROR_CODES["METHOD_NOT_FOUND"]
INVALID_PARAMS = schemas.ERROR_CODES["INVALID_PARAMS"]
INTERNAL_ERROR = schemas.ERROR_CODES["INTERNAL_ERROR"]
NOT_INITIALIZED = schemas.ERROR_CODES["NOT_INITIALIZED"]
INCOMPATIBLE_PROTOCOL = schemas.ERROR_CODES["INCOMPATIBLE_PROTOCOL"]
MESSAGE_TOO_LARGE = schemas.ERROR_CODES["MESSAGE_TOO_LARGE"]
RUN_NOT_FOUND = schemas.ERROR_CODES["RUN_NOT_FOUND"]
RUN_STATE_CONFLICT = schemas.ERROR_CODES["RUN_STATE_CONFLICT"]
CONFIG_INVALID = schemas.ERROR_CODES["CONFIG_INVALID"]
BUNDLE_REJECTED = schemas.ERROR_CODES["BUNDLE_REJECTED"]
BUNDLE_NOT_FOUND = schemas.ERROR_CODES["BUNDLE_NOT_FOUND"]
TRAJECTORY_NOT_FOUND = schemas.ERROR_CODES["TRAJECTORY_NOT_FOUND"]
CODE_NOT_ALLOWED = schemas.ERROR_CODES["CODE_NOT_ALLOWED"]
TOOL_RERUN_FAILED = schemas.ERROR_CODES["TOOL_RERUN_FAILED"]
MCP_SERVER_UNAVAILABLE = schemas.ERROR_CODES["MCP_SERVER_UNAVAILABLE"]
REROLL_FAILED = schemas.ERROR_CODES["REROLL_FAILED"]


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def rpc_schema() -> dict[str, Any]:
    return schemas.load_schema("rpc.schema.json")


def validator_for(definition: str) -> jsonschema.Draft202012Validator:
    return schemas.validator_for("rpc.schema.json", definition)


PROTOCOL_VERSION: str = rpc_schema()["x-protocolVersion"]
METHODS: tuple[str, ...] = tuple(rpc_schema()["x-methods"])
# The methods that run code on the server's machine: one gate allows or refuses them all (rpc.schema.json's
# $defs/codeRunningMethod says why there is one permission, not one per method).
CODE_RUNNING_METHODS: frozenset[str] = frozenset(rpc_schema()["$defs"]["codeRunningMethod"]["enum"])


def check_params(method: str, params: dict[str, Any]) -> None:
    errors = sorted(validator_for(f"{method}.params").iter_errors(params), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "params"
        raise RpcError(INVALID_PARAMS, f"invalid params for {method}: {where}: {first.message}")

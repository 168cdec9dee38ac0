"""The wire contract, read from protocol/schemas/rpc.schema.json (the one source of truth):
method names, params schemas, error codes."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource

PROTOCOL_VERSION = "1.0"

# JSON-RPC 2.0's own codes
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# Application codes (protocol/rpc.md, "Errors")
NOT_INITIALIZED = -32002
INCOMPATIBLE_PROTOCOL = -32003
MESSAGE_TOO_LARGE = -32004
RUN_NOT_FOUND = -32010
RUN_STATE_CONFLICT = -32011
CONFIG_INVALID = -32012
BUNDLE_REJECTED = -32020
BUNDLE_NOT_FOUND = -32021
TRAJECTORY_NOT_FOUND = -32030


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def _schemas_dir() -> Path:
    # In the repository: protocol/schemas; in an installed wheel: the copy packaged beside this file.
    for candidate in (Path(__file__).resolve().parents[3] / "protocol" / "schemas", Path(__file__).parent / "schemas"):
        if (candidate / "rpc.schema.json").is_file():
            return candidate
    raise FileNotFoundError("protocol/schemas/rpc.schema.json not found")


@cache
def rpc_schema() -> dict[str, Any]:
    return json.loads((_schemas_dir() / "rpc.schema.json").read_text(encoding="utf-8"))


@cache
def registry() -> Registry:
    resources = []
    for path in _schemas_dir().glob("*.schema.json"):
        schema = json.loads(path.read_text(encoding="utf-8"))
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


@cache
def validator_for(definition: str) -> jsonschema.Draft202012Validator:
    schema = rpc_schema()
    if definition not in schema["$defs"]:
        raise KeyError(definition)
    pointer = definition.replace("~", "~0").replace("/", "~1")  # "run/list.params" holds a slash
    return jsonschema.Draft202012Validator({"$ref": f"{schema['$id']}#/$defs/{pointer}"}, registry=registry())


METHODS: tuple[str, ...] = tuple(rpc_schema()["x-methods"])


def check_params(method: str, params: dict[str, Any]) -> None:
    errors = sorted(validator_for(f"{method}.params").iter_errors(params), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "params"
        raise RpcError(INVALID_PARAMS, f"invalid params for {method}: {where}: {first.message}")

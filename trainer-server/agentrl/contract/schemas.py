"""The contract with the editor: the JSON Schemas of protocol/schemas/, found and read once, and the names
declared there that the trainer and the server act on (run statuses and their sets, error codes, health codes). The
extension gets the same names generated from the same files (protocol/generate.mjs), so neither side keeps
a copy; protocol/README.md says which schema holds what."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource


def schemas_dir() -> Path:
    """agentrl/schemas: in the repository a link to protocol/schemas (their one source), in a wheel their copy."""
    folder = Path(__file__).resolve().parents[1] / "schemas"
    if not (folder / "rpc.schema.json").is_file():
        raise FileNotFoundError(f"{folder / 'rpc.schema.json'} not found: this agentrl install lacks the protocol")
    return folder


@cache
def load_schema(name: str) -> dict[str, Any]:
    return json.loads((schemas_dir() / name).read_text(encoding="utf-8"))


@cache
def registry() -> Registry:
    """Every schema by its $id, so a reference from one schema into another resolves."""
    resources = []
    for path in schemas_dir().glob("*.schema.json"):
        schema = load_schema(path.name)
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


@cache
def validator_for(schema_name: str, definition: str) -> jsonschema.Draft202012Validator:
    """A validator for `$defs[definition]` of one schema file (KeyError if it has no such definition)."""
    schema = load_schema(schema_name)
    if definition not in schema["$defs"]:
        raise KeyError(definition)
    pointer = definition.replace("~", "~0").replace("/", "~1")  # "run/list.params" holds a slash
    return jsonschema.Draft202012Validator({"$ref": f"{schema['$id']}#/$defs/{pointer}"}, registry=registry())


_RPC_DEFS = load_schema("rpc.schema.json")["$defs"]
_STATUS_SETS = {name: frozenset(subset["members"]) for name, subset in _RPC_DEFS["runStatus"]["x-subsets"].items()}

RUN_STATUSES: tuple[str, ...] = tuple(_RPC_DEFS["runStatus"]["enum"])
ACTIVE_RUN_STATUSES = _STATUS_SETS["ACTIVE_RUN_STATUSES"]
ENDED_RUN_STATUSES = _STATUS_SETS["ENDED_RUN_STATUSES"]
RESUMABLE_RUN_STATUSES = _STATUS_SETS["RESUMABLE_RUN_STATUSES"]

# What a run id may be (its folder's name): rpc.schema.json's `$defs/runId`, which every method's runId refers to.
RUN_ID_PATTERN: str = _RPC_DEFS["runId"]["pattern"]
RUN_ID_MAX_LENGTH: int = _RPC_DEFS["runId"]["maxLength"]

ERROR_CODES: dict[str, int] = {code["x-name"]: code["const"] for code in _RPC_DEFS["errorCode"]["oneOf"]}

# The codes a `health` event may carry (agentrl/run/health.py has one rule per code) and its severities.
HEALTH_CODES: tuple[str, ...] = tuple(code["const"] for code in _RPC_DEFS["healthCode"]["oneOf"])
HEALTH_SEVERITIES: tuple[str, ...] = tuple(_RPC_DEFS["healthSeverity"]["enum"])

# Each event type's `data` validator, from the members of rpc.schema.json's runEvent (one member per type).
_EVENT_DATA: dict[str, jsonschema.Draft202012Validator] = {
    member["properties"]["type"]["const"]: validator_for(
        "rpc.schema.json", member["properties"]["data"]["$ref"].split("/")[-1]
    )
    for member in _RPC_DEFS["runEvent"]["oneOf"]
}
EVENT_TYPES: tuple[str, ...] = tuple(_EVENT_DATA)


def check_event(event_type: str, data: dict[str, Any]) -> None:
    """Raises ValueError, saying what is wrong, unless `data` is what rpc.schema.json declares for `event_type`.
    Every event the run store appends goes through this (about 0.05 ms): an event the editor could not read
    fails where it is written."""
    validator = _EVENT_DATA.get(event_type)
    if validator is None:
        raise ValueError(
            f"unknown event type {event_type!r}; rpc.schema.json#/$defs/runEvent declares {', '.join(EVENT_TYPES)}"
        )
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        where = "/".join(["data", *map(str, error.absolute_path)])
        raise ValueError(f"a {event_type} event's data breaks rpc.schema.json at {where}: {error.message}")

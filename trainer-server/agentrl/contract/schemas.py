"""The contract with the editor: the JSON Schemas of protocol/schemas/, found and read once, and the names
declared there that the trainer and the server act on (run statuses and their sets, error codes, health codes). The
extension gets the same names generated from the same files (protocol/generate.mjs), so neither side keeps
a copy; protocol/README.md says which schema holds what."""

from __future__ import annotations

import json
from collections.abc import Callable
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


def file_validator(schema_name: str) -> jsonschema.Draft202012Validator:
    """A validator for one schema file as a whole (trajectory.schema.json: a trajectory record)."""
    return jsonschema.Draft202012Validator({"$ref": load_schema(schema_name)["$id"]}, registry=registry())


_RPC_DEFS = load_schema("rpc.schema.json")["$defs"]
_STATUS_SETS = {name: frozenset(subset["members"]) for name, subset in _RPC_DEFS["runStatus"]["x-subsets"].items()}

RUN_STATUSES: tuple[str, ...] = tuple(_RPC_DEFS["runStatus"]["enum"])
ACTIVE_RUN_STATUSES = _STATUS_SETS["ACTIVE_RUN_STATUSES"]
ENDED_RUN_STATUSES = _STATUS_SETS["ENDED_RUN_STATUSES"]
RESUMABLE_RUN_STATUSES = _STATUS_SETS["RESUMABLE_RUN_STATUSES"]
WORKING_RUN_STATUSES = _STATUS_SETS["WORKING_RUN_STATUSES"]
RUN_MODES: tuple[str, ...] = tuple(_RPC_DEFS["runMode"]["enum"])

# What a run id may be (its folder's name): rpc.schema.json's `$defs/runId`, which every method's runId refers to.
RUN_ID_PATTERN: str = _RPC_DEFS["runId"]["pattern"]
RUN_ID_MAX_LENGTH: int = _RPC_DEFS["runId"]["maxLength"]

# What a stored re-roll's id may be (its files' name in RUN/rerolls/): `$defs/rerollId`.
REROLL_ID_PATTERN: str = _RPC_DEFS["rerollId"]["pattern"]

# A check's status in `agentrl doctor` and in `agentrl doctor --gpu`'s rows: doctor.schema.json's checkStatus, whose
# words gpu-check.schema.json's rows repeat (tests/test_gpu_check.py holds them equal).
CHECK_STATUSES: tuple[str, ...] = tuple(load_schema("doctor.schema.json")["$defs"]["checkStatus"]["enum"])

ERROR_CODES: dict[str, int] = {code["x-name"]: code["const"] for code in _RPC_DEFS["errorCode"]["oneOf"]}

# The codes a `health` event may carry (agentrl/run/health_rules.py has one rule per code) and its severities.
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

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "object": (dict,),
    "array": (list,),
}


def _flat_check(schema: dict[str, Any]) -> Callable[[dict[str, Any]], str | None] | None:
    """A fast check equal to the schema's own for a flat object schema (properties with only a type, an enum or a
    const; required; no additional properties): what is wrong, or None. None for any other schema, which jsonschema
    checks. The trajectory event, one per episode and most of a long log, is flat: read back, it costs ~2 us, not
    ~100 us."""
    if set(schema) - {"type", "properties", "required", "additionalProperties", "description"}:
        return None
    if schema.get("type") != "object" or schema.get("additionalProperties", False) is not False:
        return None
    allowed: dict[str, tuple[tuple[type, ...], list[Any] | None]] = {}
    for name, spec in schema.get("properties", {}).items():
        if set(spec) - {"type", "enum", "const", "description"}:
            return None
        names = spec.get("type", [])
        kinds = tuple(k for n in ([names] if isinstance(names, str) else names) for k in _JSON_TYPES[n])
        values = spec["enum"] if "enum" in spec else [spec["const"]] if "const" in spec else None
        allowed[name] = (kinds, values)
    required = schema.get("required", [])

    def check(data: dict[str, Any]) -> str | None:
        for name in required:
            if name not in data:
                return f"data: {name!r} is a required property"
        for name, value in data.items():
            if name not in allowed:
                return f"data: additional property {name!r}"
            kinds, values = allowed[name]
            integral = type(value) is float and value.is_integer() and int in kinds  # 3.0 is an integer in JSON
            if kinds and type(value) not in kinds and not integral:  # a bool is no integer, as in JSON Schema
                return f"data/{name}: {value!r} is not of type {'/'.join(k.__name__ for k in kinds)}"
            if values is not None and value not in values:
                return f"data/{name}: {value!r} is not one of {values}"
        return None

    return check


_FLAT_EVENT_DATA = {
    member["properties"]["type"]["const"]: _flat_check(_RPC_DEFS[member["properties"]["data"]["$ref"].split("/")[-1]])
    for member in _RPC_DEFS["runEvent"]["oneOf"]
}


def check_event(event_type: str, data: dict[str, Any]) -> None:
    """Raises ValueError, saying what is wrong, unless `data` is what rpc.schema.json declares for `event_type`.
    Every event the run store appends goes through this, and every event read back (runstore.parse_event): an
    event the editor could not read fails where it is written, and is skipped where it is read."""
    validator = _EVENT_DATA.get(event_type)
    if validator is None:
        raise ValueError(
            f"unknown event type {event_type!r}; rpc.schema.json#/$defs/runEvent declares {', '.join(EVENT_TYPES)}"
        )
    flat = _FLAT_EVENT_DATA[event_type]
    if flat is not None:
        problem = flat(data) if isinstance(data, dict) else "data: not an object"
        if problem is not None:
            raise ValueError(f"a {event_type} event's data breaks rpc.schema.json at {problem}")
        return
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        where = "/".join(["data", *map(str, error.absolute_path)])
        raise ValueError(f"a {event_type} event's data breaks rpc.schema.json at {where}: {error.message}")

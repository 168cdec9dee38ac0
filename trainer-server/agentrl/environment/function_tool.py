"""`@tool`: a plain Python function (sync or async) as a Tool, as TRL and smolagents take them.

    @tool
    def search(query: str, limit: int = 3) -> list[str]:
        \"\"\"Search the notes.

        Args:
            query: What to look for.
            limit: How many passages to return.
        \"\"\"

    class MyEnv(ToolEnv):
        tools = [search]

The parameters' JSON Schema comes from the type hints (anything pydantic can describe: str, int, float, bool,
Literal, Optional, lists and dicts of those, enums, dataclasses, pydantic models) and the docstring (Google or
NumPy style) gives the description and each argument's. The model's arguments are validated against that schema
(the Tool call path, as for any Tool), then converted to the annotated types (a dataclass argument arrives as
that dataclass). A function whose schema cannot be derived fails when it is decorated, naming the function and
the argument. The decorated object is still callable as the function.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any, get_type_hints

import pydantic
import pydantic_core

from agentrl.environment.tool import Tool

# Google style: "Args:" then "name: text" or "name (type): text"; NumPy style: "Parameters" underlined, then
# "name : type" with the text indented below it. Either section ends at the next section or the docstring's end.
_GOOGLE_ARGS = re.compile(r"^\s*(?:Args|Arguments|Parameters)\s*:\s*$")
_NUMPY_ARGS = re.compile(r"^\s*Parameters\s*$")


def _starts_section(lines: list[str], index: int) -> bool:
    line = lines[index]
    numpy_header = index + 1 < len(lines) and set(lines[index + 1].strip()) == {"-"}
    return bool(re.match(r"^\s*[A-Z][A-Za-z ]*:\s*$", line)) or (numpy_header and bool(line.strip()))


def _docstring_parts(function: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """(description, {argument: description}) from a Google- or NumPy-style docstring."""
    lines = inspect.cleandoc(function.__doc__ or "").splitlines()
    description: list[str] = []
    arguments: dict[str, str] = {}
    index = 0
    while index < len(lines) and not _starts_section(lines, index):
        if lines[index].strip():
            description.append(lines[index].strip())
        index += 1
    current: str | None = None
    numpy = False
    for position, line in enumerate(lines[index:], start=index):
        stripped = line.strip()
        if _GOOGLE_ARGS.match(line):
            numpy, current = False, None
            continue
        if _NUMPY_ARGS.match(line) and position + 1 < len(lines) and set(lines[position + 1].strip()) == {"-"}:
            numpy, current = True, None
            continue
        if set(stripped) == {"-"} or not stripped:
            continue
        if re.match(r"^(Returns?|Raises|Yields|Examples?|Notes?)\s*:?\s*$", stripped):
            current = None
            if not numpy:
                break
            continue
        if numpy:
            header = re.match(r"^(\w+)\s*(?::.*)?$", stripped)
            if header and not line.startswith((" ", "\t")):
                current = header.group(1)
                arguments[current] = ""
            elif current:
                arguments[current] = f"{arguments[current]} {stripped}".strip()
            continue
        entry = re.match(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
        if entry and len(line) - len(line.lstrip()) <= 4:
            current = entry.group(1)
            arguments[current] = entry.group(2).strip()
        elif current:
            arguments[current] = f"{arguments[current]} {stripped}".strip()
    return " ".join(description), arguments


def _without_titles(schema: Any) -> Any:
    """pydantic titles every property after its name; the model reads the name and description instead."""
    if isinstance(schema, dict):
        return {
            key: _without_titles(value)
            for key, value in schema.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(schema, list):
        return [_without_titles(value) for value in schema]
    return schema


def _arguments_model(function: Callable[..., Any]) -> type[pydantic.BaseModel]:
    name = function.__name__
    try:
        hints = get_type_hints(function, include_extras=True)
    except Exception as err:  # an annotation that names something undefined
        raise TypeError(f"@tool {name}: its type hints cannot be read: {err}") from None
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"@tool {name}: argument {parameter.name!r} is *args or **kwargs; name each argument")
        if parameter.name not in hints:
            raise TypeError(f"@tool {name}: argument {parameter.name!r} has no type hint; annotate it")
        default = ... if parameter.default is parameter.empty else parameter.default
        try:
            pydantic.TypeAdapter(hints[parameter.name]).json_schema()
        except Exception as err:
            raise TypeError(
                f"@tool {name}: argument {parameter.name!r} has a type no JSON Schema describes "
                f"({hints[parameter.name]!r}: {str(err).splitlines()[0]})"
            ) from None
        fields[parameter.name] = (hints[parameter.name], default)
    return pydantic.create_model(f"{name}_arguments", **fields)


def _json_result(value: Any) -> Any:
    """Models, dataclasses and enums in a result (at any depth) as JSON values; anything else as it is, so a
    result JSON cannot hold is reported as the Tool's error by the call path."""
    try:
        return pydantic_core.to_jsonable_python(value)
    except pydantic_core.PydanticSerializationError:
        return value


def tool(function: Callable[..., Any] | None = None, *, name: str | None = None, timeout_s: float | None = None) -> Any:
    """`@tool` or `@tool(name=..., timeout_s=...)` on a function: a Tool instance that also calls as the function."""

    def make(function: Callable[..., Any]) -> Tool:
        description, argument_docs = _docstring_parts(function)
        arguments = _arguments_model(function)
        parameters = _without_titles(arguments.model_json_schema())
        for argument, text in argument_docs.items():
            if argument in parameters.get("properties", {}) and text:
                parameters["properties"][argument]["description"] = text
        parameters.setdefault("properties", {})

        def call(**given: Any) -> dict[str, Any]:
            checked = arguments.model_validate(given)
            return {field: getattr(checked, field) for field in arguments.model_fields}

        if inspect.iscoroutinefunction(function):

            async def execute(self: Tool, **given: Any) -> Any:
                return _json_result(await function(**call(**given)))
        else:

            def execute(self: Tool, **given: Any) -> Any:
                return _json_result(function(**call(**given)))

        attributes = {
            "name": name or function.__name__,
            "description": description,
            "parameters": parameters,
            "timeout_s": timeout_s,
            "execute": execute,
            "__call__": lambda self, *args, **kwargs: function(*args, **kwargs),
            "__doc__": function.__doc__,
            "__module__": function.__module__,
        }
        return type(function.__name__, (Tool,), attributes)()

    return make(function) if function is not None else make

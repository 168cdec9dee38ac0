"""@tool: a plain function's JSON Schema from its type hints and docstring, and the call path of any Tool."""

import asyncio
import dataclasses
import enum
from typing import Literal, Optional

import pydantic
import pytest
from agentrl import Tool, tool
from agentrl.environment.tool import ParsedCall, execute_call


@tool
def search(query: str, limit: int = 3, mode: Literal["fast", "exact"] = "fast") -> list[str]:
    """Search the notes.

    Returns the passages that mention the query.

    Args:
        query: What to look for,
            in a few words.
        limit (int): How many passages to return.
        mode: How to match.

    Returns:
        The passages.
    """
    return [f"{mode}:{query}"] * limit


@tool(name="sum_numbers", timeout_s=2)
async def add(numbers: list[float], offset: Optional[float] = None) -> float:  # noqa: UP045 (the form users write)
    """Add numbers.

    Parameters
    ----------
    numbers : list of float
        The numbers to add.
    offset : float, optional
        Added at the end.
    """
    return sum(numbers) + (offset or 0)


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Box(pydantic.BaseModel):
    width: float
    label: str = "box"


@tool
def place(point: Point, colour: Colour, box: Box) -> dict:
    """Place a box."""
    return {"x": point.x, "colour": colour.value, "box": box}


def test_the_schema_comes_from_hints_and_google_docstrings():
    assert isinstance(search, Tool) and search.name == "search"
    assert search.description == "Search the notes. Returns the passages that mention the query."
    assert search.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for, in a few words."},
            "limit": {"type": "integer", "default": 3, "description": "How many passages to return."},
            "mode": {"enum": ["fast", "exact"], "type": "string", "default": "fast", "description": "How to match."},
        },
        "required": ["query"],
    }
    assert search("q", limit=1) == ["fast:q"]  # still callable as the function


def test_numpy_docstrings_optional_arguments_name_and_timeout():
    assert (add.name, add.timeout_s, add.description) == ("sum_numbers", 2, "Add numbers.")
    properties = add.parameters["properties"]
    assert properties["numbers"] == {"type": "array", "items": {"type": "number"}, "description": "The numbers to add."}
    assert properties["offset"]["anyOf"] == [{"type": "number"}, {"type": "null"}]
    assert properties["offset"]["description"] == "Added at the end."
    assert add.parameters["required"] == ["numbers"]


def test_dataclass_enum_and_model_arguments_arrive_as_their_types():
    assert set(place.parameters["$defs"]) == {"Point", "Colour", "Box"}
    assert place.execute(point={"x": 1, "y": 2}, colour="red", box={"width": 2.5}) == {
        "x": 1,
        "colour": "red",
        "box": {"width": 2.5, "label": "box"},  # a model in the result comes back as JSON
    }


def test_calls_go_through_the_tool_path_validation_included():
    def call(tool_, arguments):
        parsed = ParsedCall(id="c", name=tool_.name, arguments=arguments, raw="")
        return asyncio.run(execute_call(parsed, {tool_.name: tool_}, default_timeout_s=5))

    ok = call(add, {"numbers": [1, 2], "offset": 0.5})
    assert (ok.error, ok.result) == (None, 3.5)
    wrong = call(search, {"limit": "many"})
    assert wrong.error_kind == "schema" and "query" in wrong.error


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(x):\n    return x", "@tool f: argument 'x' has no type hint; annotate it"),
        ("def f(*items: int):\n    return items", "@tool f: argument 'items' is *args or **kwargs"),
        ("def f(x: 'Undefined'):\n    return x", "@tool f: its type hints cannot be read"),
        ("class Thing:\n    pass\ndef f(x: Thing):\n    return x", "@tool f: argument 'x' has a type no JSON Schema"),
    ],
)
def test_a_function_whose_schema_cannot_be_derived_fails_when_decorated(source, message):
    scope: dict = {}
    exec(source, scope)
    with pytest.raises(TypeError) as raised:
        tool(scope["f"])
    assert str(raised.value).startswith(message)

"""Tool-call formats: how the model writes a call, how we read it back, how we tell the model.

A format is registered by name so other model families can be added. It parses a turn's text into
calls (plus, when the text was malformed, an error the model sees), describes the tools in the
system message for chat templates that do not render `tools` themselves, and names the text that
closes a call, so generation can stop there (`rollout.stop_at_tool_call`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentrl.environment.tool import ParsedCall


@dataclass
class ParsedTurn:
    calls: list[ParsedCall] = field(default_factory=list)
    error: str | None = None  # a malformed call, described for the model


ToolSchemas = Mapping[str, dict[str, Any]]  # tool name -> its OpenAI-style schema ({"type": "function", ...})


class ToolCallFormat(Protocol):
    name: str
    uses_template_tools: bool  # the chat template's own `tools` rendering describes this format

    def parse(self, text: str, id_prefix: str, tools: ToolSchemas) -> ParsedTurn: ...
    def remove_calls(self, text: str, tools: ToolSchemas) -> str: ...
    def describe(self, tools: ToolSchemas) -> str: ...
    def call_end(self, tools: ToolSchemas) -> list[str]: ...
    def write(self, name: str, arguments: Any, tools: ToolSchemas) -> str: ...
    def opening(self, name: str | None) -> str:
        """How a call begins, up to where the model names the tool (`name` None), or where it writes the arguments
        of a call to `name`: the text an agent's tool_choice forces before the model samples."""
        ...


_FORMATS: dict[str, ToolCallFormat] = {}


def register_format(fmt: ToolCallFormat) -> ToolCallFormat:
    _FORMATS[fmt.name] = fmt
    return fmt


def get_format(name: str) -> ToolCallFormat:
    if name == "auto":
        name = "hermes"  # every template we ship or load renders Hermes-style calls
    try:
        return _FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown tool-call format {name!r}; known: {sorted(_FORMATS)}") from None


def schemas_by_name(tool_schemas: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["function"]["name"]: s for s in tool_schemas}


def _first_error(turn: ParsedTurn) -> ParsedTurn:
    turn.error = next((c.error for c in turn.calls if c.error), turn.error)
    return turn


class HermesFormat:
    """`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, any number per turn (Hermes/Qwen)."""

    name = "hermes"
    uses_template_tools = True
    _BLOCK = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)

    def parse(self, text: str, id_prefix: str, tools: ToolSchemas) -> ParsedTurn:
        turn = ParsedTurn()
        for index, match in enumerate(self._BLOCK.finditer(text)):
            call = self._call_from_json(match.group(1), f"{id_prefix}-{index}")
            if not match.group(2):
                call.error = "unclosed <tool_call>: end each call with </tool_call>"
                call.arguments = None
            turn.calls.append(call)
        if not turn.calls and "</tool_call>" in text:
            turn.error = "found </tool_call> without an opening <tool_call>"
        return _first_error(turn)

    def remove_calls(self, text: str, tools: ToolSchemas) -> str:
        """The text around the calls: an OpenAI-style reply's `content`, beside its `tool_calls`."""
        return self._BLOCK.sub("", text).strip()

    @staticmethod
    def _call_from_json(body: str, call_id: str) -> ParsedCall:
        raw = body.strip()
        try:
            payload = json.loads(raw)
        except json.JSONDecodeError as err:
            return ParsedCall(
                call_id, "", None, raw, error=f"tool call is not valid JSON ({err.msg} at char {err.pos})"
            )
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            return ParsedCall(call_id, "", None, raw, error='tool call must be a JSON object with a string "name"')
        arguments = payload.get("arguments", {})
        if isinstance(arguments, str):  # some models double-encode the arguments
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                pass
        if not isinstance(arguments, dict):
            return ParsedCall(call_id, payload["name"], None, raw, error='"arguments" must be a JSON object')
        return ParsedCall(call_id, payload["name"], arguments, raw)

    def describe(self, tools: ToolSchemas) -> str:
        listing = "\n".join(json.dumps(s, ensure_ascii=False) for s in tools.values())
        return (
            "You can call tools. Available tools (JSON Schema):\n"
            f"<tools>\n{listing}\n</tools>\n"
            "To call a tool, write exactly: "
            '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>\n'
            "Tool results come back in the next message. When you are done, answer without a tool call."
        )

    def call_end(self, tools: ToolSchemas) -> list[str]:
        return ["</tool_call>"]

    def write(self, name: str, arguments: Any, tools: ToolSchemas) -> str:
        """A call as the model writes it: what `parse` reads back as the same call."""
        return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}</tool_call>"

    def opening(self, name: str | None) -> str:
        if name is None:
            return '<tool_call>{"name": "'
        return f'<tool_call>{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": '


class TagFormat:
    """`<NAME>argument</NAME>`, as Search-R1 writes `<search>query</search>`: one tag per tool, whose
    text is the tool's single string parameter. Far easier for a small model than JSON, so small
    models learn tool use from a handful of examples; only tools with one string parameter qualify."""

    name = "tags"
    uses_template_tools = False

    @staticmethod
    def parameter_of(schema: dict[str, Any]) -> str:
        function = schema["function"]
        properties = function.get("parameters", {}).get("properties", {})
        if len(properties) != 1 or next(iter(properties.values())).get("type") != "string":
            raise ValueError(
                f"tool {function['name']!r} cannot be called with tool_format 'tags': it needs "
                f"exactly one string parameter, it has {sorted(properties) or 'none'}"
            )
        return next(iter(properties))

    def parse(self, text: str, id_prefix: str, tools: ToolSchemas) -> ParsedTurn:
        turn = ParsedTurn()
        if not tools:
            return turn
        for index, match in enumerate(self._calls(tools).finditer(text)):
            name, body, closed = match.groups()
            call = ParsedCall(
                f"{id_prefix}-{index}", name, {self.parameter_of(tools[name]): body.strip()}, match.group(0)
            )
            if not closed:
                call.arguments, call.error = None, f"unclosed <{name}>: end the call with </{name}>"
            turn.calls.append(call)
        return _first_error(turn)

    def remove_calls(self, text: str, tools: ToolSchemas) -> str:
        return self._calls(tools).sub("", text).strip() if tools else text.strip()

    @staticmethod
    def _calls(tools: ToolSchemas) -> re.Pattern[str]:
        names = "|".join(re.escape(name) for name in tools)
        return re.compile(rf"<({names})>(.*?)(</\1>|$)", re.DOTALL)

    def describe(self, tools: ToolSchemas) -> str:
        lines = [
            f"<{name}>{self.parameter_of(schema)}</{name}>: {schema['function']['description']}"
            for name, schema in tools.items()
        ]
        return (
            "You can use tools. To use one, write its tag:\n"
            + "\n".join(lines)
            + "\nThe result comes back in the next message."
        )

    def call_end(self, tools: ToolSchemas) -> list[str]:
        return [f"</{name}>" for name in tools]

    def write(self, name: str, arguments: Any, tools: ToolSchemas) -> str:
        """A call as the model writes it: what `parse` reads back as the same call."""
        if name not in tools:
            raise ValueError(f"a call to {name!r}, which is not among the request's tools {sorted(tools)}")
        parameter = self.parameter_of(tools[name])
        if not isinstance(arguments, dict) or set(arguments) != {parameter}:
            raise ValueError(f"a call to {name!r} with tool_format 'tags' takes exactly {{{parameter!r}: text}}")
        return f"<{name}>{arguments[parameter]}</{name}>"

    def opening(self, name: str | None) -> str:
        return "<" if name is None else f"<{name}>"


register_format(HermesFormat())
register_format(TagFormat())

"""Reading tool calls out of an assistant turn, and telling the model how to write them.

Parsers are registered by name so other model families can be added: a parser takes the turn's
text and returns the calls it found plus, when the text was malformed, an error the model sees.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentrl.tool import ParsedCall


@dataclass
class ParsedTurn:
    calls: list[ParsedCall] = field(default_factory=list)
    error: str | None = None  # a malformed call, described for the model


Parser = Callable[[str, str], ParsedTurn]  # (text, call id prefix) -> parsed turn
_PARSERS: dict[str, Parser] = {}


def register_parser(name: str) -> Callable[[Parser], Parser]:
    def decorate(fn: Parser) -> Parser:
        _PARSERS[name] = fn
        return fn

    return decorate


def get_parser(name: str) -> Parser:
    if name == "auto":
        name = "hermes"  # every template we ship or load renders Hermes-style calls
    try:
        return _PARSERS[name]
    except KeyError:
        raise ValueError(f"unknown tool-call format {name!r}; known: {sorted(_PARSERS)}") from None


_HERMES_BLOCK = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)


def _call_from_json(body: str, call_id: str) -> ParsedCall:
    raw = body.strip()
    try:
        payload = json.loads(raw)
    except json.JSONDecodeError as err:
        return ParsedCall(call_id, "", None, raw, error=f"tool call is not valid JSON ({err.msg} at char {err.pos})")
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


@register_parser("hermes")
def parse_hermes(text: str, id_prefix: str) -> ParsedTurn:
    """`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, any number per turn (Hermes/Qwen)."""
    turn = ParsedTurn()
    for index, match in enumerate(_HERMES_BLOCK.finditer(text)):
        call = _call_from_json(match.group(1), f"{id_prefix}-{index}")
        if not match.group(2):
            call.error = "unclosed <tool_call>: end each call with </tool_call>"
            call.arguments = None
        turn.calls.append(call)
        if call.error and turn.error is None:
            turn.error = call.error
    if not turn.calls and "</tool_call>" in text:
        turn.error = "found </tool_call> without an opening <tool_call>"
    return turn


def hermes_system_prompt(tool_schemas: list[dict[str, Any]]) -> str:
    """For chat templates that do not render `tools`: describe them in the system message."""
    listing = "\n".join(json.dumps(s, ensure_ascii=False) for s in tool_schemas)
    return (
        "You can call tools. Available tools (JSON Schema):\n"
        f"<tools>\n{listing}\n</tools>\n"
        "To call a tool, write exactly: "
        '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>\n'
        "Tool results come back in the next message. When you are done, answer without a tool call."
    )

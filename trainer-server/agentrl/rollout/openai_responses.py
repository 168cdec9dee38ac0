"""The OpenAI Responses API (`POST /v1/responses`, the OpenAI Agents SDK's default) at the agent endpoint: a request's
input items read into the chat messages the capture records (so a turn is recorded token-exact whichever API asked
for it), the reply written as a `response` object or, for `stream: true`, as the Responses API's typed events.

Input items: messages (`role` with string content or input_text/output_text parts; developer is system),
`function_call` (an assistant turn's calls, merged into the assistant message before them) and
`function_call_output` (a tool message). `instructions` is the system message. `previous_response_id` continues a
response of the same episode: its conversation, then this input (its instructions are not carried over, as OpenAI
does). Only function tools.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

from agentrl.rollout.agent_capture import ServedReply, message_text
from agentrl.rollout.openai_chat import (
    RUN_DECIDES,
    ChatRequest,
    bad,
    check_common,
    check_tools,
    logprobs_content,
    text_pieces,
)

HONOURED = {
    "input", "instructions", "model", "tools", "tool_choice", "parallel_tool_calls", "temperature", "top_p",
    "max_output_tokens", "previous_response_id", "stream", "store", "include", "agentrl", "user", "metadata", "text",
}  # fmt: skip


def _tool(tool: Any) -> dict[str, Any]:
    """A Responses function tool ({type, name, parameters...}) as chat completions writes it."""
    if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("name"), str):
        kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
        raise bad("tools", f"only function tools are served ({{type: function, name, parameters}}), not {kind!r}")
    function = {k: tool[k] for k in ("name", "description", "parameters") if tool.get(k) is not None}
    return {"type": "function", "function": function}


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, dict) and choice.get("type") == "function" and "function" not in choice:
        return {"type": "function", "function": {"name": choice.get("name")}}
    return choice


def _text(content: Any, where: str) -> str:
    try:
        return message_text(content)
    except ValueError as err:
        raise bad("input", f"{where}: {err}") from None


def input_messages(items: Any) -> list[dict[str, Any]]:
    """Input items as chat messages: consecutive function calls join the assistant message before them."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise bad("input", "input must be a string or a list of input items")
    messages: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        where = f"input[{index}]"
        if kind == "message":
            role = {"developer": "system"}.get(item.get("role"), item.get("role"))
            if role not in ("user", "system", "assistant"):
                raise bad("input", f"{where}: a message's role is user, system, developer or assistant")
            messages.append({"role": role, "content": _text(item.get("content"), where)})
        elif kind == "function_call":
            if not isinstance(item.get("call_id"), str) or not isinstance(item.get("name"), str):
                raise bad("input", f"{where}: a function_call item needs call_id and name")
            call = {"id": item["call_id"], "type": "function", "function": {"name": item["name"]}}
            call["function"]["arguments"] = item.get("arguments", "{}")
            last = messages[-1] if messages else None
            if last is None or last["role"] != "assistant":
                last = {"role": "assistant", "content": None}
                messages.append(last)
            last.setdefault("tool_calls", []).append(call)
        elif kind == "function_call_output":
            if not isinstance(item.get("call_id"), str):
                raise bad("input", f"{where}: a function_call_output item needs the call_id it answers")
            output = item.get("output")
            content = output if isinstance(output, str) else _text(output, where)
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": content})
        else:
            raise bad("input", f"{where}: items of type {kind!r} are not served (message, function_call, "
                      "function_call_output are)", "unsupported_value")  # fmt: skip
    return messages


def parse_responses_request(
    body: Any, earlier: list[dict[str, Any]] | None
) -> tuple[ChatRequest, list[dict[str, Any]]]:
    """A Responses request as a ChatRequest, and its conversation without the instructions (what a later
    previous_response_id continues: OpenAI does not carry instructions over); `earlier`: the conversation of its
    previous_response_id, if any."""
    if not isinstance(body, dict):
        raise bad("body", "the request body must be a JSON object", "invalid_json")
    if "input" not in body:
        raise bad("input", "input is required: a string or a list of input items")
    conversation = [*(earlier or []), *input_messages(body["input"])]
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise bad("instructions", "instructions must be a string")
    messages = [{"role": "system", "content": instructions}, *conversation] if instructions else conversation
    if not messages:
        raise bad("input", "input holds no message for the model to answer")
    raw_tools = body.get("tools") or []
    if not isinstance(raw_tools, list):
        raise bad("tools", "tools must be a list of function tools")
    tools = [_tool(t) for t in raw_tools]
    tool_choice = _tool_choice(body.get("tool_choice") or "auto")
    check_tools(tools, tool_choice)
    max_tokens = body.get("max_output_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise bad("max_output_tokens", f"max_output_tokens must be a positive integer, got {max_tokens!r}")
    text_format = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    request = ChatRequest(
        messages=messages, tools=tools, tool_choice=tool_choice, max_tokens=max_tokens,
        logprobs="message.output_text.logprobs" in (body.get("include") or []),
        ignored=sorted(set(body) - HONOURED - set(RUN_DECIDES)),
    )  # fmt: skip
    request = check_common(body, request)
    if text_format and text_format.get("type") != "text":
        request.overridden["text.format"] = text_format  # not constrained: see docs/environments.md
    return request, conversation


class ResponseWriter:
    """One reply as a Responses `response` object and as its stream of events; `id` names it for a later
    request's previous_response_id."""

    def __init__(self, model: str, reply: ServedReply, request: ChatRequest, agentrl: dict[str, Any]) -> None:
        self.model, self.reply, self.request, self.agentrl = model, reply, request, agentrl
        self.id = f"resp_{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.message_id = f"msg_{uuid.uuid4().hex}"
        self.call_ids = [f"fc_{uuid.uuid4().hex}" for _ in reply.message.get("tool_calls", [])]

    def _message_item(self, status: str, text: str | None) -> dict[str, Any]:
        content = [] if text is None else [self._part(text)]
        return {"type": "message", "id": self.message_id, "status": status, "role": "assistant", "content": content}

    def _part(self, text: str) -> dict[str, Any]:
        logprobs = logprobs_content(self.reply) if self.request.logprobs else []
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs}

    def _call_item(self, index: int, status: str, arguments: str | None = None) -> dict[str, Any]:
        call = self.reply.message["tool_calls"][index]
        function = call["function"]
        return {
            "type": "function_call", "id": self.call_ids[index], "call_id": call["id"], "name": function["name"],
            "arguments": function["arguments"] if arguments is None else arguments, "status": status,
        }  # fmt: skip

    def output(self) -> list[dict[str, Any]]:
        text = self.reply.message.get("content")
        items = [self._message_item("completed", text)] if text else []
        return items + [self._call_item(i, "completed") for i in range(len(self.call_ids))]

    def response(self, status: str = "completed") -> dict[str, Any]:
        done = status == "completed"
        incomplete = done and self.reply.finish_reason == "length"
        request = self.request
        return {
            "id": self.id, "object": "response", "created_at": self.created, "model": self.model,
            "status": "incomplete" if incomplete else status,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "error": None, "instructions": None, "metadata": {}, "output": self.output() if done else [],
            "parallel_tool_calls": request.parallel_tool_calls, "tool_choice": request.tool_choice,
            "tools": [{"type": "function", **t["function"]} for t in request.tools],
            "temperature": request.temperature, "top_p": request.top_p, "max_output_tokens": request.max_tokens,
            "previous_response_id": None, "text": {"format": {"type": "text"}}, "truncation": "disabled",
            "usage": self.usage() if done else None, "agentrl": self.agentrl,
        }  # fmt: skip

    def usage(self) -> dict[str, Any]:
        reply = self.reply
        return {
            "input_tokens": reply.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reply.completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        }  # fmt: skip

    def events(self) -> Iterator[dict[str, Any]]:
        """The Responses API's stream: created, in_progress, each output item added / its deltas / done, then
        completed (or incomplete), each with its sequence_number."""
        sequence = 0

        def event(kind: str, **fields: Any) -> dict[str, Any]:
            nonlocal sequence
            sequence += 1
            return {"type": kind, "sequence_number": sequence - 1, **fields}

        yield event("response.created", response=self.response("in_progress"))
        yield event("response.in_progress", response=self.response("in_progress"))
        index = 0
        text = self.reply.message.get("content")
        if text:
            yield event("response.output_item.added", output_index=0, item=self._message_item("in_progress", None))
            at = {"item_id": self.message_id, "output_index": 0, "content_index": 0}
            yield event("response.content_part.added", **at, part=self._part(""))
            for piece in text_pieces(text):
                yield event("response.output_text.delta", **at, delta=piece, logprobs=[])
            yield event("response.output_text.done", **at, text=text, logprobs=self._part(text)["logprobs"])
            yield event("response.content_part.done", **at, part=self._part(text))
            yield event("response.output_item.done", output_index=0, item=self._message_item("completed", text))
            index = 1
        for call in range(len(self.call_ids)):
            item = self._call_item(call, "in_progress", "")
            at = {"item_id": self.call_ids[call], "output_index": index}
            yield event("response.output_item.added", output_index=index, item=item)
            arguments = self.reply.message["tool_calls"][call]["function"]["arguments"]
            yield event("response.function_call_arguments.delta", **at, delta=arguments)
            yield event("response.function_call_arguments.done", **at, arguments=arguments, name=item["name"])
            yield event("response.output_item.done", output_index=index, item=self._call_item(call, "completed"))
            index += 1
        final = self.response()
        yield event(f"response.{final['status']}", response=final)

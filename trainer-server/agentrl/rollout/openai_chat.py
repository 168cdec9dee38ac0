"""The OpenAI chat-completions API's shapes at the agent endpoint: a request read into a `ChatRequest`, a reply
written as a `chat.completion` object or, for `stream: true`, as the server-sent `chat.completion.chunk` events
OpenAI streams (role chunk, content deltas, tool-call deltas by index, finish_reason, the usage chunk that
`stream_options.include_usage` asks for, `[DONE]`).

What the endpoint honours, what the run bounds and what it ignores (docs/environments.md, "What the endpoint
honours"): the reply's `agentrl` field lists the last two, so a framework's setting never fails silently.
"""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agentrl.rollout.agent_capture import ServedReply


class EndpointError(Exception):
    """A request the endpoint refuses: an HTTP status and an OpenAI-style error."""

    def __init__(self, status: int, message: str, code: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param

    def body(self) -> dict[str, Any]:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        if self.status == 401:
            kind = "authentication_error"
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}


@dataclass
class ChatRequest:
    """One request for a turn, whichever API it came through (chat completions or Responses)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: str | dict[str, Any] = "auto"  # "auto", "none", "required" or {"type": "function", ...}
    parallel_tool_calls: bool = True
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)
    logprobs: bool = False
    process_reward: float | None = None  # agentrl's own field: a reward for the turn answered last
    agent: str | None = None  # agentrl's own field: which agent asks, where several share the policy
    # Settings the run decides instead (seed, response_format, penalties): {name: what was asked}.
    overridden: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)  # parameters the endpoint does not know, named in the reply

    @property
    def forced_tool(self) -> str | None:
        """The function a named tool_choice forces, if any."""
        if isinstance(self.tool_choice, dict):
            named = self.tool_choice.get("function", self.tool_choice)
            return named.get("name") if isinstance(named, dict) else None
        return None

    @property
    def text_length(self) -> int:
        """Characters in the messages and tools: bounded before anything is tokenized."""
        return len(json.dumps(self.messages, ensure_ascii=False)) + len(json.dumps(self.tools, ensure_ascii=False))


# Parameters of the chat-completions API that the endpoint reads (HONOURED) or answers with the run's own setting
# (RUN_DECIDES); any other is ignored and named in the reply.
HONOURED = {
    "messages", "model", "tools", "tool_choice", "parallel_tool_calls", "temperature", "top_p", "max_tokens",
    "max_completion_tokens", "stop", "n", "stream", "stream_options", "logprobs", "top_logprobs", "agentrl", "user",
}  # fmt: skip
RUN_DECIDES = ("seed", "response_format", "frequency_penalty", "presence_penalty", "logit_bias")
NEUTRAL = {"frequency_penalty": 0, "presence_penalty": 0, "logit_bias": {}, "response_format": {"type": "text"}}


def bad(param: str, message: str, code: str = "invalid_value") -> EndpointError:
    return EndpointError(400, message, code, param)


def _number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise bad(key, f"{key} must be a number from {low:g} to {high:g}, got {value!r}")
    return float(value)


def check_tools(tools: Any, tool_choice: Any) -> None:
    """Chat-completions tools and tool_choice, checked; a named choice must name one of the tools."""
    if not isinstance(tools, list) or not all(
        isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function", {}).get("name"), str)
        for t in tools
    ):
        raise bad("tools", 'tools must be a list of {"type": "function", "function": {"name": ..., ...}}')
    named = isinstance(tool_choice, dict) and isinstance(tool_choice.get("function", {}).get("name"), str)
    if tool_choice not in ("auto", "none", "required") and not named:
        raise bad("tool_choice", 'tool_choice must be "auto", "none", "required" or {"type": "function", ...}')
    if tool_choice == "required" and not tools:
        raise bad("tool_choice", 'tool_choice "required" needs tools')
    if named and tool_choice["function"]["name"] not in {t["function"]["name"] for t in tools}:
        raise bad("tool_choice", f"tool_choice names {tool_choice['function']['name']!r}, which is not in tools")


def check_common(body: dict[str, Any], request: ChatRequest) -> ChatRequest:
    """The parameters both APIs share: n, sampling, logprobs, agentrl's process reward, what the run decides."""
    if body.get("n", 1) not in (1, None):
        raise bad(
            "n",
            f"n must be 1, got {body['n']!r}: each request is one turn of one episode "
            "(rollout.group_size runs the agent several times instead)",
            "unsupported_value",
        )
    request.temperature = _number(body, "temperature", 0.0, 2.0)
    request.top_p = _number(body, "top_p", 0.0, 1.0)
    if not isinstance(body.get("parallel_tool_calls", True), bool):
        raise bad("parallel_tool_calls", "parallel_tool_calls must be true or false")
    request.parallel_tool_calls = body.get("parallel_tool_calls", True)
    top = body.get("top_logprobs")
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= 20):
        raise bad("top_logprobs", f"top_logprobs must be an integer from 0 to 20, got {top!r}")
    if top:
        request.overridden["top_logprobs"] = top  # only the sampled token's logprob is kept
    reported = body.get("agentrl") or {}
    if not isinstance(reported, dict):
        raise bad("agentrl", 'agentrl must be an object, e.g. {"process_reward": 0.5}')
    process_reward = reported.get("process_reward")
    if process_reward is not None and (
        isinstance(process_reward, bool)
        or not isinstance(process_reward, int | float)
        or not math.isfinite(process_reward)
    ):
        raise bad("agentrl.process_reward", f"agentrl.process_reward must be a finite number, got {process_reward!r}")
    request.process_reward = None if process_reward is None else float(process_reward)
    agent = reported.get("agent")
    if agent is not None and (not isinstance(agent, str) or not 0 < len(agent) <= 200):
        raise bad("agentrl.agent", f"agentrl.agent must be an agent's name (1-200 characters), got {agent!r}")
    request.agent = agent
    for name in RUN_DECIDES:
        if body.get(name) is not None and body[name] != NEUTRAL.get(name):
            request.overridden[name] = body[name]
    return request


def parse_chat_request(body: Any) -> ChatRequest:
    """A chat-completions request, checked as the OpenAI API checks it; an EndpointError (400) names the parameter
    at fault."""
    if not isinstance(body, dict):
        raise bad("body", "the request body must be a JSON object", "invalid_json")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise bad("messages", "messages must be a non-empty list of message objects")
    tools = body.get("tools") or []
    tool_choice = body.get("tool_choice") or "auto"
    check_tools(tools, tool_choice)
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise bad("max_tokens", f"max_tokens must be a positive integer, got {max_tokens!r}")
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise bad("stop", "stop must be a string or a list of non-empty strings")
    if not isinstance(body.get("logprobs", False), bool):
        raise bad("logprobs", "logprobs must be true or false")
    if body.get("stream_options") is not None and not isinstance(body["stream_options"], dict):
        raise bad("stream_options", 'stream_options must be an object, e.g. {"include_usage": true}')
    request = ChatRequest(
        messages=messages, tools=tools, tool_choice=tool_choice, max_tokens=max_tokens, stop=stop,
        logprobs=body.get("logprobs", False),
        ignored=sorted(set(body) - HONOURED - set(RUN_DECIDES)),
    )  # fmt: skip
    return check_common(body, request)


def notes(episode_id: str, request: ChatRequest, bounded: dict[str, Any]) -> dict[str, Any]:
    """The reply's `agentrl` field: the episode, each setting the run decided instead of the request, and the
    parameters ignored."""
    decided = {name: {"requested": asked, "used": "the run's"} for name, asked in request.overridden.items()}
    return {"episode": episode_id, "bounded": {**decided, **bounded}, "ignored": request.ignored}


def logprobs_content(reply: ServedReply) -> list[dict[str, Any]]:
    """OpenAI's `logprobs.content`: each sampled token's text and logprob (no alternatives are kept)."""
    return [
        {"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": []}
        for token, logprob in reply.token_logprobs
    ]


def completion_object(model: str, reply: ServedReply, request: ChatRequest, agentrl: dict[str, Any]) -> dict[str, Any]:
    """A `chat.completion` object, as the OpenAI API returns it, with the endpoint's own notes under `agentrl`."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {**reply.message, "refusal": None},
                "finish_reason": reply.finish_reason,
                "logprobs": {"content": logprobs_content(reply), "refusal": None} if request.logprobs else None,
            }
        ],
        "usage": usage(reply),
        "agentrl": agentrl,
    }


def usage(reply: ServedReply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def text_pieces(text: str) -> list[str]:
    """Text as a stream delivers it: a word (with the space after it) at a time."""
    return re.findall(r"\s*\S+\s*|\s+", text)


def completion_chunks(
    model: str, reply: ServedReply, request: ChatRequest, agentrl: dict[str, Any], include_usage: bool
) -> Iterator[dict[str, Any]]:
    """The reply as OpenAI streams it: `chat.completion.chunk` objects, each a `data:` event (then `[DONE]`). The
    turn is sampled whole first; what a client assembles from the deltas is the reply, and the recorded tokens
    are the sampled ones either way."""
    base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk", "created": int(time.time())}
    base["model"] = model
    usage_field = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": extra.pop("logprobs", None), "finish_reason": finish}
        return {**base, "choices": [choice], **usage_field, **extra}

    content = reply.message.get("content") or ""
    logprobs = {"content": logprobs_content(reply), "refusal": None} if request.logprobs else None
    yield chunk({"role": "assistant", "content": "", "refusal": None}, logprobs=logprobs)
    for piece in text_pieces(content):
        yield chunk({"content": piece})
    for index, call in enumerate(reply.message.get("tool_calls", [])):
        name = {"name": call["function"]["name"], "arguments": ""}
        yield chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function", "function": name}]})
        arguments = call["function"]["arguments"]
        yield chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments}}]})
    yield chunk({}, reply.finish_reason, agentrl=agentrl)
    if include_usage:
        yield {**base, "choices": [], "usage": usage(reply)}

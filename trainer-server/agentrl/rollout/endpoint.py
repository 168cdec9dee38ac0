"""The OpenAI-compatible endpoint an agent's own code calls during rollouts (run config `agent:`).

A loopback-only HTTP server (aiohttp, in a thread of its own) that serves each episode at its own base URL, so
concurrent episodes cannot be mixed up:

    POST /episodes/<episode-id>/v1/chat/completions
    GET  /episodes/<episode-id>/v1/models

A request names messages, tools, tool_choice, temperature, top_p, max_tokens (or max_completion_tokens), stop and
n = 1; streaming is refused. Its own field `agentrl: {"process_reward": x}` (the OpenAI SDK's `extra_body`) gives
the turn answered last a process reward. The reply is a standard `chat.completion` object; its `agentrl` field names the episode
and says where the run's sampling settings bounded what the request asked (`bounded`). An unknown episode, or one
whose agent has ended, gets a 4xx error in the OpenAI error shape. What answering means (sampling, recording the
tokens) is the episode handler's (agent_engine.py); this module is HTTP and the OpenAI API's shapes only.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web

from agentrl.rollout.agent_capture import ServedReply

# An agent's conversation can be long, but a request is text: 64 MiB bounds a runaway one.
MAX_REQUEST_BYTES = 64 * 2**20


class EndpointError(Exception):
    """A request the endpoint refuses: an HTTP status and an OpenAI-style error."""

    def __init__(self, status: int, message: str, code: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param

    def body(self) -> dict[str, Any]:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}


@dataclass
class ChatRequest:
    """The parts of a chat-completion request the endpoint honours (it ignores the rest: model, user, seed...)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: str | dict[str, Any] = "auto"
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)
    process_reward: float | None = None  # agentrl's own field: a reward for the turn answered last


class EpisodeHandler(Protocol):
    async def complete(self, request: ChatRequest) -> tuple[ServedReply, dict[str, Any]]:
        """The reply, and for each setting the run bounded, {"requested": ..., "used": ...}. Raises EndpointError."""
        ...


def _bad(param: str, message: str, code: str = "invalid_value") -> EndpointError:
    return EndpointError(400, message, code, param)


def _number(body: dict[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise _bad(key, f"{key} must be a number from {low:g} to {high:g}, got {value!r}")
    return float(value)


def parse_request(body: Any) -> ChatRequest:
    """The request, checked as the OpenAI API checks it; an EndpointError (400) names the parameter at fault."""
    if not isinstance(body, dict):
        raise _bad("body", "the request body must be a JSON object", "invalid_json")
    if body.get("stream"):
        raise _bad(
            "stream", "stream: true is not supported by the agentrl endpoint; send stream: false", "unsupported_value"
        )
    if body.get("n", 1) not in (1, None):
        raise _bad(
            "n",
            f"n must be 1, got {body['n']!r}: each request is one turn of one episode "
            "(rollout.group_size runs the agent several times instead)",
            "unsupported_value",
        )
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise _bad("messages", "messages must be a non-empty list of message objects")
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(
        isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function", {}).get("name"), str)
        for t in tools
    ):
        raise _bad("tools", 'tools must be a list of {"type": "function", "function": {"name": ..., ...}}')
    tool_choice = body.get("tool_choice") or "auto"
    named = isinstance(tool_choice, dict) and isinstance(tool_choice.get("function", {}).get("name"), str)
    if tool_choice not in ("auto", "none", "required") and not named:
        raise _bad("tool_choice", 'tool_choice must be "auto", "none", "required" or {"type": "function", ...}')
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise _bad("max_tokens", f"max_tokens must be a positive integer, got {max_tokens!r}")
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise _bad("stop", "stop must be a string or a list of non-empty strings")
    reported = body.get("agentrl") or {}
    if not isinstance(reported, dict):
        raise _bad("agentrl", 'agentrl must be an object, e.g. {"process_reward": 0.5}')
    process_reward = reported.get("process_reward")
    if process_reward is not None and (
        isinstance(process_reward, bool)
        or not isinstance(process_reward, int | float)
        or not math.isfinite(process_reward)
    ):
        raise _bad("agentrl.process_reward", f"agentrl.process_reward must be a finite number, got {process_reward!r}")
    return ChatRequest(
        messages=messages,
        tools=tools,
        tool_choice=tool_choice,
        temperature=_number(body, "temperature", 0.0, 2.0),
        top_p=_number(body, "top_p", 0.0, 1.0),
        max_tokens=max_tokens,
        stop=stop,
        process_reward=None if process_reward is None else float(process_reward),
    )


def completion_object(episode_id: str, model: str, reply: ServedReply, bounded: dict[str, Any]) -> dict[str, Any]:
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
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
        "agentrl": {"episode": episode_id, "bounded": bounded},
    }


class AgentEndpoint:
    """The server: `open(episode_id, handler)` gives an episode its base URL, `close_episode` ends it (its later
    requests get 410), `close` stops the server."""

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        self._handlers: dict[str, EpisodeHandler] = {}
        self._ended: set[str] = set()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self.port = 0
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), name="agent-endpoint", daemon=True)
        self._thread.start()
        ready.wait()
        if self._runner is None:
            raise RuntimeError("the agent endpoint could not start: see the traceback above")

    def base_url(self, episode_id: str) -> str:
        return f"http://127.0.0.1:{self.port}/episodes/{episode_id}/v1"

    def open(self, episode_id: str, handler: EpisodeHandler) -> str:
        with self._lock:
            self._handlers[episode_id] = handler
        return self.base_url(episode_id)

    def close_episode(self, episode_id: str) -> None:
        with self._lock:
            if self._handlers.pop(episode_id, None) is not None:
                self._ended.add(episode_id)

    def close(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_post("/episodes/{episode}/v1/chat/completions", self._chat)
        app.router.add_get("/episodes/{episode}/v1/models", self._models)
        runner = web.AppRunner(app, access_log=None)
        try:
            self._loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)  # loopback only: the agent runs on this machine
            self._loop.run_until_complete(site.start())
            self.port = runner.addresses[0][1]
            self._runner = runner
        finally:
            ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())
        self._loop.close()

    def _handler(self, episode_id: str) -> EpisodeHandler:
        with self._lock:
            handler = self._handlers.get(episode_id)
            ended = episode_id in self._ended
        if handler is not None:
            return handler
        if ended:
            raise EndpointError(
                410, f"episode {episode_id} has ended: its agent returned or ran out of time", "episode_ended"
            )
        raise EndpointError(404, f"no episode {episode_id} is running at this endpoint", "episode_not_found")

    async def _chat(self, request: web.Request) -> web.Response:
        episode_id = request.match_info["episode"]
        try:
            handler = self._handler(episode_id)
            try:
                body = await request.json()
            except ValueError:
                raise _bad("body", "the request body is not JSON", "invalid_json") from None
            reply, bounded = await handler.complete(parse_request(body))
            return web.json_response(completion_object(episode_id, self.model_name, reply, bounded))
        except EndpointError as err:
            return web.json_response(err.body(), status=err.status)
        except Exception as err:  # noqa: BLE001 - the agent gets a reply it can read; the run goes on
            failure = EndpointError(500, f"the endpoint failed: {type(err).__name__}: {err}", "internal_error")
            return web.json_response(failure.body(), status=500)

    async def _models(self, request: web.Request) -> web.Response:
        try:
            self._handler(request.match_info["episode"])
        except EndpointError as err:
            return web.json_response(err.body(), status=err.status)
        model = {"id": self.model_name, "object": "model", "created": 0, "owned_by": "agentrl"}
        return web.json_response({"object": "list", "data": [model]})

"""The OpenAI-compatible endpoint an agent's own code calls during rollouts (run config `agent:`).

A loopback-only HTTP server (aiohttp, in a thread of its own) that serves each episode at its own base URL, so
concurrent episodes cannot be mixed up:

    POST /episodes/<episode-id>/v1/chat/completions   (openai_chat.py; stream: true as server-sent events)
    POST /episodes/<episode-id>/v1/responses          (openai_responses.py; the Responses API)
    GET  /episodes/<episode-id>/v1/models

Every request carries the episode's key, `Authorization: Bearer <key>` (what every OpenAI client sends as its
api_key): the trainer gives it only to that episode's agent, and a request without it is refused before anything is
read or recorded. An unknown episode, or one whose agent has ended, gets a 4xx error in the OpenAI error shape; so
does a body over MAX_REQUEST_BYTES (413) or nested deeper than MAX_JSON_DEPTH (400). What answering means
(sampling, recording the tokens) is the episode handler's (agent_engine.py); this module is HTTP and the API's
shapes only.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
from collections.abc import Iterator
from typing import Any, Protocol

from aiohttp import web

from agentrl.rollout.agent_capture import ServedReply
from agentrl.rollout.openai_chat import (
    ChatRequest,
    EndpointError,
    bad,
    completion_chunks,
    completion_object,
    notes,
    parse_chat_request,
)
from agentrl.rollout.openai_responses import ResponseWriter, parse_responses_request

# An agent's conversation can be long, but a request is text: 16 MiB bounds a runaway one before it is read (the
# episode handler bounds it again by rollout.max_context before tokenizing).
MAX_REQUEST_BYTES = 16 * 2**20
# JSON nested deeper than this is no conversation or tool schema anyone writes; it would exhaust the parser's stack.
MAX_JSON_DEPTH = 64


class EpisodeHandler(Protocol):
    async def complete(self, request: ChatRequest) -> tuple[ServedReply, dict[str, Any]]:
        """The reply, and for each setting the run bounded, {"requested": ..., "used": ...}. Raises EndpointError."""
        ...


def _depth(value: Any) -> int:
    """How deeply a parsed JSON value nests (iteratively: a deep value must not exhaust the stack here either)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack += [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            stack += [(v, depth + 1) for v in item]
    return deepest


async def read_body(request: web.Request) -> Any:
    """The request's JSON: 413 over MAX_REQUEST_BYTES, 400 when it is not JSON or nests past MAX_JSON_DEPTH."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise EndpointError(
            413, f"the request body is over {MAX_REQUEST_BYTES // 2**20} MiB", "request_too_large", "body"
        ) from None
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        raise bad("body", "the request body is not JSON (or nests too deeply to read)", "invalid_json") from None
    if _depth(body) > MAX_JSON_DEPTH:
        raise bad("body", f"the request body nests deeper than {MAX_JSON_DEPTH} levels", "invalid_json")
    return body


async def _stream(request: web.Request, events: Iterator[dict[str, Any]], named: bool) -> web.StreamResponse:
    """Server-sent events: `data: <json>` each (`event: <type>` before it for the Responses API), then chat
    completions' `data: [DONE]`."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    for event in events:
        kind = f"event: {event['type']}\n" if named else ""
        await response.write(f"{kind}data: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
    if not named:
        await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


class AgentEndpoint:
    """The server: `open(episode_id, handler)` gives an episode its base URL and key, `close_episode` ends it (its
    later requests get 410), `close` stops the server."""

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        self._handlers: dict[str, tuple[EpisodeHandler, str]] = {}
        self._ended: set[str] = set()
        # Each episode's responses, for previous_response_id: response id -> its conversation, the reply included.
        self._responses: dict[str, dict[str, list[dict[str, Any]]]] = {}
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

    def open(self, episode_id: str, handler: EpisodeHandler) -> tuple[str, str]:
        """The episode's base URL and its key (the only credential its requests are admitted with)."""
        key = f"agentrl-{secrets.token_urlsafe(24)}"
        with self._lock:
            self._handlers[episode_id] = (handler, key)
            self._responses[episode_id] = {}
        return self.base_url(episode_id), key

    def close_episode(self, episode_id: str) -> None:
        with self._lock:
            self._responses.pop(episode_id, None)
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
        app.router.add_post("/episodes/{episode}/v1/responses", self._responses_api)
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

    def _admit(self, request: web.Request) -> tuple[str, EpisodeHandler]:
        """The episode a request is for, once its key is checked: 401 without the episode's key, 404 for an episode
        never opened, 410 for one that has ended."""
        episode_id = request.match_info["episode"]
        with self._lock:
            opened = self._handlers.get(episode_id)
            ended = episode_id in self._ended
        if opened is None:
            if ended:
                raise EndpointError(
                    410, f"episode {episode_id} has ended: its agent returned or ran out of time", "episode_ended"
                )
            raise EndpointError(404, f"no episode {episode_id} is running at this endpoint", "episode_not_found")
        handler, key = opened
        sent = request.headers.get("Authorization", "")
        if not secrets.compare_digest(sent.encode(), f"Bearer {key}".encode()):
            raise EndpointError(
                401,
                "this episode's requests carry its key (Authorization: Bearer ...): pass the api_key the trainer "
                "gave the agent with its base_url to the OpenAI client",
                "invalid_api_key",
            )
        return episode_id, handler

    async def _answer(self, request: web.Request, respond: Any) -> web.StreamResponse:
        """A request's reply, its errors in the OpenAI shape; the agent gets a reply it can read whatever fails."""
        try:
            return await respond(*self._admit(request))
        except EndpointError as err:
            return web.json_response(err.body(), status=err.status)
        except Exception as err:  # noqa: BLE001 - the run goes on; the agent reads what failed
            failure = EndpointError(500, f"the endpoint failed: {type(err).__name__}: {err}", "internal_error")
            return web.json_response(failure.body(), status=500)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        async def respond(episode_id: str, handler: EpisodeHandler) -> web.StreamResponse:
            body = await read_body(request)
            chat = parse_chat_request(body)
            reply, bounded = await handler.complete(chat)
            agentrl = notes(episode_id, chat, bounded)
            if body.get("stream"):
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                events = completion_chunks(self.model_name, reply, chat, agentrl, include_usage)
                return await _stream(request, events, named=False)
            return web.json_response(completion_object(self.model_name, reply, chat, agentrl))

        return await self._answer(request, respond)

    async def _responses_api(self, request: web.Request) -> web.StreamResponse:
        async def respond(episode_id: str, handler: EpisodeHandler) -> web.StreamResponse:
            body = await read_body(request)
            earlier = None
            previous = body.get("previous_response_id") if isinstance(body, dict) else None
            if previous is not None:
                with self._lock:
                    earlier = self._responses.get(episode_id, {}).get(previous)
                if earlier is None:
                    raise bad("previous_response_id", f"no response {previous!r} in this episode", "not_found")
            chat, conversation = parse_responses_request(body, earlier)
            reply, bounded = await handler.complete(chat)
            writer = ResponseWriter(self.model_name, reply, chat, notes(episode_id, chat, bounded))
            with self._lock:
                self._responses.get(episode_id, {})[writer.id] = [*conversation, reply.message]
            if body.get("stream"):
                return await _stream(request, writer.events(), named=True)
            return web.json_response(writer.response())

        return await self._answer(request, respond)

    async def _models(self, request: web.Request) -> web.StreamResponse:
        async def respond(episode_id: str, handler: EpisodeHandler) -> web.StreamResponse:
            model = {"id": self.model_name, "object": "model", "created": 0, "owned_by": "agentrl"}
            return web.json_response({"object": "list", "data": [model]})

        return await self._answer(request, respond)

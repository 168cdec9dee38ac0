"""Token-exact capture of an agent's requests to the endpoint: one agent episode's chat-completion requests become
training sequences (docs/token-pipeline.md, rules 9 and 10).

A request whose messages repeat the conversation so far (the previous request's messages and the assistant message
the endpoint answered, as it answered it) and add new ones extends the current sequence: the new messages are
appended as the chat template renders them after an assistant turn (`ChatFormat.observation`, as the engines append
an observation), and the earlier assistant turns keep the ids that were sampled for them. Any other request (an
assistant message edited, messages dropped, summarised or reordered, other tools) starts a new sequence from the
template's rendering of its messages: a prefix break, counted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from agentrl.environment.tool import ToolCallRecord
from agentrl.environment.toolcall import ToolCallFormat, schemas_by_name
from agentrl.rollout.chat import ChatFormat
from agentrl.rollout.episode import Episode, TokenRole, TurnRecord
from agentrl.rollout.loop import TurnEnd

BreakKind = Literal["edited", "rewritten"]
# The agent engine's step stats that count what the captures hold (its others are means or shares): rollout workers'
# shares of a step add up.
COUNTED_STATS = ("agent/requests", "agent/prefix_breaks", "agent/edited_messages")


class ContextFull(Exception):
    """The request's tokens leave no room to sample within rollout.max_context."""


def message_text(content: Any) -> str:
    """A message's content as text: a string, None (an assistant message with tool calls only), or OpenAI's list of
    content parts, whose text parts are joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    raise ValueError(f"message content must be a string, null or a list of content parts, not {type(content).__name__}")


def _arguments(arguments: Any) -> Any:
    """A tool call's arguments as a value, so '{"a": 1}' and '{"a":1}' are the same call."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return arguments


def normalize_message(message: dict[str, Any]) -> dict[str, Any]:
    """What a message says, without the fields an SDK adds or drops when it sends a reply back (refusal: null,
    annotations, a tool call's JSON spacing): two messages are the same when their normal forms are equal."""
    role = message.get("role")
    if not isinstance(role, str):
        raise ValueError("every message needs a string 'role'")
    normal: dict[str, Any] = {"role": role, "content": message_text(message.get("content"))}
    if role == "assistant" and message.get("tool_calls"):
        calls = message["tool_calls"]
        if not isinstance(calls, list) or not all(
            isinstance(c, dict) and isinstance(c.get("function"), dict) for c in calls
        ):
            raise ValueError(
                "an assistant message's tool_calls must be a list of {id, type, function: {name, arguments}}"
            )
        normal["tool_calls"] = [
            {
                "id": call.get("id"),
                "name": call["function"].get("name"),
                "arguments": _arguments(call["function"].get("arguments")),
            }
            for call in calls
        ]
    if role == "tool" and message.get("tool_call_id") is not None:
        normal["tool_call_id"] = message["tool_call_id"]
    if message.get("name") is not None:
        normal["name"] = message["name"]
    return normal


def _key(message: dict[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False)


@dataclass
class ServedReply:
    """What the endpoint answers for one sampled turn."""

    message: dict[str, Any]  # the OpenAI assistant message: role, content, tool_calls
    finish_reason: Literal["stop", "length", "tool_calls"]
    prompt_tokens: int
    completion_tokens: int
    token_logprobs: list[tuple[str, float]] = field(default_factory=list)  # each sampled token's text, logprob


@dataclass
class PlannedTurn:
    """What answering a request adds, once its reply is sampled (nothing is recorded for a request never answered)."""

    conversation: list[dict[str, Any]]  # the request's messages, normalised
    context: list[int]  # the ids to sample after
    added: list[int]  # the ids the request adds before the reply: a new sequence's prompt, or an observation
    new_sequence: Episode | None  # set when the request starts a sequence
    break_kind: BreakKind | None  # set when that sequence breaks off the episode's current one
    tools: list[dict[str, Any]]


@dataclass
class EpisodeCapture:
    """One agent episode's requests as training sequences (Episodes without group and sample yet)."""

    chat: ChatFormat
    call_format: ToolCallFormat
    task_id: str
    max_context: int
    sequences: list[Episode] = field(default_factory=list)
    breaks: list[BreakKind] = field(default_factory=list)
    answered: int = 0  # requests answered: the next turn's index, counted across the episode's sequences
    conversation: list[dict[str, Any]] = field(default_factory=list)  # the current sequence's, normalised
    tools: list[dict[str, Any]] = field(default_factory=list)  # the tools the current sequence's prompt renders
    sampled_texts: dict[str, str] = field(default_factory=dict)  # a served message's key -> the text sampled for it
    last_ended_with_eos: bool = True

    def plan(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PlannedTurn:
        """How this request extends the current sequence, or the new one it starts. Raises ContextFull (an
        extended sequence then ends, truncated) or ValueError (a malformed message)."""
        normal = [normalize_message(m) for m in messages]
        if not normal or normal[-1]["role"] == "assistant":
            raise ValueError("messages must end with a message for the model to answer, not an assistant message")
        known = len(self.conversation)
        if (
            self.sequences
            and self.current.status != "truncated"
            and tools == self.tools
            and normal[:known] == self.conversation
        ):
            added = self.chat.observation(
                [self._rendered(m, tools) for m in normal[known:]], turn_ended_with_eos=self.last_ended_with_eos
            )
            context = [*self.current.token_ids, *added]
            if len(context) >= self.max_context:
                self.current.status, self.current.status_reason = "truncated", "max_context"
            planned = PlannedTurn(normal, context, added, None, None, tools)
        else:
            rendered = [self._rendered(m, tools) for m in normal]
            added = self.chat.prompt(rendered, tools)
            sequence = Episode(self.task_id, 0, 0, prompt_messages=rendered, tool_schemas=list(tools))
            broke = self.sequences and self.current.status != "truncated"
            planned = PlannedTurn(normal, added, added, sequence, self._break_kind(normal) if broke else None, tools)
        if len(planned.context) >= self.max_context:
            raise ContextFull(
                f"this conversation is {len(planned.context)} tokens, the tools included; "
                f"rollout.max_context is {self.max_context}"
            )
        return planned

    def record(
        self,
        planned: PlannedTurn,
        ids: list[int],
        logprobs: list[float],
        end: TurnEnd,
        context_bound: bool,
        stops: list[str],
        forced: list[int] | None = None,
        agent: str | None = None,
    ) -> ServedReply:
        """The request's tokens and its sampled turn (ids and logprobs), appended; returns the reply.
        `context_bound`: the turn's limit was the room left in rollout.max_context; `stops`: the request's stop
        sequences (left out of the reply's content, as OpenAI does, but kept in the sampled ids); `forced`: the
        opening of a tool call that tool_choice wrote before the sampled ids (context, not sampled: loss mask 0); `agent`:
        the name of the agent that asked, where several share the policy."""
        if planned.new_sequence is not None:
            if planned.break_kind is not None:
                self.breaks.append(planned.break_kind)
            self.sequences.append(planned.new_sequence)
            self.tools = planned.tools
            self._append(planned.added, "prompt", -1)
        else:
            self._fill_tool_results(planned.conversation[len(self.conversation) :])
            self._append(planned.added, "tool", self.current.turns[-1].index)
        episode = self.current
        turn_index = self.answered
        self.answered += 1
        forced = forced or []
        self._append(forced, "tool", turn_index)
        self._append(ids, "assistant", turn_index, logprobs)
        episode.turn_end_positions.append(len(episode.token_ids) - 1)
        text = self.chat.tokenizer.decode([*forced, *ids], skip_special_tokens=True)
        limited = "context" if context_bound else "length"
        turn = TurnRecord(
            index=turn_index, assistant=text, finish_reason="stop" if end != "limit" else limited, agent=agent
        )
        episode.turns.append(turn)
        content, calls = self._reply_parts(text, turn, stops)
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        if calls:
            message["tool_calls"] = calls
        self.conversation = [*planned.conversation, normalize_message(message)]
        self.sampled_texts[_key(self.conversation[-1])] = text
        self.last_ended_with_eos = end == "eos"
        finish = "length" if end == "limit" else ("tool_calls" if calls else "stop")
        return ServedReply(message, finish, len(planned.context) + len(forced), len(ids))

    def reward_last_turn(self, reward: float) -> None:
        """A process reward the agent reports for the turn answered last: it lands on that turn's last sampled token
        (docs/token-pipeline.md, rule 4), as a ToolEnv's StepResult.reward does."""
        if not self.sequences or not self.current.turns:
            raise ValueError("no turn has been answered yet to give a process reward to")
        self.current.turns[-1].process_reward += reward

    @property
    def current(self) -> Episode:
        return self.sequences[-1]

    def _reply_parts(self, text: str, turn: TurnRecord, stops: list[str]) -> tuple[str, list[dict[str, Any]]]:
        """The reply's content and tool calls, parsed from the sampled text by the run's tool-call format."""
        for stop in stops:
            if stop in text:
                text = text[: text.index(stop)]
        if not self.tools:
            return text, []
        parsed = self.call_format.parse(text, f"call-{turn.index}", schemas_by_name(self.tools))
        turn.parse_error = parsed.error
        if parsed.error is not None or not parsed.calls:
            return text, []  # a malformed call is text, as a model's malformed output is to any OpenAI client
        turn.tool_calls = [ToolCallRecord(c.id, c.name, c.arguments, c.raw) for c in parsed.calls]
        content = self.call_format.remove_calls(text, schemas_by_name(self.tools))
        calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)},
            }
            for c in parsed.calls
        ]
        return content, calls

    def _rendered(self, message: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """A message as the chat template gets it: an assistant message the endpoint served is the text sampled for
        it (its tool calls as the model wrote them); an assistant message the agent wrote with tool calls, its calls
        as the model would write them (ChatFormat.assistant_with_calls); any other as the agent sent it."""
        if message["role"] != "assistant":
            return message
        sampled = self.sampled_texts.get(_key(message))
        if sampled is not None:
            return {"role": "assistant", "content": sampled}
        if "tool_calls" not in message:
            return message
        calls = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in message["tool_calls"]
        ]
        return self.chat.assistant_with_calls(message["content"], calls, tools)

    def _fill_tool_results(self, new_messages: list[dict[str, Any]]) -> None:
        """The agent ran the last turn's tool calls itself: their results, read from the tool messages that answer
        them, and the new messages as the turn's observation, for the replay."""
        turn = self.current.turns[-1]
        results = {m["tool_call_id"]: m["content"] for m in new_messages if m["role"] == "tool" and "tool_call_id" in m}
        for call in turn.tool_calls:
            call.result = results.get(call.id)
        turn.observation = "\n".join(m["content"] for m in new_messages)

    def _break_kind(self, normal: list[dict[str, Any]]) -> BreakKind:
        """edited: the conversation is the same but for an assistant message's text or calls; rewritten: anything
        else (messages dropped, summarised, reordered, other tools, a request repeated)."""
        known = self.conversation
        if len(normal) < len(known):
            return "rewritten"
        differing = [i for i, (old, new) in enumerate(zip(known, normal)) if old != new]
        edited = differing and all(known[i]["role"] == normal[i]["role"] == "assistant" for i in differing)
        return "edited" if edited else "rewritten"

    def _append(self, ids: list[int], role: TokenRole, turn: int, logprobs: list[float] | None = None) -> None:
        self.current.append_tokens(ids, role, turn, logprobs)

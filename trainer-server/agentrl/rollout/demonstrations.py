"""Demonstrations: chat transcripts a person or a script wrote, rendered into episodes exactly as the rollout renders
the episodes it samples, for supervised fine-tuning (algorithm.name: sft, data.sft's `demonstrations`).

A demonstration is one JSON object: `messages` in OpenAI's chat format (the messages up to the first assistant one
are the prompt; each assistant message, its content and `tool_calls`, is a turn to learn; the tool and user messages
after it are what the turn was told back), with optional `tools` (OpenAI tool schemas; default: the env's),
`task_id`, `reward` and `prompt_length` (how many of the first messages are the prompt, for a prompt that holds a
worked example's assistant messages, as an env's reset may give; default: those before the first assistant one). The
prompt is the run's chat template applied with the tools, as a rollout's; a turn is its content followed by each
call written in rollout.tool_format, as the model must write it to be parsed, then the end-of-sequence token (the
model learns to stop); what follows is rendered by the template as an observation (`ChatFormat.observation`), each
tool message cut to rollout.tool_output_tokens. Only the turns' tokens are trained.
"""

from __future__ import annotations

import json
from typing import Any

from agentrl.environment.tool import ToolCallRecord
from agentrl.environment.toolcall import schemas_by_name
from agentrl.rollout.chat import ChatFormat
from agentrl.rollout.episode import Episode, TurnRecord

ROLES = ("system", "user", "assistant", "tool")


def render_demonstration(
    demo: Any,
    *,
    chat: ChatFormat,
    eos_id: int,
    env_tools: list[dict[str, Any]],
    max_context: int,
    group: int,
    prompt_length: int | None = None,
) -> Episode:
    """The episode of one demonstration, group `group`, sample 0; ValueError saying what is wrong with it. The prompt
    is the first `prompt_length` messages (this argument, else the demonstration's own), or those before the first
    assistant one (a prompt may hold a worked example's assistant message, which the model never wrote)."""
    messages, tools = _checked(demo, env_tools)
    first = _prompt_length(demo, messages) if prompt_length is None else prompt_length
    if first >= len(messages) or messages[first]["role"] != "assistant":
        raise ValueError(f"messages[{first}]: the first turn must be an assistant message")
    prompt = messages[:first]
    episode = Episode(
        task_id=str(demo.get("task_id", f"demonstration-{group}")),
        group=group,
        sample=0,
        prompt_messages=prompt,
        tool_schemas=tools,
        outcome_reward=_reward(demo),
    )
    episode.append_tokens(chat.prompt(prompt, tools), "prompt", -1)
    by_name = schemas_by_name(tools)
    rest, turn = messages[first:], 0
    while rest:
        assistant, rest = rest[0], rest[1:]
        told = []
        while rest and rest[0]["role"] != "assistant":
            told.append(rest.pop(0))
        episode.turns.append(_turn(episode, turn, assistant, told, chat, eos_id, by_name))
        if told:
            cut = [{**m, "content": chat.cut_to_budget(_text(m.get("content")))} for m in told]
            episode.append_tokens(chat.observation(cut, turn_ended_with_eos=True), "tool", turn)
        turn += 1
    episode.turns[-1].done = True
    episode.final_answer = _text([m for m in messages if m["role"] == "assistant"][-1].get("content"))
    if len(episode.token_ids) > max_context:
        raise ValueError(
            f"{len(episode.token_ids)} tokens rendered, over rollout.max_context ({max_context}): a rollout could "
            "never produce it; raise max_context or shorten the demonstration"
        )
    return episode


def _checked(demo: Any, env_tools: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    if not isinstance(demo, dict):
        raise ValueError("not a JSON object with messages")
    messages = demo.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise ValueError("messages: give a list of chat messages")
    for index, message in enumerate(messages):
        if message.get("role") not in ROLES:
            raise ValueError(f"messages[{index}].role: {message.get('role')!r} is none of {', '.join(ROLES)}")
    if not any(m["role"] == "assistant" for m in messages):
        raise ValueError("messages: no assistant message, so nothing to learn")
    tools = demo.get("tools", env_tools)
    if not isinstance(tools, list) or not all(
        isinstance(t, dict) and isinstance(t.get("function"), dict) and isinstance(t["function"].get("name"), str)
        for t in tools
    ):
        raise ValueError('tools: give a list of OpenAI tool schemas ({"type": "function", "function": {"name": ...}})')
    return messages, tools


def _prompt_length(demo: dict[str, Any], messages: list[dict[str, Any]]) -> int:
    """The demonstration's `prompt_length`, or the number of messages before the first assistant one."""
    given = demo.get("prompt_length")
    if given is None:
        return next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    if isinstance(given, bool) or not isinstance(given, int) or not 0 <= given < len(messages):
        raise ValueError(f"prompt_length: {given!r} is not a number of messages below {len(messages)}")
    return given


def _reward(demo: dict[str, Any]) -> float:
    reward = demo.get("reward", 0.0)
    if (
        isinstance(reward, bool)
        or not isinstance(reward, int | float)
        or reward != reward
        or abs(reward) == float("inf")
    ):
        raise ValueError(f"reward: {reward!r} is not a finite number")
    return float(reward)


def _text(content: Any) -> str:
    """A message's content as the template gets it: text, or the JSON of anything else (an object a tool returned)."""
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def _turn(
    episode: Episode,
    index: int,
    assistant: dict[str, Any],
    told: list[dict[str, Any]],
    chat: ChatFormat,
    eos_id: int,
    tools: dict[str, dict[str, Any]],
) -> TurnRecord:
    """Turn `index`: its tokens appended (the content, each call as the run's format writes it, EOS) and its record,
    each call with the tool message that answers it (by tool_call_id, else in order) as its result."""
    calls = assistant.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ValueError(f"turn {index}: tool_calls is not a list")
    answers = [m for m in told if m["role"] == "tool"]
    records, written = [], []
    for position, call in enumerate(calls):
        name, arguments = _call(call, index, tools)
        raw = chat.call_format.write(name, arguments, tools)
        parsed = chat.call_format.parse(raw, "check", tools).calls
        if len(parsed) != 1 or parsed[0].name != name or parsed[0].arguments != arguments or parsed[0].error:
            raise ValueError(
                f"turn {index}: the call to {name} does not read back as written in rollout.tool_format "
                f"{chat.call_format.name} ({raw!r}); a rollout could not parse it"
            )
        call_id = str(call.get("id") or f"call-{index}-{position}")
        answer = next((m for m in answers if m.get("tool_call_id") == call_id), None)
        if answer is None and position < len(answers) and not answers[position].get("tool_call_id"):
            answer = answers[position]
        written.append(raw)
        records.append(
            ToolCallRecord(
                id=call_id, name=name, arguments=arguments, raw=parsed[0].raw, result=answer and answer.get("content")
            )
        )
    text = "\n".join(filter(None, [_text(assistant.get("content")), *written]))
    episode.append_tokens(chat.encode(text) + [eos_id], "assistant", index)
    episode.turn_end_positions.append(len(episode.token_ids) - 1)
    observation = "\n".join(_text(m.get("content")) for m in told) if told else None
    return TurnRecord(index=index, assistant=text, tool_calls=records, observation=observation)


def _call(call: Any, turn: int, tools: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise ValueError(f'turn {turn}: a tool call is {{"function": {{"name": ..., "arguments": ...}}}}')
    name, arguments = function["name"], function.get("arguments", {})
    if name not in tools:
        raise ValueError(f"turn {turn}: a call to {name}, which is none of the tools ({', '.join(tools) or 'none'})")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as err:
            raise ValueError(f"turn {turn}: the arguments of the call to {name} are not JSON: {err}") from None
    if not isinstance(arguments, dict):
        raise ValueError(f"turn {turn}: the arguments of the call to {name} are not a JSON object")
    return name, arguments

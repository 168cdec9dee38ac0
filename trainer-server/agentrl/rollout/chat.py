"""Chat tokenisation: messages in, token ids out, with the tokenizer's own chat template.

An observation is rendered by the template as a chunk and tokenized alone, so the ids appended after a turn are
exactly what the template would render there; generated text is never decoded and encoded again
(docs/token-pipeline.md, rule 1). Tool output is cut to its token budget here (rule 7).
"""

from __future__ import annotations

import functools
from typing import Any

from agentrl.environment.toolcall import ToolCallFormat, schemas_by_name

_PLACEHOLDER = "AGENTRL_ASSISTANT_TURN_PLACEHOLDER"
# No tokenizer we know of has a vocabulary entry longer than this many characters.
MAX_CHARS_PER_TOKEN = 64


class ChatFormat:
    """Turns messages into token ids with the tokenizer's own chat template."""

    def __init__(self, tokenizer: Any, tool_output_tokens: int, call_format: ToolCallFormat) -> None:
        self.tokenizer = tokenizer
        self.call_format = call_format
        self.tool_output_tokens = tool_output_tokens
        self.eos_text = tokenizer.eos_token or ""

    def _render(self, messages: list[dict[str, Any]], *, tools: list[dict] | None = None, gen: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tools=tools or None, tokenize=False, add_generation_prompt=gen
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt(self, messages: list[dict[str, Any]], tool_schemas: list[dict[str, Any]]) -> list[int]:
        if not tool_schemas:
            return self.encode(self._render(messages, gen=True))
        if self.call_format.uses_template_tools:
            with_tools = self._render(messages, tools=tool_schemas, gen=True)
            if with_tools != self._render(messages, gen=True):
                return self.encode(with_tools)
        # The template ignores `tools`, or the format is not the template's: describe them in the system message.
        described = _with_system_text(messages, self.call_format.describe(schemas_by_name(tool_schemas)))
        return self.encode(self._render(described, gen=True))

    def assistant_with_calls(
        self, content: str, calls: list[dict[str, Any]], tool_schemas: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """An assistant message the model did not sample (a worked example, an agent's own turn) with OpenAI-style
        `tool_calls`, as the template should get it: the calls kept for the template to render where the run's
        format is the template's and the template renders them; otherwise written in the run's format after the
        content, as the model writes a call. A template that ignores tool_calls would show the model an empty turn,
        and a call in another format would teach it one it must not write."""
        if self.call_format.uses_template_tools and self._template_renders_tool_calls:
            return {"role": "assistant", "content": content, "tool_calls": calls}
        tools = schemas_by_name(tool_schemas)
        written = [self.call_format.write(c["function"]["name"], c["function"]["arguments"], tools) for c in calls]
        return {"role": "assistant", "content": "\n".join(filter(None, [content, *written]))}

    @functools.cached_property
    def _template_renders_tool_calls(self) -> bool:
        """Whether the chat template renders an assistant message's `tool_calls` (a property of the template: asked
        once, of a probe call, not of each message)."""
        call = {"id": "probe", "type": "function", "function": {"name": "probe", "arguments": {"x": "y"}}}
        with_call = {"role": "assistant", "content": "", "tool_calls": [call]}
        return self._render([with_call], gen=False) != self._render([{"role": "assistant", "content": ""}], gen=False)

    def cut_to_budget(self, content: str) -> str:
        """Tool output budgets are counted in tokens (docs/token-pipeline.md, rule 7). Only a prefix that surely holds
        the budget is tokenized, so a tool that returns megabytes costs no more than one that fits."""
        prefix = content[: self.tool_output_tokens * MAX_CHARS_PER_TOKEN]
        ids = self.encode(prefix)
        if len(ids) <= self.tool_output_tokens and len(prefix) == len(content):
            return content
        kept = self.tokenizer.decode(ids[: self.tool_output_tokens])
        return (
            f"{kept}\n[... cut: {len(content) - len(kept):,} more characters over the tool output budget "
            f"of {self.tool_output_tokens} tokens]"
        )

    def observation(self, new_messages: list[dict[str, Any]], turn_ended_with_eos: bool) -> list[int]:
        """Ids to append after an assistant turn: the rest of the template's end-of-turn text, the new
        messages, and the next generation prompt — exactly what the template would render there."""
        prefix = [{"role": "user", "content": "u"}, {"role": "assistant", "content": _PLACEHOLDER}]
        try:
            base = self._render(prefix, gen=False)
            full = self._render(prefix + new_messages, gen=True)
        except Exception:  # noqa: BLE001 - templates without a "tool" role raise; Hermes-wrap as user
            new_messages = [_as_user_tool_response(m) for m in new_messages]
            base = self._render(prefix, gen=False)
            full = self._render(prefix + new_messages, gen=True)
        if not full.startswith(base):
            raise RuntimeError("chat template renders earlier turns differently once more messages follow")
        end_of_turn = base[base.index(_PLACEHOLDER) + len(_PLACEHOLDER) :]
        if turn_ended_with_eos and self.eos_text and end_of_turn.startswith(self.eos_text):
            end_of_turn = end_of_turn[len(self.eos_text) :]  # the sampled EOS already closed the turn
        return self.encode(end_of_turn + full[len(base) :])


def _with_system_text(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    if messages and messages[0]["role"] == "system":
        return [{**messages[0], "content": f"{messages[0]['content']}\n\n{text}"}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def _as_user_tool_response(message: dict[str, Any]) -> dict[str, Any]:
    if message["role"] != "tool":
        return message
    return {"role": "user", "content": f"<tool_response>\n{message['content']}\n</tool_response>"}

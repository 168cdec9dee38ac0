import pytest

from agentrl.toolcall import get_parser, parse_hermes


def test_parses_several_calls_in_one_turn():
    text = 'think <tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call> and <tool_call>{"name": "b", "arguments": "{\\"y\\": 2}"}</tool_call>'
    turn = parse_hermes(text, "t0")
    assert [(c.id, c.name, c.arguments) for c in turn.calls] == [("t0-0", "a", {"x": 1}), ("t0-1", "b", {"y": 2})]
    assert turn.error is None


@pytest.mark.parametrize("text, message", [
    ('<tool_call>{"name": "a", "arguments": {</tool_call>', "not valid JSON"),
    ('<tool_call>{"arguments": {}}</tool_call>', 'string "name"'),
    ('<tool_call>{"name": "a", "arguments": [1]}</tool_call>', '"arguments" must be a JSON object'),
    ('<tool_call>{"name": "a", "arguments": {}}', "unclosed <tool_call>"),
    ('{"name": "a"}</tool_call>', "without an opening <tool_call>"),
])
def test_malformed_calls_become_errors_the_model_sees(text, message):
    turn = parse_hermes(text, "t")
    assert message in turn.error
    assert all(c.arguments is None for c in turn.calls)


def test_plain_answer_has_no_calls():
    assert parse_hermes("The answer is 4.", "t").calls == []


def test_registry():
    assert get_parser("auto") is parse_hermes
    with pytest.raises(ValueError, match="unknown tool-call format"):
        get_parser("nope")

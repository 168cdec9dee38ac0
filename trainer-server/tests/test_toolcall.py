import pytest
from agentrl.environment.toolcall import HermesFormat, TagFormat, get_format, schemas_by_name
from agentrl.recipes.calculator import Calculator

hermes = HermesFormat()
tags = TagFormat()
CALCULATOR = schemas_by_name([Calculator().schema()])


def test_parses_several_calls_in_one_turn():
    text = 'think <tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call> and <tool_call>{"name": "b", "arguments": "{\\"y\\": 2}"}</tool_call>'
    turn = hermes.parse(text, "t0", {})
    assert [(c.id, c.name, c.arguments) for c in turn.calls] == [("t0-0", "a", {"x": 1}), ("t0-1", "b", {"y": 2})]
    assert turn.error is None


@pytest.mark.parametrize(
    "text, message",
    [
        ('<tool_call>{"name": "a", "arguments": {</tool_call>', "not valid JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', 'string "name"'),
        ('<tool_call>{"name": "a", "arguments": [1]}</tool_call>', '"arguments" must be a JSON object'),
        ('<tool_call>{"name": "a", "arguments": {}}', "unclosed <tool_call>"),
        ('{"name": "a"}</tool_call>', "without an opening <tool_call>"),
    ],
)
def test_malformed_calls_become_errors_the_model_sees(text, message):
    turn = hermes.parse(text, "t", {})
    assert message in turn.error
    assert all(c.arguments is None for c in turn.calls)


def test_plain_answer_has_no_calls():
    assert hermes.parse("The answer is 4.", "t", {}).calls == []
    assert tags.parse("The answer is <b>4</b>.", "t", CALCULATOR).calls == []


def test_tag_calls_fill_the_single_string_parameter():
    turn = tags.parse(
        "Let me compute. <calculator> 24 * 37 </calculator> then <calculator>1+1</calculator>", "t1", CALCULATOR
    )
    assert [(c.id, c.name, c.arguments, c.raw) for c in turn.calls] == [
        ("t1-0", "calculator", {"expression": "24 * 37"}, "<calculator> 24 * 37 </calculator>"),
        ("t1-1", "calculator", {"expression": "1+1"}, "<calculator>1+1</calculator>"),
    ]
    assert turn.error is None


def test_unclosed_tag_is_an_error_the_model_sees():
    turn = tags.parse("<calculator>24 * 37", "t", CALCULATOR)
    assert turn.error == "unclosed <calculator>: end the call with </calculator>"
    assert turn.calls[0].arguments is None


def test_tag_format_describes_each_tool_and_where_calls_end():
    assert "<calculator>expression</calculator>: Evaluate an arithmetic expression" in tags.describe(CALCULATOR)
    assert tags.call_end(CALCULATOR) == ["</calculator>"]
    assert hermes.call_end(CALCULATOR) == ["</tool_call>"]


def test_tag_format_refuses_tools_it_cannot_express():
    two_args = {
        "lookup": {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "",
                "parameters": {
                    "type": "object",
                    "properties": {"key": {"type": "string"}, "table": {"type": "string"}},
                },
            },
        }
    }
    with pytest.raises(ValueError, match=r"tool 'lookup' cannot be called with tool_format 'tags'.*\['key', 'table'\]"):
        tags.describe(two_args)


def test_registry():
    assert get_format("auto").name == "hermes"
    assert get_format("tags").name == "tags"
    with pytest.raises(ValueError, match="unknown tool-call format"):
        get_format("nope")

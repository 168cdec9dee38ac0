"""The framework matrix (issue #43; docs/environments.md, "Agent frameworks"): a minimal agent with one tool, written
with each framework from PyPI as its docs write one, unchanged but for the endpoint's base URL and key, plays an
episode through the endpoint. Each episode is token-exact: its sampled ids are the ones the engine wrote, the tool's
result is an observation with loss mask 0, and the agent ran its own tool.

The OpenAI SDK (sync, async, streamed) and the OpenAI Agents SDK (Responses API and chat completions) are played in
test_agent_endpoint.py and test_endpoint_apis.py. CrewAI and verifiers pin an OpenAI SDK older than this environment's:
their agents (framework_agents/) run in virtual environments of their own (`make setup-frameworks`), as a
subprocess."""

import json

import pytest
from agent_endpoint_harness import (
    CALL,
    FRAMEWORK_AGENT_PROGRAMS,
    FRAMEWORK_EPISODE_TIMEOUT_S,
    framework_agent,
    play,
    sampled_runs,
)

TABLE = {"3": "blue"}
# Room for the frameworks' own system prompts and tool schemas, and smolagents' long calls.
ROLLOUT = {"max_context": 8000, "max_new_tokens": 200}


def lookup_value(key: str) -> str:
    """Return the value stored under a key."""
    return TABLE.get(key, "none")


def assert_token_exact(episode, written, tool_result="blue"):
    """Its sampled ids are the ones written, turn by turn; the tool's result was recorded, as an observation."""
    assert sampled_runs(episode) == written
    assert episode.turns[0].tool_calls[0].name == "lookup" and episode.turns[0].tool_calls[0].result == tool_result
    observation = [i for i, role in enumerate(episode.token_roles) if role == "tool"]
    assert observation and all(episode.loss_mask[i] == 0 for i in observation)


def test_langgraph_react_agent_over_chat_openai_streaming(tiny, monkeypatch):
    langgraph_prebuilt = pytest.importorskip("langgraph.prebuilt")  # create_react_agent: LangGraph's prebuilt loop
    langchain_openai = pytest.importorskip("langchain_openai")
    from langchain_core.tools import tool

    lookup = tool(lookup_value, description="Return the value stored under a key.")
    lookup.name = "lookup"

    def run(task, base_url, api_key):
        model = langchain_openai.ChatOpenAI(model="policy", base_url=base_url, api_key=api_key, streaming=True)
        agent = langgraph_prebuilt.create_react_agent(model, [lookup])
        state = agent.invoke({"messages": [("user", f"What is under key {task['key']}?")]})
        return state["messages"][-1].content

    [episode], stats, written = play(tiny, monkeypatch, run, [CALL, "It is blue."], **ROLLOUT)
    assert episode.status == "finished" and episode.final_answer == "It is blue.", episode.status_reason
    assert stats["agent/prefix_breaks"] == 0 and len(episode.turns) == 2
    assert_token_exact(episode, written)


def test_a_langgraph_agent_that_trims_its_history_becomes_a_sequence_per_rewrite(tiny, monkeypatch):
    """LangGraph's pre_model_hook sends the model a trimmed history (here: the system message and the last message
    only): a rewrite, so the request after the tool call starts a sequence of its own (docs/token-pipeline.md,
    rule 10), each sequence holding exactly what was sampled, one reward for both."""
    langgraph_prebuilt = pytest.importorskip("langgraph.prebuilt")
    langchain_openai = pytest.importorskip("langchain_openai")
    from langchain_core.tools import tool

    lookup = tool(lookup_value, description="Return the value stored under a key.")
    lookup.name = "lookup"

    def keep_last(state):
        return {"llm_input_messages": state["messages"][-1:]}

    def run(task, base_url, api_key):
        model = langchain_openai.ChatOpenAI(model="policy", base_url=base_url, api_key=api_key)
        agent = langgraph_prebuilt.create_react_agent(model, [lookup], pre_model_hook=keep_last)
        return agent.invoke({"messages": [("user", f"What is under key {task['key']}?")]})["messages"][-1].content

    # The turn is read from the context: a trimmed history does not show how many turns came before.
    sequences, stats, written = play(
        tiny, monkeypatch, run, lambda text, turn: "It is blue." if "blue" in text else CALL, **ROLLOUT
    )
    assert stats["agent/requests"] == 2 and stats["agent/prefix_breaks"] == 1 and len(sequences) == 2
    assert [[t for t, m in zip(s.token_ids, s.loss_mask) if m] for s in sequences] == written
    assert sequences[1].prompt_messages == [{"role": "tool", "content": "blue", "tool_call_id": "call-0-0"}]
    assert {s.final_answer for s in sequences} == {"It is blue."}


def test_pydantic_ai_agent_over_openai_chat_model(tiny, monkeypatch):
    pydantic_ai = pytest.importorskip("pydantic_ai")
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    def run(task, base_url, api_key):
        model = OpenAIChatModel("policy", provider=OpenAIProvider(base_url=base_url, api_key=api_key))
        agent = pydantic_ai.Agent(model, instructions="Answer with the lookup tool.")

        @agent.tool_plain
        def lookup(key: str) -> str:
            """Return the value stored under a key."""
            return lookup_value(key)

        return agent.run_sync(f"What is under key {task['key']}?").output

    [episode], stats, written = play(tiny, monkeypatch, run, [CALL, "It is blue."], **ROLLOUT)
    assert episode.status == "finished", episode.status_reason
    assert stats["agent/prefix_breaks"] == 0 and len(episode.turns) == 2
    assert_token_exact(episode, written)


def test_smolagents_tool_calling_agent_over_openai_server_model(tiny, monkeypatch):
    smolagents = pytest.importorskip("smolagents")

    @smolagents.tool
    def lookup(key: str) -> str:
        """Return the value stored under a key.

        Args:
            key: the key to look up.
        """
        return lookup_value(key)

    def run(task, base_url, api_key):
        model = smolagents.OpenAIServerModel(model_id="policy", api_base=base_url, api_key=api_key)
        agent = smolagents.ToolCallingAgent(tools=[lookup], model=model, max_steps=3, verbosity_level=0)
        return agent.run(f"What is under key {task['key']}?")

    final = '<tool_call>{"name": "final_answer", "arguments": {"answer": "It is blue."}}</tool_call>'
    sequences, stats, written = play(tiny, monkeypatch, run, [CALL, final], **ROLLOUT)
    first, second = sequences
    assert first.status == second.status == "finished", (first.status_reason, second.status_reason)
    assert stats["agent/requests"] == 2 and first.turns[0].tool_calls[0].name == "lookup"
    assert second.turns[0].tool_calls[0].name == "final_answer"
    # smolagents sends its history from its own memory: the assistant's call as text, the tool's result in a user
    # message. Each request is then a sequence of its own (agent/prefix_breaks), each holding exactly what was
    # sampled, the result the agent ran in the second's prompt.
    assert stats["agent/prefix_breaks"] == 1
    assert [s.token_ids[i] for s in sequences for i, m in enumerate(s.loss_mask) if m] == [*written[0], *written[1]]
    assert "blue" in json.dumps(second.prompt_messages)


@pytest.mark.parametrize("framework", sorted(FRAMEWORK_AGENT_PROGRAMS))
def test_a_framework_in_its_own_venv_plays_a_token_exact_episode(framework, tiny, monkeypatch):
    """CrewAI: a Crew of one Agent over CrewAI's own OpenAI provider, streamed, its tool called natively. verifiers: a
    v1 taskset played by verifiers' own `null` harness, whose requests its interception server relays with
    `stream: true` only, the tool served by the taskset's MCP tool server."""
    run, timeout_s = framework_agent(framework), FRAMEWORK_EPISODE_TIMEOUT_S
    [episode], stats, written = play(tiny, monkeypatch, run, [CALL, "It is blue."], timeout_s, **ROLLOUT)
    assert episode.status == "finished" and episode.final_answer == "It is blue.", episode.status_reason
    assert stats["agent/requests"] == 2 and stats["agent/prefix_breaks"] == 0 and len(episode.turns) == 2
    assert_token_exact(episode, written)

"""What the agent frameworks send the endpoint (issue #43): streamed chat completions, the Responses API,
tool_choice enforced, logprobs, unknown parameters; and what it refuses (issue #44): a request without its episode's
key, a body too big or too deep, a conversation that cannot fit. Each turn is recorded token-exact whichever API and
whichever way it was asked for."""

import json
import time
import urllib.error
import urllib.request

import openai
import pytest
from agent_endpoint_harness import CALL, LOOKUP, agents_sdk_lookup, make_engine, play, sampled_runs, script
from agentrl.environment.agent import check_episode_function, load_agent
from agentrl.environment.user_code import EnvLoadError

RESPONSES_LOOKUP = {"type": "function", **LOOKUP["function"]}


def post(base_url, key, body, path="/chat/completions", raw=None):
    """A request as any HTTP client sends it: (status, the JSON answer)."""
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    request = urllib.request.Request(base_url + path, raw if raw is not None else json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_a_streamed_reply_assembles_to_the_reply_and_the_turn_is_recorded_as_sampled(tiny, monkeypatch):
    seen = {}

    def agent(task, base_url, api_key):
        client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        messages = [{"role": "user", "content": "What is under key 3?"}]
        chunks = list(
            client.chat.completions.create(
                model="p", messages=messages, tools=[LOOKUP], stream=True, stream_options={"include_usage": True}
            )
        )
        seen["chunks"] = [chunk.model_dump() for chunk in chunks]
        with client.chat.completions.stream(model="p", messages=messages, tools=[LOOKUP]) as stream:
            seen["assembled"] = stream.get_final_completion().choices[0].message  # the SDK's own assembly
        return "done"

    sequences, stats, written = play(tiny, monkeypatch, agent, lambda text, turn: CALL)
    chunks = seen["chunks"]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "tool_calls"
    call_deltas = [d for c in chunks if c["choices"] for d in c["choices"][0]["delta"].get("tool_calls") or []]
    assert call_deltas[0]["index"] == 0 and call_deltas[0]["function"]["name"] == "lookup"
    assert json.loads("".join(d["function"]["arguments"] or "" for d in call_deltas)) == {"key": "3"}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == len(written[0])
    call = seen["assembled"].tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == ("lookup", {"key": "3"})
    # The second request repeats the first: a new sequence of the same episode, each holding what was sampled.
    assert stats["agent/requests"] == 2 and [sampled_runs(s) for s in sequences] == [written[:1], written[1:]]


def test_the_responses_api_plays_a_tool_loop_as_one_token_exact_sequence(tiny, monkeypatch, trajectory_validator):
    seen = {}

    def agent(task, base_url, api_key):
        client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        items = [{"role": "user", "content": "What is stored under key 3?"}]
        first = client.responses.create(model="p", input=items, tools=[RESPONSES_LOOKUP], instructions="Look up.")
        calls = [item for item in first.output if item.type == "function_call"]
        items += [item.model_dump() for item in first.output]
        items += [{"type": "function_call_output", "call_id": c.call_id, "output": "blue"} for c in calls]
        events = list(
            client.responses.create(
                model="p", input=items, tools=[RESPONSES_LOOKUP], instructions="Look up.", stream=True
            )
        )
        seen["events"] = [event.type for event in events]
        second = events[-1].response
        third = client.responses.create(
            model="p", previous_response_id=second.id, input="Key 7?", instructions="Look up.", tools=[RESPONSES_LOOKUP]
        )
        seen["first"], seen["third"] = first, third
        return second.output_text

    replies = [CALL, "It is blue.", "I do not know."]
    [episode], stats, written = play(tiny, monkeypatch, agent, lambda text, turn: replies[turn])
    assert seen["first"].output[0].type == "function_call" and seen["first"].output[0].name == "lookup"
    assert seen["third"].output_text == "I do not know." and seen["third"].usage.output_tokens == len(written[2])
    assert seen["events"][:2] == ["response.created", "response.in_progress"]
    assert "response.output_text.delta" in seen["events"] and seen["events"][-1] == "response.completed"
    assert stats["agent/prefix_breaks"] == 0 and len(episode.turns) == 3  # three requests, one sequence
    assert sampled_runs(episode) == written
    assert episode.prompt_messages[0] == {"role": "system", "content": "Look up."}
    assert episode.turns[0].tool_calls[0].result == "blue" and episode.final_answer == "It is blue."
    trajectory_validator.validate(episode.to_record(run_id="r", step=1, decode_token=lambda i: str(i)))


def test_tool_choice_required_and_named_are_enforced_by_writing_the_calls_opening(tiny, monkeypatch):
    seen = {}
    required_opening, named_opening = '<tool_call>{"name": "', '<tool_call>{"name": "lookup", "arguments": '

    def agent(task, base_url, api_key):
        client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        messages = [{"role": "user", "content": "Key 3?"}]
        first = client.chat.completions.create(model="p", messages=messages, tools=[LOOKUP], tool_choice="required")
        message = first.choices[0].message
        messages += [message, {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "blue"}]
        named = {"type": "function", "function": {"name": "lookup"}}
        second = client.chat.completions.create(model="p", messages=messages, tools=[LOOKUP], tool_choice=named)
        seen["calls"] = [reply.choices[0].message.tool_calls[0].function for reply in (first, second)]
        return "done"

    def replies(text, turn):  # the model continues what tool_choice wrote
        if turn == 0:
            assert text.endswith(required_opening)
            return 'lookup", "arguments": {"key": "3"}}</tool_call>'
        assert text.endswith(named_opening)
        return '{"key": "7"}}</tool_call>'

    [episode], _, written = play(tiny, monkeypatch, agent, replies)
    assert [(f.name, json.loads(f.arguments)) for f in seen["calls"]] == [
        ("lookup", {"key": "3"}),
        ("lookup", {"key": "7"}),
    ]
    assert episode.turns[1].assistant == named_opening + '{"key": "7"}}</tool_call>'
    assert sampled_runs(episode) == written  # the forced opening is context: loss mask 0, not sampled
    forced = [i for i, turn in enumerate(episode.token_turns) if turn == 1 and episode.token_roles[i] == "tool"]
    assert forced and all(episode.loss_mask[i] == 0 and episode.rollout_logprobs[i] is None for i in forced)


def test_a_request_without_the_episodes_key_is_refused_and_never_recorded(tiny, monkeypatch):
    seen = {}

    def agent(task, base_url, api_key):
        body = {"messages": [{"role": "user", "content": "let me in"}]}
        seen["none"] = post(base_url, None, body)
        seen["wrong"] = post(base_url, "agentrl-" + "x" * 32, body)
        try:
            urllib.request.urlopen(base_url + "/models")
        except urllib.error.HTTPError as err:
            seen["models"] = err.code, json.loads(err.read())
        seen["right"] = post(base_url, api_key, body)
        return "done"

    [episode], stats, _ = play(tiny, monkeypatch, agent, lambda text, turn: "hello")
    for name in ("none", "wrong"):
        status, answer = seen[name]
        assert (status, answer["error"]["code"], answer["error"]["type"]) == (
            401,
            "invalid_api_key",
            "authentication_error",
        )
    assert seen["models"][0] == 401 and seen["right"][0] == 200
    assert stats["agent/requests"] == 1 and len(episode.turns) == 1  # only the admitted request was recorded
    assert "let me in" in episode.prompt_messages[0]["content"]


def test_an_episode_function_that_cannot_take_the_key_is_refused_at_load(tmp_path):
    check_episode_function(lambda task, base_url, api_key: None, "agent.py:run")
    check_episode_function(lambda *args: None, "agent.py:run")
    with pytest.raises(EnvLoadError, match=r"must take \(task, base_url, api_key\).*api_key=api_key"):
        check_episode_function(lambda task, base_url: None, "agent.py:run")
    (tmp_path / "agent.py").write_text(
        "def run(task, base_url):\n    return 'old'\n\ndef score(task, r):\n    return 1\n"
    )
    from agentrl.contract.env_sources import AgentConfig

    with pytest.raises(EnvLoadError, match="agent.py:run must take"):
        load_agent(AgentConfig(module="agent.py", reward="agent.py:score"), tmp_path)


def test_huge_deep_and_unfitting_requests_get_clear_answers_and_unknown_parameters_are_named(tiny, monkeypatch):
    seen = {}

    def agent(task, base_url, api_key):
        message = [{"role": "user", "content": "hi"}]
        seen["huge"] = post(base_url, api_key, None, raw=b'{"messages": "' + b"x" * (17 * 2**20) + b'"}')
        deep = '{"type": "object", "properties": {"a": ' * 3000 + "{}" + "}}" * 3000  # a tool schema 3,000 deep
        raw = f'{{"messages": {json.dumps(message)}, "tools": [{{"type": "function", "function": {deep}}}]}}'
        seen["deep"] = post(base_url, api_key, None, raw=raw.encode())
        started = time.perf_counter()
        seen["long"] = post(base_url, api_key, {"messages": [{"role": "user", "content": "word " * 20_000}]})
        seen["long_s"] = time.perf_counter() - started
        extras = {"seed": 5, "response_format": {"type": "json_object"}, "logprobs": True, "verbosity": "low"}
        seen["extras"] = post(base_url, api_key, {"messages": message, "unknown_option": 1, **extras})
        seen["n"] = post(base_url, api_key, {"messages": message, "n": 2})
        return "done"

    _, _, written = play(tiny, monkeypatch, agent, lambda text, turn: "hello there", max_context=600)
    status, answer = seen["huge"]
    assert (status, answer["error"]["code"]) == (413, "request_too_large")
    assert (seen["deep"][0], seen["deep"][1]["error"]["code"]) == (400, "invalid_json")
    status, answer = seen["long"]
    assert (status, answer["error"]["code"]) == (400, "context_length_exceeded") and seen["long_s"] < 5
    assert "rollout.max_context (600 tokens)" in answer["error"]["message"]
    status, reply = seen["extras"]
    assert status == 200 and reply["agentrl"]["ignored"] == ["unknown_option", "verbosity"]
    assert reply["agentrl"]["bounded"]["seed"] == {"requested": 5, "used": "the run's"}
    assert reply["agentrl"]["bounded"]["response_format"]["requested"] == {"type": "json_object"}
    tokens = reply["choices"][0]["logprobs"]["content"]
    assert len(tokens) == len(written[0]) and all(t["logprob"] == -0.5 for t in tokens)
    assert (seen["n"][0], seen["n"][1]["error"]["param"]) == (400, "n")


def test_an_agents_sdk_agent_on_the_responses_api_trains_unchanged_streamed_or_not(tiny, monkeypatch):
    """The OpenAI Agents SDK's default model speaks the Responses API: Runner.run and Runner.run_streamed each play
    a tool loop, its tool run, one sequence."""
    agents, lookup = agents_sdk_lookup()

    async def run(task, base_url, api_key):
        client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        model = agents.OpenAIResponsesModel(model="policy", openai_client=client)
        agent = agents.Agent(name="lookup", instructions="Answer with the lookup tool.", tools=[lookup], model=model)
        if task["streamed"]:
            streamed = agents.Runner.run_streamed(agent, f"What is under key {task['key']}?", max_turns=4)
            async for _ in streamed.stream_events():
                pass
            return streamed.final_output
        return (await agents.Runner.run(agent, f"What is under key {task['key']}?", max_turns=4)).final_output

    engine = make_engine(tiny, run, score=lambda task, result: float(result == "It is blue."), max_context=1500)
    script(engine, monkeypatch, lambda text, turn: [CALL, "It is blue."][turn])
    try:
        episodes = engine.run([{"key": "3", "streamed": False}, {"key": "3", "streamed": True}], 1, seed=0)
    finally:
        engine.close()
    for episode in episodes:
        assert episode.status == "finished" and episode.outcome_reward == 1.0, episode.status_reason
        assert len(episode.turns) == 2 and episode.turns[0].tool_calls[0].result == "blue"
    assert engine.last_stats["agent/prefix_breaks"] == 0


def test_an_agents_sdk_handoff_is_one_episode_with_each_turn_named_by_its_agent(tiny, monkeypatch):
    """Two agents sharing the policy, a triage agent handing off to a lookup agent (the Agents SDK's handoff): one
    episode, one reward for every sequence of it; each turn names the agent that asked (agentrl.agent), and the
    switch of instructions starts a sequence of its own (docs/token-pipeline.md, rule 11)."""
    agents, lookup = agents_sdk_lookup()

    async def run(task, base_url, api_key):
        client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        model = agents.OpenAIResponsesModel(model="policy", openai_client=client)

        def named(name):
            return agents.ModelSettings(extra_body={"agentrl": {"agent": name}})

        looker = agents.Agent(
            name="lookup", instructions="Use the tool.", tools=[lookup], model=model, model_settings=named("lookup")
        )
        triage = agents.Agent(
            name="triage", instructions="Hand off.", handoffs=[looker], model=model, model_settings=named("triage")
        )
        return (await agents.Runner.run(triage, f"What is under key {task['key']}?", max_turns=5)).final_output

    handoff = '<tool_call>{"name": "transfer_to_lookup", "arguments": {}}</tool_call>'
    engine = make_engine(tiny, run, score=lambda task, result: float(result == "It is blue."), max_context=3000)
    script(engine, monkeypatch, lambda text, turn: [handoff, CALL, "It is blue."][turn])
    try:
        sequences = engine.run([{"key": "3"}], group_size=1, seed=0)
    finally:
        engine.close()
    turns = [turn for sequence in sequences for turn in sequence.turns]
    assert [(turn.agent, turn.index) for turn in turns] == [("triage", 0), ("lookup", 1), ("lookup", 2)]
    assert all(s.status == "finished" and s.outcome_reward == 1.0 for s in sequences)  # one episode's reward
    assert {s.group for s in sequences} == {0} and turns[1].tool_calls[0].result == "blue"
    assert engine.last_stats["agent/prefix_breaks"] == len(sequences) - 1 >= 1
    assert sequences[0].to_record(run_id="r", step=1, decode_token=str)["turns"][0]["agent"] == "triage"

"""The agent endpoint (issue #31): an agent's own OpenAI-SDK code plays episodes against the trainer, whose replies
have the OpenAI API's shapes and whose recorded sequences are token-exact (docs/token-pipeline.md, rules 9-10)."""

import json
import sys
import textwrap
import threading
import urllib.error
import urllib.request

import jsonschema
import openai
import pytest
import torch
from agent_endpoint_harness import CALL, LOOKUP, agents_sdk_lookup, make_engine, sampled_runs, script, write_turns
from agentrl.contract.config import ConfigError, load_config_dict
from agentrl.contract.health_config import HealthConfig
from agentrl.contract.training_config import RolloutConfig
from agentrl.environment.agent import AgentProgram
from agentrl.rollout.agent_engine import AgentRolloutEngine
from agentrl.run.health import HealthMonitor
from agentrl.run.health_evidence import StepEvidence
from agentrl.run.metrics import rollout_metrics
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion

# The OpenAI API's chat.completion object (its OpenAPI spec, CreateChatCompletionResponse): the required fields
# and the values they may take.
COMPLETION_SCHEMA = {
    "type": "object",
    "required": ["id", "object", "created", "model", "choices"],
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "chat.completion"},
        "created": {"type": "integer"},
        "model": {"type": "string"},
        "choices": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["index", "message", "finish_reason", "logprobs"],
                "properties": {
                    "index": {"type": "integer"},
                    "finish_reason": {"enum": ["stop", "length", "tool_calls", "content_filter", "function_call"]},
                    "logprobs": {"type": ["object", "null"]},
                    "message": {
                        "type": "object",
                        "required": ["role", "content", "refusal"],
                        "properties": {
                            "role": {"const": "assistant"},
                            "content": {"type": ["string", "null"]},
                            "refusal": {"type": ["string", "null"]},
                            "tool_calls": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["id", "type", "function"],
                                    "properties": {
                                        "id": {"type": "string"},
                                        "type": {"const": "function"},
                                        "function": {
                                            "type": "object",
                                            "required": ["name", "arguments"],
                                            "properties": {"name": {"type": "string"}, "arguments": {"type": "string"}},
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
        "usage": {
            "type": "object",
            "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
            "properties": {k: {"type": "integer"} for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
        },
    },
}
ERROR_SCHEMA = {  # the OpenAI API's ErrorResponse
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {"message": {"type": "string"}, "type": {"type": "string"}},
        }
    },
}


def tool_loop_agent(task, base_url, api_key):
    """A plain OpenAI-SDK agent: call the model, run the tools it asks for, until it answers."""
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    messages = [{"role": "user", "content": f"What is stored under key {task['key']}?"}]
    for _ in range(4):
        reply = client.chat.completions.create(model="policy", messages=messages, tools=[LOOKUP])
        message = reply.choices[0].message
        messages.append(message)
        if not message.tool_calls:
            return message.content
        for call in message.tool_calls:
            value = {"3": "blue"}.get(json.loads(call.function.arguments)["key"], "none")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": value})
    return None


def expected_text(tokenizer, messages, tools):
    return tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False, add_generation_prompt=True)


def test_an_openai_sdk_agent_runs_a_multi_turn_tool_loop(tiny, monkeypatch, trajectory_validator):
    engine = make_engine(tiny, tool_loop_agent, score=lambda task, result: float(result == "It is blue."))
    sampled = script(engine, monkeypatch, lambda text, turn: [CALL, "It is blue."][turn])
    try:
        [episode] = engine.run([{"key": "3"}], group_size=1, seed=0)
    finally:
        engine.close()
    episode.check_invariants()
    assert episode.status == "finished" and episode.outcome_reward == 1.0
    assert [t.assistant for t in episode.turns] == [CALL, "It is blue."]
    [call] = episode.turns[0].tool_calls
    assert (call.name, call.arguments, call.result) == ("lookup", {"key": "3"}, "blue")  # the agent ran it
    assert engine.last_stats["agent/requests"] == 2 and engine.last_stats["agent/prefix_breaks"] == 0
    # One sequence: the prompt, turn 1's sampled ids, the tool message as the template renders it, turn 2's ids.
    conversation = [
        {"role": "user", "content": "What is stored under key 3?"},
        {"role": "assistant", "content": CALL},
        {"role": "tool", "content": "blue"},
    ]
    tokenizer = engine.tokenizer
    assert (
        tokenizer.decode(episode.token_ids)
        == expected_text(tokenizer, conversation, [LOOKUP]) + "It is blue.<|im_end|>"
    )
    assert [ids for ids in sampled_runs(episode)] == sampled
    assert all(lp == -0.5 for lp, m in zip(episode.rollout_logprobs, episode.loss_mask) if m)
    trajectory_validator.validate(episode.to_record(run_id="r", step=1, decode_token=tokenizer.decode))


def test_an_openai_agents_sdk_agent_trains_unchanged(tiny, monkeypatch, trajectory_validator):
    """A framework from PyPI, the OpenAI Agents SDK (the API's own vendor's agent loop, over chat completions): its
    Runner sends the conversation back its own way, and the episode is still one sequence, its tool call run."""
    agents, lookup = agents_sdk_lookup()

    async def run(task, base_url, api_key):
        client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        model = agents.OpenAIChatCompletionsModel(model="policy", openai_client=client)
        agent = agents.Agent(name="lookup", instructions="Answer with the lookup tool.", tools=[lookup], model=model)
        return (await agents.Runner.run(agent, f"What is under key {task['key']}?", max_turns=4)).final_output

    engine = make_engine(tiny, run, score=lambda task, result: float(result == "It is blue."), max_context=1500)
    script(engine, monkeypatch, lambda text, turn: [CALL, "It is blue."][turn])
    try:
        [episode] = engine.run([{"key": "3"}], group_size=1, seed=0)
    finally:
        engine.close()
    assert episode.status == "finished" and episode.outcome_reward == 1.0
    assert engine.last_stats["agent/prefix_breaks"] == 0 and len(episode.turns) == 2
    assert episode.turns[0].tool_calls[0].result == "blue"
    assert episode.prompt_messages[0] == {"role": "system", "content": "Answer with the lookup tool."}
    trajectory_validator.validate(episode.to_record(run_id="r", step=1, decode_token=engine.tokenizer.decode))


def _run_starts(episode):
    """Where each run of sampled ids starts."""
    return [i for i, mask in enumerate(episode.loss_mask) if mask and (i == 0 or not episode.loss_mask[i - 1])]


def test_replies_have_the_openai_shapes_and_errors_are_clear(tiny, monkeypatch):
    seen: dict = {}

    def agent(task, base_url, api_key):
        seen["base_url"], seen["key"] = base_url, api_key
        body = {"model": "x", "messages": [{"role": "user", "content": "hi"}], "tools": [LOOKUP]}
        seen["call"] = _post(base_url, api_key, body)
        served = seen["call"][1]["choices"][0]["message"]
        result = {"role": "tool", "tool_call_id": served["tool_calls"][0]["id"], "content": "blue"}
        seen["answer"] = _post(base_url, api_key, {**body, "messages": [*body["messages"], served, result]})
        seen["bounded"] = _post(base_url, api_key, {**body, "temperature": 0.3, "max_tokens": 100_000})
        seen["n"] = _post(base_url, api_key, {**body, "n": 2})
        seen["no_messages"] = _post(base_url, api_key, {"model": "x", "messages": []})
        models = urllib.request.Request(base_url + "/models", headers={"Authorization": f"Bearer {api_key}"})
        seen["models"] = json.loads(urllib.request.urlopen(models).read())
        seen["unknown"] = _post(base_url.replace("/episodes/", "/episodes/nope-"), api_key, body)
        return "done"

    engine = make_engine(tiny, agent)
    script(engine, monkeypatch, lambda text, turn: CALL if turn == 0 else "fine")
    try:
        engine.run([{"key": "3"}], group_size=1, seed=0)
        seen["ended"] = _post(seen["base_url"], seen["key"], {"messages": [{"role": "user", "content": "late"}]})
    finally:
        engine.close()
    for name in ("call", "answer", "bounded"):
        status, reply = seen[name]
        assert status == 200
        jsonschema.validate(reply, COMPLETION_SCHEMA)
        ChatCompletion.model_validate(reply)  # the SDK's own types, generated from the API's spec
    call = seen["call"][1]["choices"][0]
    assert call["finish_reason"] == "tool_calls" and call["message"]["content"] is None
    assert json.loads(call["message"]["tool_calls"][0]["function"]["arguments"]) == {"key": "3"}
    assert seen["answer"][1]["choices"][0]["message"] == {"role": "assistant", "content": "fine", "refusal": None}
    assert seen["bounded"][1]["agentrl"]["bounded"] == {
        "temperature": {"requested": 0.3, "used": 1.0},
        "max_tokens": {"requested": 100_000, "used": 24},
    }
    usage = seen["call"][1]["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    for name, status, param, code in [
        ("n", 400, "n", "unsupported_value"),
        ("no_messages", 400, "messages", "invalid_value"),
        ("unknown", 404, None, "episode_not_found"),
        ("ended", 410, None, "episode_ended"),
    ]:
        got_status, body = seen[name]
        jsonschema.validate(body, ERROR_SCHEMA)
        assert (got_status, body["error"]["param"], body["error"]["code"]) == (status, param, code), name
    assert seen["models"]["object"] == "list" and seen["models"]["data"][0]["object"] == "model"


def _post(base_url, key, body):
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    request = urllib.request.Request(base_url + "/chat/completions", json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_a_history_rewriting_agent_becomes_several_sequences_with_one_reward(tiny, monkeypatch):
    def summarising_agent(task, base_url, api_key):
        client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        messages = [{"role": "user", "content": "step one"}]
        first = client.chat.completions.create(model="p", messages=messages).choices[0].message
        messages += [first, {"role": "user", "content": "step two"}]
        client.chat.completions.create(model="p", messages=messages)
        summary = [{"role": "user", "content": "summary: one, two. step three"}]  # the history, rewritten
        return client.chat.completions.create(model="p", messages=summary).choices[0].message.content

    engine = make_engine(tiny, summarising_agent, score=lambda task, result: 0.25)
    script(engine, monkeypatch, lambda text, turn: f"ok {turn}")
    try:
        episodes = engine.run([{"key": "1"}], group_size=2, seed=0)
    finally:
        engine.close()
    assert engine.last_stats["agent/prefix_breaks"] == 2  # one per agent run
    assert engine.last_stats["agent/edited_messages"] == 0 and engine.last_stats["agent/broken_episode_share"] == 1
    assert sorted(e.sample for e in episodes) == [0, 1, 2, 3]  # runs 0 and 1, then their continuations
    assert all(e.outcome_reward == 0.25 and e.group == 0 for e in episodes)
    for episode in episodes:
        episode.check_invariants()
        text = engine.tokenizer.decode(episode.token_ids)
        if episode.sample < 2:
            assert [t.index for t in episode.turns] == [0, 1] and "summary" not in text
        else:
            assert [t.index for t in episode.turns] == [2]  # the request's place in the episode
            assert text.startswith(
                expected_text(engine.tokenizer, [{"role": "user", "content": "summary: one, two. step three"}], [])
            )
    # The health alert that most episodes broke, pointing at a sequence that started over.
    monitor = HealthMonitor(HealthConfig(consecutive_steps=1))
    events = monitor.observe(StepEvidence(1, rollout_metrics(episodes) | engine.last_stats, episodes))
    [alert] = [event for event in events if event["code"] == "agent_prefix_breaks"]  # (one reward: zero variance too)
    assert alert["trajectory_ids"] == ["1-0-2"]


def test_an_edited_assistant_message_starts_a_new_sequence_from_the_edited_text(tiny, monkeypatch):
    def editing_agent(task, base_url, api_key):
        client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        messages = [{"role": "user", "content": "go"}]
        first = client.chat.completions.create(model="p", messages=messages).choices[0].message
        edited = {"role": "assistant", "content": first.content.upper()}  # the agent rewrites the model's words
        return client.chat.completions.create(
            model="p", messages=[*messages, edited, {"role": "user", "content": "and?"}]
        )

    engine = make_engine(tiny, editing_agent)
    script(engine, monkeypatch, lambda text, turn: "draft answer")
    try:
        first, second = engine.run([{"key": "1"}], group_size=1, seed=0)
    finally:
        engine.close()
    assert engine.last_stats["agent/prefix_breaks"] == 1 and engine.last_stats["agent/edited_messages"] == 1
    assert first.turns[0].assistant == "draft answer" and len(first.turns) == 1
    prompt = engine.tokenizer.decode(second.token_ids[: second.loss_mask.index(1)])
    assert "DRAFT ANSWER" in prompt and "draft answer" not in prompt  # the edit is context, never trained on
    assert second.prompt_messages[1] == {"role": "assistant", "content": "DRAFT ANSWER"}


def test_an_async_agent_stop_sequences_tool_choice_none_and_a_full_context(tiny, monkeypatch):
    async def agent(task, base_url, api_key):
        client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        messages = [{"role": "user", "content": "a"}]
        first = await client.chat.completions.create(
            model="p", messages=messages, tools=[LOOKUP], tool_choice="none", stop="END"
        )
        messages += [first.choices[0].message, {"role": "user", "content": "x" * 700}]  # past rollout.max_context
        try:
            await client.chat.completions.create(model="p", messages=messages, tools=[LOOKUP], tool_choice="none")
        except openai.BadRequestError as err:
            return first, err.body["code"]

    results = []
    engine = make_engine(tiny, agent, score=lambda task, result: results.append(result) or 1.0)
    script(engine, monkeypatch, lambda text, turn: f"{CALL} END more")
    try:
        [episode] = engine.run([{"key": "1"}], group_size=1, seed=0)
    finally:
        engine.close()
    [(first, code)] = results
    assert code == "context_length_exceeded"
    assert (episode.status, episode.status_reason) == ("truncated", "max_context")
    # tool_choice none: no tools in the prompt and none parsed; the stop sequence is left out of the content only.
    assert first.choices[0].message.content == f"{CALL} " and first.choices[0].message.tool_calls is None
    assert episode.turns[0].assistant == f"{CALL} END more" and not episode.turns[0].tool_calls
    assert "Tools:" not in engine.tokenizer.decode(episode.token_ids) and episode.tool_schemas == []
    assert len(episode.token_ids) < 600  # the request that did not fit added nothing


def test_an_agent_gives_a_turn_a_process_reward_with_its_next_request(tiny, monkeypatch):
    def agent(task, base_url, api_key):
        client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        messages = [{"role": "user", "content": "a"}]
        try:  # nothing answered yet: nothing to reward
            client.chat.completions.create(model="p", messages=messages, extra_body={"agentrl": {"process_reward": 1}})
        except openai.BadRequestError as err:
            refused = err.body["param"]
        first = client.chat.completions.create(model="p", messages=messages).choices[0].message
        messages += [first, {"role": "user", "content": "b"}]
        client.chat.completions.create(model="p", messages=messages, extra_body={"agentrl": {"process_reward": 0.25}})
        return refused

    engine = make_engine(tiny, agent, score=lambda task, result: float(result == "agentrl.process_reward"))
    script(engine, monkeypatch, lambda text, turn: "ok")
    try:
        [episode] = engine.run([{"key": "1"}], group_size=1, seed=0)
    finally:
        engine.close()
    assert [t.process_reward for t in episode.turns] == [0.25, 0.0]
    assert episode.total_reward == 1.25
    assert episode.token_rewards()[episode.turn_end_positions[0]] == 0.25  # on the turn's last sampled token


def test_crashes_exits_hangs_and_late_calls_end_their_episode_not_the_run(tiny, monkeypatch):
    release_hang = threading.Event()
    urls: dict[str, str] = {}

    def agent(task, base_url, api_key):
        urls[task["mode"]] = base_url
        client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        client.chat.completions.create(model="p", messages=[{"role": "user", "content": task["mode"]}])
        if task["mode"] == "crash":
            raise ValueError("the agent's own bug")
        if task["mode"] == "exit":
            sys.exit(3)
        if task["mode"] == "hang":
            release_hang.wait(60)
        return "fine"

    engine = make_engine(tiny, agent, timeout_s=3.0)
    script(engine, monkeypatch, lambda text, turn: "ok")
    tasks = [{"mode": mode} for mode in ("crash", "exit", "hang", "ok")]
    try:
        crash, exit_, hang, ok = engine.run(tasks, group_size=1, seed=0)
        late = _post(
            urls["hang"], "any key", {"messages": [{"role": "user", "content": "late"}]}
        )  # after its episode ended
        again = engine.run([{"mode": "ok"}], group_size=1, seed=1)  # the engine goes on serving
    finally:
        release_hang.set()
        engine.close()
    assert (crash.status, crash.status_reason) == (
        "error",
        "agent_error: agent.py:run raised ValueError: the agent's own bug",
    )
    assert exit_.status == "error" and "tried to end the process (SystemExit: 3)" in exit_.status_reason
    assert hang.status == "error" and hang.status_reason.startswith("agent_timeout: agent.py:run did not return within")
    assert ok.status == "finished" and ok.outcome_reward == 1.0
    assert all(e.turns for e in (crash, exit_, hang, ok))  # each got its first reply before it failed
    assert late[0] == 410 and late[1]["error"]["code"] == "episode_ended"
    assert again[0].status == "finished"


def test_concurrent_episodes_are_not_mixed_up_and_share_batches(tiny):
    """Real sampling from the tiny model: each episode's replies are exactly its own sequence's sampled turns."""
    replies: dict[str, list[str]] = {}

    def agent(task, base_url, api_key):
        client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        messages = [{"role": "user", "content": f"task {task['id']}"}]
        for _ in range(3):
            message = client.chat.completions.create(model="p", messages=messages, tools=[LOOKUP]).choices[0].message
            replies.setdefault(task["id"], []).append(message.content or "")
            messages += [message, {"role": "user", "content": "more"}]
        return task["id"]

    engine = make_engine(tiny, agent, score=lambda task, result: float(result == task["id"]), max_new_tokens=6)
    sampled: dict[tuple[int, ...], list] = {}  # context -> what the sampler gave it (a group's runs share their first)
    generate = engine.sampler.generate

    def recording_generate(contexts, limits, stops, generators, row_done, temperature, top_p):
        def done(row, ids, logprobs, end):
            sampled.setdefault(tuple(contexts[row]), []).append((list(ids), list(logprobs)))
            row_done(row, ids, logprobs, end)

        generate(contexts, limits, stops, generators, done, temperature, top_p)

    engine.sampler.generate = recording_generate
    try:
        episodes = engine.run([{"id": f"t{i}"} for i in range(4)], group_size=2, seed=5)
    finally:
        engine.close()
    assert len(episodes) == 8 and engine.last_stats["agent/prefix_breaks"] == 0
    for episode in episodes:  # every turn's ids and logprobs are what the batched sampler gave its context
        for start, run in zip(_run_starts(episode), sampled_runs(episode), strict=True):
            given = sampled[tuple(episode.token_ids[:start])]
            given.remove((run, episode.rollout_logprobs[start : start + len(run)]))  # raises if it was not sampled
    assert not any(sampled.values())  # and nothing sampled went unrecorded
    assert engine.last_stats["agent/batch_rows_mean"] > 1  # requests of different episodes were sampled together
    for episode in episodes:
        task_id = f"t{episode.group}"
        assert episode.outcome_reward == 1.0 and episode.task_id == task_id
        text = engine.tokenizer.decode(episode.token_ids)
        assert f"task {task_id}" in text and all(f"task t{g}" not in text for g in range(4) if g != episode.group)
        assert len(episode.turns) == 3
    # A group's two runs share a task: their replies are told apart by what each sequence sampled.
    for task_id, texts in replies.items():
        group = [e for e in episodes if e.task_id == task_id]
        assert sorted(texts) == sorted(t.assistant for e in group for t in e.turns)


# Text of every script but the angle brackets that would open a tool call: assigned, printable characters, tabs and
# newlines (SmolLM2's byte-level vocabulary lacks the bytes of a few control characters and unassigned code points).
UNICODE_TEXT = st.text(
    st.characters(
        max_codepoint=0x1FFFF,
        exclude_categories=("Cc", "Cs", "Co", "Cn"),
        exclude_characters="<>",
        include_characters="\n\t",
    ),
    max_size=12,
)


@pytest.fixture(scope="module")
def unicode_chat():
    """SmolLM2's byte-level tokenizer (every unicode text is exact) with the tiny model's tool-rendering template."""
    from agentrl.models.smollm2 import cache_dir, load_smollm2
    from agentrl.models.tiny import CHAT_TEMPLATE
    from transformers import AutoTokenizer

    if not (cache_dir() / "tokenizer.json").is_file():
        load_smollm2(torch.float32)  # writes the cache
    tokenizer = AutoTokenizer.from_pretrained(cache_dir(), local_files_only=True)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


@settings(max_examples=40, deadline=None)
@given(
    turns=st.lists(
        st.tuples(
            st.one_of(UNICODE_TEXT, UNICODE_TEXT.map(lambda key: ("call", key))), st.lists(UNICODE_TEXT, max_size=2)
        ),
        min_size=1,
        max_size=4,
    )
)
def test_the_sequence_decodes_to_the_templates_rendering_of_the_conversation(unicode_chat, turns):
    """For random conversations (tool calls with random unicode arguments, random tool results and user turns), the
    recorded sequence decodes exactly to the template's rendering of the agent's last request (its assistant
    messages as sampled) followed by the last sampled turn, and its sampled ids are exactly those sampled."""
    texts = [
        json.dumps({"name": "lookup", "arguments": {"key": t[1]}}, ensure_ascii=False).join(
            ["<tool_call>", "</tool_call>"]
        )
        if isinstance(t, tuple)
        else t
        for t, _ in turns
    ]
    last_request: list = []

    def agent(task, base_url, api_key):
        client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        messages = [{"role": "user", "content": "start ✓"}]
        for _, results in turns:
            last_request[:] = [m if isinstance(m, dict) else m.model_dump() for m in messages]
            message = client.chat.completions.create(model="p", messages=messages, tools=[LOOKUP]).choices[0].message
            messages.append(message)
            calls = message.tool_calls or []
            messages += [
                {"role": "tool", "tool_call_id": c.id, "content": results[0] if results else ""} for c in calls
            ]
            if len(results) > 1 or not calls:
                messages.append({"role": "user", "content": results[-1] if results else "…"})
        return "done"

    engine = AgentRolloutEngine(
        None,
        unicode_chat,
        AgentProgram(run=agent, score=lambda task, result: 1.0, timeout_s=30, name="agent.py:run"),
        RolloutConfig(max_new_tokens=200, max_context=20_000),
        torch.device("cpu"),
    )
    sampled = write_turns(engine, texts)
    try:
        [episode] = engine.run([{"id": "p"}], group_size=1, seed=0)
    finally:
        engine.close()
    assert episode.status == "finished" and engine.last_stats["agent/prefix_breaks"] == 0
    assert sampled_runs(episode) == sampled
    as_sampled = [
        {"role": "assistant", "content": texts[k]} if m["role"] == "assistant" else m
        for k, m in zip(_assistant_counter(last_request), last_request)
    ]
    rendered = expected_text(unicode_chat, as_sampled, [LOOKUP]) + texts[-1] + unicode_chat.eos_token
    assert unicode_chat.decode(episode.token_ids) == rendered


def _assistant_counter(messages):
    """For each message, the number of assistant messages before it (an assistant message's turn)."""
    count, out = 0, []
    for message in messages:
        out.append(count)
        count += message["role"] == "assistant"
    return out


def test_exactly_one_of_env_and_agent_gives_the_episodes():
    data = {"train": "tasks.jsonl"}
    agent = {"module": "agent.py", "reward": "reward.py:score"}
    env = {"module": "env.py", "class_name": "Env"}
    assert load_config_dict({"agent": agent, "data": data}).agent.function == "run"
    assert load_config_dict({"agent": agent, "data": data, "rollout": {"engine": "vllm"}}).rollout.engine == "vllm"
    for raw, message in [
        ({"data": data}, "not neither"),
        ({"agent": agent, "env": env, "data": data}, "not both"),
        ({"agent": {**agent, "reward": "score"}, "data": data}, "agent.reward"),
    ]:
        with pytest.raises(ConfigError, match=message):
            load_config_dict(raw)


AGENT_PY = """
import openai


def run(task, base_url, api_key):
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    messages = [{"role": "user", "content": f"What is {task['a']} + {task['b']}?"}]
    for _ in range(2):
        message = client.chat.completions.create(model="policy", messages=messages, max_tokens=12).choices[0].message
        messages += [message, {"role": "user", "content": "Check it once more."}]
    return message.content
"""
REWARD_PY = """
from agentrl import EpisodeScore


def score(task, result):
    digits = sum(ch.isdigit() for ch in result or "")
    return EpisodeScore(reward=min(digits, 3) / 3, breakdown={"digits": float(digits)})
"""


def test_grpo_trains_through_the_endpoint_writes_valid_trajectories_and_evaluates(tmp_path, trajectory_validator):
    import yaml
    from agentrl.contract.config import resolve_paths
    from agentrl.contract.schemas import load_schema, validator_for
    from agentrl.run.eval import evaluate
    from agentrl.run.runstore import read_events
    from agentrl.run.trainer import train

    (tmp_path / "agent.py").write_text(textwrap.dedent(AGENT_PY))
    (tmp_path / "reward.py").write_text(textwrap.dedent(REWARD_PY))
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps({"id": i, "a": i, "b": 2 * i}) + "\n" for i in range(6)))
    config = load_config_dict(
        {
            "model": {"path": "tiny", "tiny_layers": 1, "tiny_hidden": 32},
            "agent": {"module": "agent.py", "reward": "reward.py:score", "timeout_s": 60},
            "data": {"train": "tasks.jsonl", "eval": "tasks.jsonl"},
            "rollout": {"group_size": 2, "max_new_tokens": 12, "max_context": 512, "engine": "auto"},
            "train": {
                **{"steps": 2, "batch_size": 4, "micro_batch_size": 4, "lr": 1e-3, "checkpoint_every": 2},
                **{"eval_every": 2, "eval_limit": 3},  # a greedy held-out evaluation through the endpoint
            },
        }
    )
    run_dir = train(config, runs_dir=tmp_path / "runs", config_base_dir=tmp_path, max_steps=1)
    train(None, runs_dir=tmp_path / "runs", resume_dir=run_dir)  # a checkpoint of an agent run resumes
    events = list(read_events(run_dir))
    for event in events:
        validator_for("run-folder.schema.json", "eventLine").validate(event)
    validator_for("run-folder.schema.json", "runRecord").validate(json.loads((run_dir / "run.json").read_text()))
    frozen = yaml.safe_load((run_dir / "config.yaml").read_text())
    jsonschema.validate(frozen, load_schema("run-config.schema.json"))
    assert frozen["env"] is None and frozen["agent"]["module"] == str(tmp_path / "agent.py")
    assert [e["data"]["status"] for e in events if e["type"] == "status"][-1] == "completed"
    assert any("agent endpoint" in e["data"].get("message", "") for e in events if e["type"] == "log")
    metrics = [e["data"]["metrics"] for e in events if e["type"] == "metrics"]
    assert len(metrics) == 2 and all(m["agent/requests"] == 8 and m["agent/prefix_breaks"] == 0 for m in metrics)
    assert all("actor/logprob_gap" in m for m in metrics)
    assert metrics[1]["eval/n"] == 3 and "eval/digits" in metrics[1]
    records = [json.loads(line) for path in sorted((run_dir / "trajectories").glob("*.jsonl")) for line in path.open()]
    assert len(records) == 8
    for record in records:
        trajectory_validator.validate(record)
        assert record["status"] == "finished" and record["stats"]["num_turns"] == 2
        assert record["reward_breakdown"].keys() == {"digits"}
    checkpoint = run_dir / "checkpoints" / "step-000002"
    evaluation = evaluate(
        resolve_paths(config, tmp_path),
        str(tmp_path / "tasks.jsonl"),
        limit=3,
        checkpoint=str(checkpoint),
        baseline=None,
        batch_size=2,
        runs_dir=tmp_path / "eval-runs",
    )
    assert evaluation.metrics["n"] == 3 and len(evaluation.per_task) == 3

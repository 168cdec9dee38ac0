"""The demo's arithmetic task as a plain OpenAI-SDK agent (recipes/arithmetic/agent.py, issue #31): the model reads
through the endpoint exactly the tokens the Tool/ToolEnv recipe gives it, so the two demos compare like for like."""

import json
from pathlib import Path

import pytest
import torch
from agentrl.contract.config import load_config, resolve_paths
from agentrl.environment.agent import load_agent
from agentrl.environment.toolcall import get_format
from agentrl.recipes.arithmetic.env import ArithmeticEnv
from agentrl.recipes.calculator import Calculator
from agentrl.rollout.agent_engine import AgentRolloutEngine
from agentrl.rollout.chat import ChatFormat
from test_agent_endpoint import write_turns

RECIPE = Path(__file__).parents[1] / "agentrl" / "recipes" / "arithmetic"
TASK = {
    "id": "s1-0",
    "question": "A shop sold 2033 shirts in May and 5179 shirts in June. How many in both?",
    "answer": 7212,
}


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    """The recipe's own tokenizer and chat template (the packaged SmolLM2's)."""
    from agentrl.models.smollm2 import cache_dir, load_smollm2
    from transformers import AutoTokenizer

    if not (cache_dir() / "tokenizer.json").is_file():
        load_smollm2(torch.float32)  # writes the cache
    return AutoTokenizer.from_pretrained(cache_dir(), local_files_only=True)


def _scripted_agent_episode(tokenizer, turns, config):
    agent = load_agent(config.agent, None)
    engine = AgentRolloutEngine(None, tokenizer, agent, config.rollout, torch.device("cpu"))

    write_turns(engine, turns)
    try:
        [episode] = engine.run([TASK], group_size=1, seed=0)
    finally:
        engine.close()
    return episode


def test_the_agent_reads_the_tool_env_recipes_tokens_and_earns_its_reward(smollm2_tokenizer):
    config = resolve_paths(load_config(RECIPE / "arithmetic_agent_grpo.agentrl.yaml"), RECIPE)
    toolenv = resolve_paths(load_config(RECIPE / "arithmetic_grpo.agentrl.yaml"), RECIPE)
    assert config.rollout == toolenv.rollout and config.train == toolenv.train and config.algorithm == toolenv.algorithm
    turns = ["<calculator>2033 + 5179</calculator>", "Answer: 7212"]
    episode = _scripted_agent_episode(smollm2_tokenizer, turns, config)

    # What the hf engine gives the ToolEnv recipe's model for the same two turns: its prompt, the first turn, the
    # calculator's result as the template renders an observation, the second turn.
    chat = ChatFormat(smollm2_tokenizer, config.rollout.tool_output_tokens, get_format(config.rollout.tool_format))
    env = ArithmeticEnv(**toolenv.env.args)
    eos = [smollm2_tokenizer.eos_token_id]
    expected = [
        *chat.prompt(env.reset(TASK), [Calculator().schema()]),
        *chat.encode(turns[0]),
        *eos,
        *chat.observation([{"role": "tool", "content": "7212"}], turn_ended_with_eos=True),
        *chat.encode(turns[1]),
        *eos,
    ]
    assert episode.token_ids == expected
    assert "<calculator>24 * 37</calculator>" in smollm2_tokenizer.decode(episode.token_ids)  # the worked example
    assert episode.status == "finished" and episode.outcome_reward == 1.0
    assert episode.reward_breakdown == {"accuracy": 1.0, "answered": 1.0}
    [call] = episode.turns[0].tool_calls
    assert (call.name, call.arguments, call.result) == ("calculator", {"expression": "2033 + 5179"}, "7212")


def test_a_wrong_answer_and_a_bad_expression_earn_nothing(smollm2_tokenizer):
    config = resolve_paths(load_config(RECIPE / "arithmetic_agent_grpo.agentrl.yaml"), RECIPE)
    episode = _scripted_agent_episode(
        smollm2_tokenizer, ["<calculator>shirts + 5179</calculator>", "Answer: 5179"], config
    )
    assert episode.status == "finished" and episode.outcome_reward == 0.0
    [call] = episode.turns[0].tool_calls
    assert call.result.startswith("Error: ")  # the agent's calculator told the model its mistake
    assert json.loads(json.dumps(episode.reward_breakdown)) == {"accuracy": 0.0, "answered": 1.0}


def test_the_agent_recipe_runs_rollout_only_on_a_tiny_model(tmp_path):
    from agentrl.run.runstore import read_events
    from agentrl.run.trainer import train

    config = load_config(
        RECIPE / "arithmetic_agent_grpo.agentrl.yaml",
        ["model.path=tiny", "model.tiny_layers=1", "model.tiny_hidden=32", "rollout.max_context=2048"],
    )
    run_dir = train(config, runs_dir=tmp_path, config_base_dir=RECIPE, rollout_only_episodes=2)
    statuses = [e["data"]["status"] for e in read_events(run_dir) if e["type"] == "status"]
    assert statuses[-1] == "completed"
    records = [json.loads(line) for path in (run_dir / "trajectories").glob("*.jsonl") for line in path.open()]
    assert len(records) == 2 and all(r["status"] != "error" for r in records)
    assert all(r["reward_breakdown"].keys() == {"accuracy", "answered"} for r in records)


def test_a_tag_call_needs_the_tools_single_parameter():
    tags = get_format("tags")
    tools = {"calculator": Calculator().schema()}
    assert tags.write("calculator", {"expression": "1 + 2"}, tools) == "<calculator>1 + 2</calculator>"
    [parsed] = tags.parse(tags.write("calculator", {"expression": "1 + 2"}, tools), "c", tools).calls
    assert parsed.arguments == {"expression": "1 + 2"}
    with pytest.raises(ValueError, match="takes exactly"):
        tags.write("calculator", {"expr": "1"}, tools)
    with pytest.raises(ValueError, match="not among the request's tools"):
        tags.write("search", {"query": "x"}, tools)
    hermes = get_format("hermes")
    [parsed] = hermes.parse(hermes.write("lookup", {"key": "ü"}, {}), "c", {}).calls
    assert (parsed.name, parsed.arguments) == ("lookup", {"key": "ü"})

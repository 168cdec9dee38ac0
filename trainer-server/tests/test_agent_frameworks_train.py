"""The framework matrix trains (issue #43): an agent module written with each framework, as a user's file beside the
run config, runs two GRPO steps of the tiny model through the endpoint, its episodes recorded and the run completed.
The tiny model samples noise, so the agents mostly answer without a tool: what is checked is that every framework's
requests train, not what they learn. CrewAI's and verifiers' agents run in their own virtual environments, the agent
module starting each episode there as a subprocess (agent_endpoint_harness.framework_agent)."""

import json
import textwrap

import pytest
from agent_endpoint_harness import FRAMEWORK_AGENT_PROGRAMS, FRAMEWORK_EPISODE_TIMEOUT_S, framework_venv
from agentrl.contract.config import load_config_dict
from agentrl.run.runstore import read_events
from agentrl.run.trainer import train

LOOKUP = '''
TABLE = {"3": "blue"}


def lookup(key: str) -> str:
    """Return the value stored under a key."""
    return TABLE.get(key, "none")
'''
AGENTS = {
    "langgraph": """
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent
"""
    + LOOKUP
    + """

def run(task, base_url, api_key):
    model = ChatOpenAI(model="policy", base_url=base_url, api_key=api_key, streaming=True, max_retries=0)
    agent = create_react_agent(model, [lookup])
    state = agent.invoke({"messages": [("user", f"What is under key {task['key']}?")]}, {"recursion_limit": 6})
    return state["messages"][-1].content
""",
    "pydantic_ai": """
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
"""
    + LOOKUP
    + """

def run(task, base_url, api_key):
    model = OpenAIChatModel("policy", provider=OpenAIProvider(base_url=base_url, api_key=api_key))
    agent = Agent(model, instructions="Answer with the lookup tool.", tools=[lookup], retries=0)
    try:
        return agent.run_sync(f"What is under key {task['key']}?").output
    except Exception:  # a reply the framework cannot read (noise from an untrained model): no answer
        return None
""",
    "agents": """
import agents
from openai import AsyncOpenAI
"""
    + LOOKUP
    + """

agents.set_tracing_disabled(True)


async def run(task, base_url, api_key):
    client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    model = agents.OpenAIResponsesModel(model="policy", openai_client=client)
    agent = agents.Agent(name="lookup", instructions="Use the tool.", tools=[agents.function_tool(lookup)], model=model)
    result = await agents.Runner.run(agent, f"What is under key {task['key']}?", max_turns=3)
    return result.final_output
""",
}
AGENTS["smolagents"] = """
import smolagents

TABLE = {"3": "blue"}


@smolagents.tool
def lookup(key: str) -> str:
    \"\"\"Return the value stored under a key.

    Args:
        key: the key to look up.
    \"\"\"
    return TABLE.get(key, "none")


def run(task, base_url, api_key):
    model = smolagents.OpenAIServerModel(model_id="policy", api_base=base_url, api_key=api_key)
    agent = smolagents.ToolCallingAgent(tools=[lookup], model=model, max_steps=2, verbosity_level=0)
    return str(agent.run(f"What is under key {task['key']}?"))
"""
AGENTS |= {
    framework: f"""
from agent_endpoint_harness import framework_agent

run = framework_agent({framework!r})
"""
    for framework in FRAMEWORK_AGENT_PROGRAMS
}
REWARD = """
def score(task, result):
    return float("blue" in (result or "")) + 0.1 * len(result or "") / 100
"""


@pytest.mark.parametrize("framework", sorted(AGENTS))
def test_two_grpo_steps_train_through_each_framework(framework, tmp_path):
    timeout_s, batch_size = 120, 4
    if framework in FRAMEWORK_AGENT_PROGRAMS:
        framework_venv(framework)  # skips where it is not made
        # Each episode starts the framework's own Python (seconds of imports): one group of two a step.
        timeout_s, batch_size = FRAMEWORK_EPISODE_TIMEOUT_S, 2
    else:
        pytest.importorskip(
            {
                "langgraph": "langgraph.prebuilt",
                "pydantic_ai": "pydantic_ai",
                "agents": "agents",
                "smolagents": "smolagents",
            }[framework]
        )
    (tmp_path / "agent.py").write_text(textwrap.dedent(AGENTS[framework]))
    (tmp_path / "reward.py").write_text(textwrap.dedent(REWARD))
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps({"id": i, "key": str(i)}) + "\n" for i in range(4)))
    config = load_config_dict(
        {
            "name": f"{framework}-agent",
            "model": {"path": "tiny", "tiny_layers": 1, "tiny_hidden": 32},
            "agent": {"module": "agent.py", "reward": "reward.py:score", "timeout_s": timeout_s},
            "data": {"train": "tasks.jsonl"},
            "rollout": {"group_size": 2, "max_new_tokens": 8, "max_context": 4096, "engine": "hf"},
            "train": {
                "steps": 2,
                "batch_size": batch_size,
                "micro_batch_size": batch_size,
                "lr": 1e-3,
                "checkpoint_every": 2,
            },
        }
    )
    run_dir = train(config, runs_dir=tmp_path / "runs", config_base_dir=tmp_path)
    events = list(read_events(run_dir))
    statuses = [e["data"] for e in events if e["type"] == "status"]
    assert statuses[-1]["status"] == "completed", statuses[-1]
    metrics = [e["data"]["metrics"] for e in events if e["type"] == "metrics"]
    assert len(metrics) == 2 and all(m["agent/requests"] >= batch_size for m in metrics), metrics
    records = [json.loads(line) for path in (run_dir / "trajectories").glob("*.jsonl") for line in path.open()]
    assert len(records) >= 2 * batch_size and any(r["status"] == "finished" for r in records)

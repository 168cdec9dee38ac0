"""New Environment's "from an existing agent" scaffold, one agent.py per framework (extension/templates/agent-*.py.tmpl,
written by extension/scaffold.ts's own renderer through test/renderEnvironment.ts): each passes `agentrl env check`,
loads through the run config's `agent:` section, and plays an episode through the real endpoint under the
scaffold's own rollout settings (tool_format: tags), its turns written by a script: the model calls the calculator
as the worked example does, the agent's own tool runs, the model answers, and reward.py scores the answer.

test/unit/scaffold.test.ts checks the TypeScript side: each framework choice writes its agent.py, the rest the same."""

import json
import re
import subprocess
from pathlib import Path

import pytest
import torch
import yaml
from agent_endpoint_harness import script
from agentrl.contract.env_sources import AgentConfig
from agentrl.contract.training_config import RolloutConfig
from agentrl.environment.agent import load_agent
from agentrl.rollout.agent_engine import AgentRolloutEngine
from agentrl.rollout.check import check_env

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "extension" / "templates"
# framework (agent-<framework>.py.tmpl, scaffold.ts's AGENT_FRAMEWORKS) -> the module its agent.py imports
FRAMEWORKS = {"openai": "openai", "agents-sdk": "agents", "langgraph": "langgraph", "pydantic-ai": "pydantic_ai"}
# What the model reads first, whichever framework asks: the system prompt, the tools as tool_format tags describes
# them, the worked example as chat turns (its call written as the model is to write one), then the task. The same
# prompt as the OpenAI SDK agent's, so what the small model does with that one it does with each (the tiny model's
# chat template here).
FIRST_PROMPT = (
    "<|im_start|>system\nSolve the problem with the calculator. Finish with a line 'Answer: <number>'.\n\n"
    "You can use tools. To use one, write its tag:\n"
    "<calculator>expression</calculator>: Evaluate an arithmetic expression such as 24 * 37.\n"
    "The result comes back in the next message.<|im_end|>\n"
    "<|im_start|>user\nA box holds 24 pencils. How many pencils are in 37 boxes?<|im_end|>\n"
    "<|im_start|>assistant\n<calculator>24 * 37</calculator><|im_end|>\n"
    "<|im_start|>tool\n888<|im_end|>\n"
    "<|im_start|>assistant\nAnswer: 888<|im_end|>\n"
    "<|im_start|>user\nA farm packs 58 eggs in each crate. How many eggs are in 186 crates?<|im_end|>\n"
    "<|im_start|>assistant\n"
)


def render(framework: str, folder: Path) -> Path:
    """The folder New Environment writes for an agent written with `framework` and the embedded SmolLM2 (its
    recommended model), rendered by extension/scaffold.ts itself; returns its run config."""
    spec = {"kind": "agent", "name": "calc-agent", "model": "smollm2", "framework": framework}
    subprocess.run(
        ["npx", "--no-install", "tsx", str(REPO / "test" / "renderEnvironment.ts"), json.dumps(spec), str(folder)],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return folder / "calc-agent.agentrl.yaml"


def test_every_framework_has_its_template():
    assert sorted(p.name for p in TEMPLATES.glob("agent-*.py.tmpl")) == sorted(
        [f"agent-{framework}.py.tmpl" for framework in FRAMEWORKS]
        + ["agent-calculator.py.tmpl", "agent-reward.py.tmpl"]
    )


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_framework_s_agent_checks_and_plays_an_episode_with_its_tool(framework, tiny, tmp_path, monkeypatch):
    pytest.importorskip(FRAMEWORKS[framework])
    config_path = render(framework, tmp_path)
    agent_py = (tmp_path / "agent.py").read_text()
    assert "{{" not in agent_py and re.search(r"^(async )?def run\(task.*api_key: str\)", agent_py, re.M)

    [info] = check_env(config_path)  # what `agentrl env check` reports
    assert info["severity"] == "info", info
    assert info["message"].startswith("agent agent.py:run and its reward function load"), info

    config = yaml.safe_load(config_path.read_text())
    agent = load_agent(AgentConfig(**config["agent"]), base_dir=tmp_path)
    rollout = {key: value for key, value in config["rollout"].items() if key != "group_size"}
    assert rollout["tool_format"] == "tags"
    model, tokenizer = tiny
    engine = AgentRolloutEngine(model, tokenizer, agent, RolloutConfig(**rollout), torch.device("cpu"))
    task = json.loads((tmp_path / "tasks.jsonl").read_text().splitlines()[0])
    seen: list[str] = []

    def reply(text, turn):
        """The model's turn: the calculator called as the worked example calls it, then the answer it gave."""
        seen.append(text)
        return f"Answer: {task['answer']}" if task["answer"] in text else "<calculator>58 * 186</calculator>"

    script(engine, monkeypatch, reply)
    try:
        episodes = engine.run([task], group_size=2, seed=0)  # two agents at once, as a group plays
    finally:
        engine.close()
    assert len(episodes) == 2
    for episode in episodes:
        episode.check_invariants()
        assert episode.status == "finished", episode.status_reason
        [call] = [call for turn in episode.turns for call in turn.tool_calls]
        assert (call.name, call.arguments, call.result) == ("calculator", {"expression": "58 * 186"}, "10788")
        assert episode.outcome_reward == 1.0 and episode.final_answer == "Answer: 10788"
    assert seen[0] == FIRST_PROMPT
    assert engine.last_stats["agent/prefix_breaks"] == 0

"""What the agent endpoint's tests share: an engine over the tiny model whose turns a test writes instead of sampling
them, one episode played on it, the one tool they call (and its OpenAI Agents SDK form), the sampled runs of a
recorded sequence, and the agents that run in a framework's own virtual environment."""

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from agentrl.contract.training_config import RolloutConfig
from agentrl.environment.agent import AgentProgram
from agentrl.rollout.agent_engine import AgentRolloutEngine

TURN_OPENS = "<|im_start|>assistant"  # the tiny model's template opens every assistant turn with it
LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Return the value stored under a key.",
        "parameters": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    },
}
CALL = '<tool_call>{"name": "lookup", "arguments": {"key": "3"}}</tool_call>'


def make_engine(tiny, run, score=lambda task, result: 1.0, timeout_s=30.0, **rollout):
    model, tokenizer = tiny
    cfg = RolloutConfig(**{"max_new_tokens": 24, "max_context": 600, **rollout})
    agent = AgentProgram(run=run, score=score, timeout_s=timeout_s, name="agent.py:run")
    return AgentRolloutEngine(model, tokenizer, agent, cfg, torch.device("cpu"))


def script(engine, monkeypatch, reply):
    """The model's turns written by `reply(context_text, turn)` instead of sampled; returns the ids of every turn
    written, in order, as the engine 'sampled' them."""
    sampled: list[list[int]] = []

    def generate(contexts, limits, stops, generators, row_done, temperature, top_p):
        for row, context in enumerate(contexts):
            text = engine.tokenizer.decode(context)
            ids = engine.chat.encode(reply(text, text.count(TURN_OPENS) - 1))[: limits[row] - 1]
            ids.append(engine.tokenizer.eos_token_id)
            sampled.append(ids)
            row_done(row, ids, [-0.5] * len(ids), "eos")

    monkeypatch.setattr(engine.sampler, "generate", generate)
    return sampled


def write_turns(engine, texts):
    """The one episode's turns written from `texts`, one a request, instead of sampled, each ending with EOS; returns
    the ids of every turn written, as the engine 'sampled' them."""
    written: list[list[int]] = []

    def generate(contexts, limits, stops, generators, row_done, temperature, top_p):
        ids = engine.chat.encode(texts[len(written)]) + [engine.tokenizer.eos_token_id]
        written.append(ids)
        row_done(0, ids, [-1.0] * len(ids), "eos")

    engine.sampler.generate = generate
    return written


REQUIRED_OPENING = '<tool_call>{"name": "'  # what tool_choice "required" writes before the model samples


def play(tiny, monkeypatch, run, replies, timeout_s=60.0, **rollout):
    """One episode of the agent `run` on task {"key": "3"}, its turns written by `replies[turn]`, or by
    `replies(context_text, turn)` (after an opening tool_choice forced, the rest of it), abandoned after `timeout_s`:
    (its sequences, the engine's stats, the ids written)."""

    def reply(text, turn):
        written = replies(text, turn) if callable(replies) else replies[turn]
        return written.removeprefix(REQUIRED_OPENING) if text.endswith(REQUIRED_OPENING) else written

    engine = make_engine(tiny, run, timeout_s=timeout_s, **{"max_context": 1500, **rollout})
    written = script(engine, monkeypatch, reply)
    try:
        sequences = engine.run([{"key": "3"}], group_size=1, seed=0)
    finally:
        engine.close()
    for sequence in sequences:
        sequence.check_invariants()
    return sequences, engine.last_stats, written


def sampled_runs(episode):
    """The episode's runs of consecutive sampled ids, one per turn."""
    runs, current = [], []
    for token, mask in zip(episode.token_ids, episode.loss_mask):
        if mask:
            current.append(token)
        elif current:
            runs, current = [*runs, current], []
    return [*runs, current] if current else runs


def agents_sdk_lookup():
    """The OpenAI Agents SDK (skipped where it is not installed), tracing off, and the lookup tool as its function
    tool: (the agents module, the tool)."""
    agents = pytest.importorskip("agents")
    agents.set_tracing_disabled(True)

    @agents.function_tool
    def lookup(key: str) -> str:
        """Return the value stored under a key."""
        return {"3": "blue"}.get(key, "none")

    return agents, lookup


FRAMEWORK_AGENTS = Path(__file__).parent / "framework_agents"
FRAMEWORK_VENVS = Path(__file__).resolve().parents[2] / ".venv-frameworks"  # made by `make setup-frameworks`
# The agent program of each framework that runs in a virtual environment of its own (its pins clash with this one's).
FRAMEWORK_AGENT_PROGRAMS = {"crewai": "crewai_lookup.py", "verifiers": "verifiers_lookup.py"}
# An episode starts Python processes that import their framework (verifiers: three, its tool server and its chat
# program besides the agent's), 8-10 s each on a busy 2-core machine: the time an episode is given there.
FRAMEWORK_EPISODE_TIMEOUT_S = 600.0


def framework_venv(framework):
    """The framework's own virtual environment, .venv-frameworks/FRAMEWORK; the test is skipped where it is not made."""
    venv = FRAMEWORK_VENVS / framework
    if not (venv / ".installed").exists():
        pytest.skip(f"{venv} is not made: make setup-frameworks")
    return venv


def framework_agent(framework):
    """The episode function of the framework's agent program (framework_agents/) in its own virtual environment: each
    episode runs `python PROGRAM BASE_URL API_KEY KEY` there and returns the answer it printed, as JSON, on its last
    line."""
    venv, program = framework_venv(framework), FRAMEWORK_AGENT_PROGRAMS[framework]
    # The venv's bin/ first, as if activated: a framework runs its own tools from there (verifiers: uv).
    env = {**os.environ, "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env["PYTHONPATH"] = str(FRAMEWORK_AGENTS)  # the trainer's own path means nothing to the venv's Python

    def run(task, base_url, api_key):
        command = [str(venv / "bin" / "python"), str(FRAMEWORK_AGENTS / program), base_url, api_key, task["key"]]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=FRAMEWORK_EPISODE_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"{program} exited {done.returncode}: {done.stderr[-3000:]}")
        return json.loads(done.stdout.splitlines()[-1])

    return run

"""What the agent endpoint's tests share: an engine over the tiny model whose turns a test writes instead of sampling
them, and the one tool they call."""

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

"""The agent endpoint's overhead per request: an OpenAI-SDK agent's request, timed at the agent, against the sampler
call it comes down to (what the engine costs when called directly on the same context), on one workload.

One agent runs `--turns` requests in a row (each extends the last: a user message after every reply), so no request
waits for another's batch; every sampler call is timed where the engine makes it. The overhead is the agent's
latency less its request's sampler time: the HTTP round trip, JSON, the OpenAI SDK's own work, the chat template and
the token capture. Printed as one JSON line (ms per request: mean, median, max; the engine's own
perf/endpoint_overhead_ms, its part of it inside the trainer).

Each way a framework may ask is measured in the same run, side by side, one JSON line each: chat completions, the
same streamed (`stream: true`, the stream read to its end), the Responses API, and the Responses API streamed.

    .venv/bin/python trainer-server/benchmarks/bench_endpoint.py [--model tiny|smollm2] [--turns 20] [--max-new 32]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import openai
import torch
from agentrl.contract.config import ModelConfig
from agentrl.contract.training_config import RolloutConfig
from agentrl.environment.agent import AgentProgram
from agentrl.models.loading import load_policy
from agentrl.rollout.agent_engine import AgentRolloutEngine


def ask(api: str, client: openai.OpenAI, conversation: list[dict]) -> dict:
    """One request the way `api` asks it; returns the assistant message to send back."""
    if api == "chat":
        message = client.chat.completions.create(model="policy", messages=conversation).choices[0].message
        return {"role": "assistant", "content": message.content}
    if api == "chat-stream":
        chunks = client.chat.completions.create(model="policy", messages=conversation, stream=True)
        return {"role": "assistant", "content": "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)}
    stream = api == "responses-stream"
    answer = client.responses.create(model="policy", input=conversation, stream=stream)
    if stream:
        answer = [event for event in answer][-1].response
    return {"role": "assistant", "content": answer.output_text}


def measure(api: str, args: argparse.Namespace, model, tokenizer, device) -> dict:
    latencies_s: list[float] = []

    def agent(task, base_url, api_key):
        client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        conversation = [{"role": "user", "content": "Count from one, one number a line."}]
        for _ in range(args.turns):
            started = time.perf_counter()
            reply = ask(api, client, conversation)
            latencies_s.append(time.perf_counter() - started)
            conversation += [reply, {"role": "user", "content": "Go on."}]

    cfg = RolloutConfig(max_new_tokens=args.max_new, max_context=args.turns * (args.max_new + 32) + 256)
    program = AgentProgram(run=agent, score=lambda task, result: 0.0, timeout_s=3600, name="bench:agent")
    engine = AgentRolloutEngine(model, tokenizer, program, cfg, device)
    sampler_s: list[float] = []
    generate = engine.sampler.generate

    def timed_generate(*call):
        started = time.perf_counter()
        generate(*call)
        sampler_s.append(time.perf_counter() - started)

    engine.sampler.generate = timed_generate
    try:
        episodes = engine.run([{"id": "bench"}], group_size=1, seed=0)
    finally:
        engine.close()
    overheads_ms = [1000 * (latency - sampled) for latency, sampled in zip(latencies_s, sampler_s, strict=True)]
    return {
        "api": api,
        "model": args.model,
        "requests": len(overheads_ms),
        "sequences": len(episodes),
        "tokens_sampled": sum(e.response_length for e in episodes),
        "sampler_ms_mean": round(1000 * statistics.mean(sampler_s), 2),
        "overhead_ms_mean": round(statistics.mean(overheads_ms), 2),
        "overhead_ms_median": round(statistics.median(overheads_ms), 2),
        "overhead_ms_max": round(max(overheads_ms), 2),
        "overhead_share_of_request": round(sum(overheads_ms) / (1000 * sum(latencies_s)), 4),
        "engine_overhead_ms_mean": round(engine.last_stats["perf/endpoint_overhead_ms"], 2),
        "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="model.path (tiny, smollm2, a folder)")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--max-new", type=int, default=32)
    args = parser.parse_args()
    model, tokenizer, device = load_policy(ModelConfig(path=args.model), seed=0)
    for api in ("chat", "chat-stream", "responses", "responses-stream"):
        print(json.dumps(measure(api, args, model, tokenizer, device)), flush=True)


if __name__ == "__main__":
    main()

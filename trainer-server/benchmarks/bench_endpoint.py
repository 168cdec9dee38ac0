"""The agent endpoint's overhead per request: an OpenAI-SDK agent's request, timed at the agent, against the sampler
call it comes down to (what the engine costs when called directly on the same context), on one workload.

One agent runs `--turns` requests in a row (each extends the last: a user message after every reply), so no request
waits for another's batch; every sampler call is timed where the engine makes it. The overhead is the agent's
latency less its request's sampler time: the HTTP round trip, JSON, the OpenAI SDK's own work, the chat template and
the token capture. Printed as one JSON line (ms per request: mean, median, max; the engine's own
perf/endpoint_overhead_ms, its part of it inside the trainer).

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
from agentrl.contract.config import ModelConfig, RolloutConfig
from agentrl.environment.agent import AgentProgram
from agentrl.models.loading import load_policy
from agentrl.rollout.agent_engine import AgentRolloutEngine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="model.path (tiny, smollm2, a folder)")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--max-new", type=int, default=32)
    args = parser.parse_args()
    model, tokenizer, device = load_policy(ModelConfig(path=args.model), seed=0)
    latencies_s: list[float] = []

    def agent(task, base_url, api_key):
        client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
        messages = [{"role": "user", "content": "Count from one, one number a line."}]
        for _ in range(args.turns):
            started = time.perf_counter()
            message = client.chat.completions.create(model="policy", messages=messages).choices[0].message
            latencies_s.append(time.perf_counter() - started)
            messages += [message, {"role": "user", "content": "Go on."}]

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
        [episode] = engine.run([{"id": "bench"}], group_size=1, seed=0)
    finally:
        engine.close()
    overheads_ms = [1000 * (latency - sampled) for latency, sampled in zip(latencies_s, sampler_s, strict=True)]
    print(
        json.dumps(
            {
                "model": args.model,
                "requests": len(overheads_ms),
                "tokens_sampled": episode.response_length,
                "sequence_tokens": len(episode.token_ids),
                "sampler_ms_mean": round(1000 * statistics.mean(sampler_s), 2),
                "overhead_ms_mean": round(statistics.mean(overheads_ms), 2),
                "overhead_ms_median": round(statistics.median(overheads_ms), 2),
                "overhead_ms_max": round(max(overheads_ms), 2),
                "engine_overhead_ms_mean": round(engine.last_stats["perf/endpoint_overhead_ms"], 2),
                "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads",
            }
        )
    )


if __name__ == "__main__":
    main()

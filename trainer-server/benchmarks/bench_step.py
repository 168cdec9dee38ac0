"""Training-step benchmark: both rollout engines and the learner on one multi-turn workload, side by side.

    .venv/bin/python trainer-server/benchmarks/bench_step.py [--model smollm2|tiny] [--episodes 32]

The workload: the packaged SmolLM2-135M-Instruct, 32 episodes a step (4 tasks x 8 samples), 3 turns of at
most 64 new tokens, and a tool that sleeps a random 50-300 ms before it answers. Each phase runs in its own
process, so that each peak memory is its own:

- `hf engine` and `vllm engine`: the same episodes' rollout with rollout.engine hf, then vllm (vLLM's start-up
  is timed apart from the rollout, and its own processes' peak memory is added to the figure);
- `learner`: agentrl's learner (projection only at the read positions, shared prefix run once, micro-batches
  bucketed by length, no scoring pass when on-policy), on the hf engine's episodes;
- `train, async 0` and `train, async 1`: `--train-steps` whole training steps on the vLLM engine (rollout, weight
  push, update) without and with `train.async_steps: 1`, which overlaps step k+1's rollouts with step k's update;
  seconds a step after the first (start-up and warm-up excluded);
- `plain learner`: the same update computed the textbook way (every position's full-vocabulary float32
  log-softmax and entropy, each micro-batch padded to the step's longest episode, a separate no-gradient
  scoring pass for the old logprobs), which is what the learner did before these savings.

Prints rollout tokens/s and episodes/s, learner tokens/s, seconds and peak memory, and the ratios. It asserts
nothing: speed targets live here, not in timed tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from agentrl import EpisodeScore, StepResult, Tool, ToolCallOutcome, ToolEnv
from agentrl.batch import TrainBatch
from agentrl.config import load_config_dict
from agentrl.learner import Learner
from agentrl.model import load_policy
from agentrl.rollout import make_rollout_engine

TASKS = ["the tallest mountain in Europe", "the river through Vienna", "the inventor of the telephone",
         "the capital of Australia"]


class SlowNotes(Tool):
    name = "notes"
    description = "Look something up in the notes."
    parameters = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}

    async def execute(self, query: str) -> Any:
        await asyncio.sleep(random.uniform(0.05, 0.3))  # a tool with network-like latency
        return f"The notes say nothing new about {query[:40]}."


class ThreeTurnEnv(ToolEnv):
    """Every turn gets an observation back, so every episode runs its three turns."""

    def __init__(self, **args: Any) -> None:
        super().__init__(**args)
        self.tools = [SlowNotes()]

    def reset(self, task: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"role": "system", "content": "Use <notes>query</notes> to look things up, then answer."},
                {"role": "user", "content": f"What do you know about {task['topic']}?"}]

    def step(self, assistant_text: str, calls: list[ToolCallOutcome]) -> StepResult:
        return StepResult(messages=[{"role": "tool", "content": "\n".join(str(c.result or c.error) for c in calls)
                                     or "Go on."}])

    def score(self, final_text: str) -> EpisodeScore:
        return EpisodeScore(reward=float(len(final_text) % 7) / 7)  # any spread of rewards, for nonzero advantages


def config(model: str, episodes: int) -> Any:
    return load_config_dict({
        "model": {"path": model},
        "env": {"module": __name__, "class_name": "ThreeTurnEnv"}, "data": {"train": "unused.jsonl"},
        "rollout": {"group_size": 8, "max_turns": 3, "max_new_tokens": 64, "max_context": 1024,
                    "temperature": 1.0, "tool_format": "tags"},
        "train": {"batch_size": episodes, "micro_batch_size": 8, "lr": 1e-6, "bf16_autocast": True},
    })


def peak_memory_gb() -> float:
    """This process's peak resident memory plus the largest of its finished children (vLLM's engine processes)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (own + children) / 2**20  # ru_maxrss is in KiB on Linux


def rollout(model_path: str, engine_name: str, episodes: int, out: Path | None) -> dict[str, float]:
    cfg = config(model_path, episodes)
    cfg.rollout.engine = engine_name
    model, tokenizer, device = load_policy(cfg.model, seed=0)
    started = time.perf_counter()
    engine = make_rollout_engine(model, tokenizer, ThreeTurnEnv, cfg.rollout, device, concurrent_episodes=episodes)
    start_up = time.perf_counter() - started
    tasks = [{"topic": TASKS[i % len(TASKS)]} for i in range(episodes // cfg.rollout.group_size)]
    try:
        started = time.perf_counter()
        generated = engine.run(tasks, group_size=cfg.rollout.group_size, seed=0)
        elapsed = time.perf_counter() - started
    finally:
        engine.close()
    if out is not None:
        out.write_bytes(pickle.dumps(generated))
    tokens = sum(ep.response_length for ep in generated)
    return {"rollout tokens/s": tokens / elapsed, "episodes/s": len(generated) / elapsed, "rollout s": elapsed,
            "start-up s": start_up, "tokens per episode": sum(len(ep.token_ids) for ep in generated) / len(generated),
            "peak memory GB": peak_memory_gb()}


def pipelined(model_path: str, episodes: int, async_steps: int, steps: int, folder: Path) -> dict[str, float]:
    from agentrl.trainer import train

    cfg = config(model_path, episodes)
    tasks = folder / f"tasks-{async_steps}.jsonl"
    tasks.write_text("".join(json.dumps({"id": str(i), "topic": topic}) + "\n" for i, topic in enumerate(TASKS)))
    cfg.data.train = str(tasks)
    cfg.rollout.engine = "vllm"
    cfg.train.async_steps = async_steps
    cfg.train.steps = cfg.train.checkpoint_every = steps
    run_dir = train(cfg, runs_dir=folder / "runs", config_base_dir=folder)
    times = [json.loads(line)["time"] for line in (run_dir / "events.jsonl").read_text().splitlines()
             if json.loads(line)["type"] == "metrics"]
    per_step = (times[-1] - times[0]) / (len(times) - 1)
    return {"s a step after the first": per_step, "steps/min": 60 / per_step, "peak memory GB": peak_memory_gb()}


class PlainLearner(Learner):
    """The textbook computation of the same update (see the module docstring)."""

    def on_policy(self) -> bool:
        return False  # always a separate scoring pass

    def _micro_rows(self, batch: TrainBatch) -> list[torch.Tensor]:
        return list(torch.arange(len(batch)).split(self.config.train.micro_batch_size))

    def _forward(self, model: Any, batch: TrainBatch, *, with_values: bool) -> dict[str, torch.Tensor]:
        input_ids, attention = batch.input_ids.to(self.device), batch.attention_mask.to(self.device)
        logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1].float() / self.temperature
        logprobs_all = torch.log_softmax(logits, -1)
        picked = logprobs_all.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
        entropy = -(logprobs_all.exp() * logprobs_all).sum(-1)
        zeros = torch.zeros((len(batch), 1), device=self.device)
        return {"logprobs": torch.cat([zeros, picked], 1), "entropy": torch.cat([zeros, entropy], 1)}


def learn(model_path: str, episodes: int, source: Path, plain: bool) -> dict[str, float]:
    cfg = config(model_path, episodes)
    model, tokenizer, device = load_policy(cfg.model, seed=0)
    generated = pickle.loads(source.read_bytes())
    learner = (PlainLearner if plain else Learner)(model, tokenizer, cfg, device)
    started = time.perf_counter()
    metrics = learner.update(generated).metrics
    elapsed = time.perf_counter() - started
    return {"learner tokens/s": sum(len(ep.token_ids) for ep in generated) / elapsed, "update s": elapsed,
            "logprob gap": metrics["actor/logprob_gap"], "peak memory GB": peak_memory_gb()}


def child(args: list[str]) -> dict[str, float]:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_step {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2", help="smollm2 (the packaged default) or tiny")
    parser.add_argument("--episodes", type=int, default=32, help="episodes a step, a multiple of 8")
    parser.add_argument("--train-steps", type=int, default=4, help="steps of each async_steps run (0: skip them)")
    parser.add_argument("--phase", choices=["hf", "vllm", "learner", "plain-learner", "train-0", "train-1"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--episodes-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.manual_seed(0)
    random.seed(0)
    if args.phase in ("hf", "vllm"):
        print(json.dumps(rollout(args.model, args.phase, args.episodes, args.episodes_file)))
        return
    if args.phase in ("train-0", "train-1"):
        with tempfile.TemporaryDirectory() as folder:
            print(json.dumps(pipelined(args.model, args.episodes, int(args.phase[-1]), args.train_steps, Path(folder))))
        return
    if args.phase:
        print(json.dumps(learn(args.model, args.episodes, args.episodes_file, plain=args.phase == "plain-learner")))
        return
    common = ["--model", args.model, "--episodes", str(args.episodes)]
    with tempfile.TemporaryDirectory() as folder:
        episodes_file = Path(folder) / "episodes.pkl"
        figures = {"hf engine": child([*common, "--phase", "hf", "--episodes-file", str(episodes_file)])}
        figures["vllm engine"] = child([*common, "--phase", "vllm"])
        for phase in ("plain-learner", "learner"):
            figures[phase.replace("-", " ")] = child([*common, "--phase", phase, "--episodes-file", str(episodes_file)])
        if args.train_steps > 1:
            for async_steps in (0, 1):
                figures[f"train, async {async_steps}"] = child(
                    [*common, "--train-steps", str(args.train_steps), "--phase", f"train-{async_steps}"])
    print(f"model {args.model}, {args.episodes} episodes a step, 3 turns of up to 64 new tokens, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}")
    for name, values in figures.items():
        print(f"  {name:14s} " + "  ".join(f"{key} {value:,.3g}" for key, value in values.items()))
    hf, vllm = figures["hf engine"], figures["vllm engine"]
    print(f"  vllm engine vs hf engine: rollout tokens/s {vllm['rollout tokens/s'] / hf['rollout tokens/s']:.2f}x, "
          f"episodes/s {vllm['episodes/s'] / hf['episodes/s']:.2f}x")
    plain, ours = figures["plain learner"], figures["learner"]
    print(f"  learner vs plain learner: {plain['update s'] / ours['update s']:.2f}x faster, "
          f"peak memory {ours['peak memory GB']:.1f} GB vs {plain['peak memory GB']:.1f} GB")
    if args.train_steps > 1:
        sequential, overlapped = figures["train, async 0"], figures["train, async 1"]
        print(f"  train.async_steps 1 vs 0: {sequential['s a step after the first'] / overlapped['s a step after the first']:.2f}x "
              "the steps per minute")
    step_hf = hf["rollout s"] + ours["update s"]
    step_vllm = vllm["rollout s"] + ours["update s"]
    print(f"  step (rollout + update): hf {step_hf:.1f} s, vllm {step_vllm:.1f} s (+ weight push, see perf/weight_sync_s)")


if __name__ == "__main__":
    main()

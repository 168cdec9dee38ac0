"""Training-step benchmark: both rollout engines and the learner on one multi-turn workload, side by side.

    .venv/bin/python trainer-server/benchmarks/bench_step.py [--model smollm2|tiny] [--episodes 32]

The workload: the packaged SmolLM2-135M-Instruct, 32 episodes a step (4 tasks x 8 samples), 3 turns of at
most 64 new tokens, and a tool that sleeps a random 50-300 ms before it answers. Each phase runs in its own
process, so that each peak memory is its own:

- `hf engine` and `vllm engine`: the same episodes' rollout with rollout.engine hf, then vllm (vLLM's start-up
  is timed apart from the rollout, and its own processes' peak memory is added to the figure);
- `learner`: agentrl's learner (projection only at the read positions, shared prefix run once, micro-batches
  by length or by group, whichever computes fewer positions, no scoring pass when on-policy, episodes whose
  advantage is 0 left out), on the hf engine's episodes;
- `train, async 0` and `train, async 1`: `--train-steps` whole training steps on the vLLM engine (rollout, weight
  push, update) without and with `train.async_steps: 1`, which overlaps step k+1's rollouts with step k's update;
  seconds a step after the first (start-up and warm-up excluded);
- `plain learner`: the same update computed the textbook way (every position's full-vocabulary float32
  log-softmax and entropy in every pass, each micro-batch padded to the step's longest episode, a separate
  no-gradient scoring pass for the old logprobs, every episode run whatever its advantage), which is what the
  learner did before these savings;
- `train, single turn` and `trl` (with `--trl`): `--train-steps` whole steps of a single-turn workload (the same
  prompts, one answer of at most 64 new tokens, no tool), by agentrl (rollout.engine auto) and by TRL's
  GRPOTrainer (benchmarks/trl_step.py, run in TRL's own virtual environment, .venv-trl, which
  results/trl/setup.sh makes) with the same group size, batch, micro-batch, learning rate, bf16 autocast and
  reward; seconds a step after the first, and their ratio. `--only-trl` runs just these two;
- `learner, vllm idle` (with `--beside-engine`): the single-turn update right after a rollout (as in the training
  loop), while a started vLLM engine sits idle beside it, and again after the engine has closed (its processes
  compute nothing meanwhile; on machines where memory held by another process slows this one, the figures differ).

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
from agentrl.contract.config import RunConfig, load_config_dict
from agentrl.learning.batch import TrainBatch
from agentrl.learning.distribution import OneProcess
from agentrl.learning.learner import Learner
from agentrl.models.loading import load_policy, resolve_device
from agentrl.models.precision import uses_bf16_autocast
from agentrl.rollout.factory import make_rollout_engine

TASKS = [
    "the tallest mountain in Europe",
    "the river through Vienna",
    "the inventor of the telephone",
    "the capital of Australia",
]


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
        return [
            {"role": "system", "content": "Use <notes>query</notes> to look things up, then answer."},
            {"role": "user", "content": f"What do you know about {task['topic']}?"},
        ]

    def step(self, assistant_text: str, calls: list[ToolCallOutcome]) -> StepResult:
        return StepResult(
            messages=[{"role": "tool", "content": "\n".join(str(c.result or c.error) for c in calls) or "Go on."}]
        )

    def score(self, final_text: str) -> EpisodeScore:
        return EpisodeScore(reward=length_reward(final_text))


def length_reward(text: str) -> float:
    """Any spread of rewards, for nonzero advantages; the TRL phase scores its completions with it too."""
    return float(len(text) % 7) / 7


def single_turn_messages(topic: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "Answer in one short paragraph."},
        {"role": "user", "content": f"What do you know about {topic}?"},
    ]


class SingleTurnEnv(ToolEnv):
    """One answer per episode, no tool: the workload TRL's GRPOTrainer runs as it comes."""

    def reset(self, task: dict[str, Any]) -> list[dict[str, Any]]:
        return single_turn_messages(task["topic"])

    def step(self, assistant_text: str, calls: list[ToolCallOutcome]) -> StepResult:
        return StepResult(done=True)

    def score(self, final_text: str) -> EpisodeScore:
        return EpisodeScore(reward=length_reward(final_text))


def config(model: str, episodes: int) -> Any:
    return load_config_dict(
        {
            "model": {"path": model},
            "env": {"module": __name__, "class_name": "ThreeTurnEnv"},
            "data": {"train": "unused.jsonl"},
            "rollout": {
                "group_size": 8,
                "max_turns": 3,
                "max_new_tokens": 64,
                "max_context": 1024,
                "temperature": 1.0,
                "tool_format": "tags",
            },
            "train": {"batch_size": episodes, "micro_batch_size": 8, "lr": 1e-6, "bf16_autocast": "auto"},
        }
    )


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
    return {
        "rollout tokens/s": tokens / elapsed,
        "episodes/s": len(generated) / elapsed,
        "rollout s": elapsed,
        "start-up s": start_up,
        "tokens per episode": sum(len(ep.token_ids) for ep in generated) / len(generated),
        "peak memory GB": peak_memory_gb(),
    }


def train_steps(
    model_path: str, episodes: int, steps: int, folder: Path, *, async_steps: int = 0, single_turn: bool = False
) -> dict[str, float]:
    from agentrl.run.trainer import train

    cfg = config(model_path, episodes)
    tasks = folder / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": str(i), "topic": topic}) + "\n" for i, topic in enumerate(TASKS)))
    cfg.data.train = str(tasks)
    cfg.rollout.engine = "auto" if single_turn else "vllm"
    if single_turn:
        cfg.env.class_name, cfg.rollout.max_turns = "SingleTurnEnv", 1
    cfg.train.async_steps = async_steps
    cfg.train.steps = cfg.train.checkpoint_every = steps
    run_dir = train(cfg, runs_dir=folder / "runs", config_base_dir=folder)
    times = [
        json.loads(line)["time"]
        for line in (run_dir / "events.jsonl").read_text().splitlines()
        if json.loads(line)["type"] == "metrics"
    ]
    per_step = (times[-1] - times[0]) / (len(times) - 1)
    return {"s a step after the first": per_step, "steps/min": 60 / per_step, "peak memory GB": peak_memory_gb()}


def trl(model_path: str, episodes: int, steps: int, folder: Path) -> dict[str, float]:
    """TRL's GRPOTrainer on the single-turn workload, in TRL's own virtual environment."""
    from agentrl.models.smollm2 import cache_dir, load_smollm2

    trl_python = Path(__file__).resolve().parents[2] / ".venv-trl" / "bin" / "python"
    if not trl_python.exists():
        raise SystemExit(f"{trl_python} is missing: run results/trl/setup.sh first")
    if model_path != "smollm2":
        raise SystemExit("the TRL phase runs the packaged smollm2 only (TRL loads a transformers folder)")
    load_smollm2(torch.float32)  # makes the transformers folder, once
    cfg = config(model_path, episodes)
    spec = folder / "trl.json"
    spec.write_text(
        json.dumps(
            {
                "model_folder": str(cache_dir()),
                "topics": TASKS,
                "steps": steps,
                "episodes": episodes,
                "group_size": cfg.rollout.group_size,
                "micro_batch_size": cfg.train.micro_batch_size,
                "max_new_tokens": cfg.rollout.max_new_tokens,
                "temperature": cfg.rollout.temperature,
                "lr": cfg.train.lr,
                "bf16_autocast": uses_bf16_autocast(cfg.train.bf16_autocast, resolve_device(cfg.model.device)),
                "kl_coef": cfg.algorithm.kl.coef,
                "clip_eps": cfg.algorithm.clip_eps,
            }
        )
    )
    return child(["--spec", str(spec)], python=str(trl_python), script=Path(__file__).with_name("trl_step.py"))


class InBatchOrder(OneProcess):
    """Micro-batches of the rows in the batch's order, not bucketed by length or group."""

    def micro_rows(self, batch: TrainBatch, size: int, with_values: bool) -> list[torch.Tensor]:
        return list(torch.arange(len(batch)).split(size))


class PlainLearner(Learner):
    """The textbook computation of the same update (see the module docstring)."""

    def __init__(self, model: Any, tokenizer: Any, cfg: RunConfig, device: torch.device) -> None:
        super().__init__(model, tokenizer, cfg, device, InBatchOrder())
        self.forward = self._plain_forward
        self.temperature = cfg.rollout.temperature if cfg.rollout.temperature > 0 else 1.0

    def on_policy(self) -> bool:
        return False  # always a separate scoring pass

    def _rows_to_train(self, zero_advantage: torch.Tensor, kl_in_loss: bool, batch: TrainBatch) -> torch.Tensor:
        return torch.arange(len(zero_advantage))  # every episode, whatever its advantage

    def _plain_forward(
        self, model: Any, batch: TrainBatch, *, with_values: bool, with_entropy: bool
    ) -> dict[str, torch.Tensor]:
        # Entropy in every pass, `with_entropy` or not, as the learner did before.
        input_ids, attention = batch.input_ids.to(self.device), batch.attention_mask.to(self.device)
        logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1].float() / self.temperature
        logprobs_all = torch.log_softmax(logits, -1)
        picked = logprobs_all.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
        entropy = -(logprobs_all.exp() * logprobs_all).sum(-1)
        greedy = (logprobs_all.argmax(-1) == input_ids[:, 1:]).float()
        zeros = torch.zeros((len(batch), 1), device=self.device)
        return {
            "logprobs": torch.cat([zeros, picked], 1),
            "entropy": torch.cat([zeros, entropy], 1),
            "greedy": torch.cat([zeros, greedy], 1),
        }


def learn(model_path: str, episodes: int, source: Path, plain: bool) -> dict[str, float]:
    cfg = config(model_path, episodes)
    model, tokenizer, device = load_policy(cfg.model, seed=0)
    generated = pickle.loads(source.read_bytes())
    learner = (PlainLearner if plain else Learner)(model, tokenizer, cfg, device)
    started = time.perf_counter()
    metrics = learner.update(generated).metrics
    elapsed = time.perf_counter() - started
    return {
        "learner tokens/s": sum(len(ep.token_ids) for ep in generated) / elapsed,
        "update s": elapsed,
        "logprob gap": metrics["actor/logprob_gap"],
        "peak memory GB": peak_memory_gb(),
    }


def learner_beside_engine(model_path: str, episodes: int) -> dict[str, float]:
    """The single-turn update, timed right after a rollout (as in the training loop), twice while a started vLLM engine
    sits idle beside it (its processes hold their memory and compute nothing), then twice after the engine has
    closed: what the engine's presence alone costs, and what the rollout just before adds."""
    cfg = config(model_path, episodes)
    cfg.env.class_name, cfg.rollout.max_turns, cfg.rollout.engine = "SingleTurnEnv", 1, "vllm"
    model, tokenizer, device = load_policy(cfg.model, seed=0)
    learner = Learner(model, tokenizer, cfg, device)
    engine = make_rollout_engine(model, tokenizer, SingleTurnEnv, cfg.rollout, device, concurrent_episodes=episodes)
    tasks = [{"topic": TASKS[i % len(TASKS)]} for i in range(episodes // cfg.rollout.group_size)]
    generated = engine.run(tasks, group_size=cfg.rollout.group_size, seed=0)
    learner.update(generated)  # warm-up

    def update_seconds() -> float:
        started = time.perf_counter()
        learner.update(generated)
        return time.perf_counter() - started

    engine_memory = sum(
        int(line.split()[1])
        for pid in subprocess.run(["pgrep", "-f", "VLLM::"], capture_output=True, text=True).stdout.split()
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    beside = min(update_seconds(), update_seconds())
    after_rollout = []
    for seed in (1, 2):  # as in the training loop: the engine has just generated
        engine.run(tasks, group_size=cfg.rollout.group_size, seed=seed)
        after_rollout.append(update_seconds())
    engine.close()
    alone = min(update_seconds(), update_seconds())
    return {
        "update s right after a rollout": min(after_rollout),
        "update s beside the engine": beside,
        "update s alone": alone,
        "engine memory GB": engine_memory / 2**20,
    }


def child(args: list[str], python: str = sys.executable, script: Path = Path(__file__)) -> dict[str, float]:
    done = subprocess.run([python, str(script), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_step {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2", help="smollm2 (the packaged default) or tiny")
    parser.add_argument("--episodes", type=int, default=32, help="episodes a step, a multiple of 8")
    parser.add_argument("--train-steps", type=int, default=4, help="steps of each async_steps run (0: skip them)")
    parser.add_argument("--trl", action="store_true", help="also time TRL's GRPOTrainer on the single-turn workload")
    parser.add_argument("--only-trl", action="store_true", help="time only agentrl and TRL on the single-turn workload")
    parser.add_argument(
        "--beside-engine",
        action="store_true",
        help="also time the single-turn update beside an idle vLLM engine and after it has closed",
    )
    parser.add_argument(
        "--phase",
        choices=["hf", "vllm", "learner", "plain-learner", "train-0", "train-1", "train-single", "trl", "beside"],
        help=argparse.SUPPRESS,
    )
    parser.add_argument("--episodes-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.manual_seed(0)
    random.seed(0)
    if args.phase in ("hf", "vllm"):
        print(json.dumps(rollout(args.model, args.phase, args.episodes, args.episodes_file)))
        return
    if args.phase in ("train-0", "train-1", "train-single", "trl"):
        with tempfile.TemporaryDirectory() as folder:
            if args.phase == "trl":
                figures = trl(args.model, args.episodes, args.train_steps, Path(folder))
            else:
                figures = train_steps(
                    args.model,
                    args.episodes,
                    args.train_steps,
                    Path(folder),
                    async_steps=int(args.phase == "train-1"),
                    single_turn=args.phase == "train-single",
                )
        print(json.dumps(figures))
        return
    if args.phase == "beside":
        print(json.dumps(learner_beside_engine(args.model, args.episodes)))
        return
    if args.phase:
        print(json.dumps(learn(args.model, args.episodes, args.episodes_file, plain=args.phase == "plain-learner")))
        return
    common = ["--model", args.model, "--episodes", str(args.episodes)]
    steps = ["--train-steps", str(args.train_steps)]
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        episodes_file = Path(folder) / "episodes.pkl"
        if not args.only_trl:
            figures["hf engine"] = child([*common, "--phase", "hf", "--episodes-file", str(episodes_file)])
            figures["vllm engine"] = child([*common, "--phase", "vllm"])
            for phase in ("plain-learner", "learner"):
                figures[phase.replace("-", " ")] = child(
                    [*common, "--phase", phase, "--episodes-file", str(episodes_file)]
                )
            if args.train_steps > 1:
                for async_steps in (0, 1):
                    figures[f"train, async {async_steps}"] = child([*common, *steps, "--phase", f"train-{async_steps}"])
        if (args.trl or args.only_trl) and args.train_steps > 1:
            figures["train, single turn"] = child([*common, *steps, "--phase", "train-single"])
            figures["trl"] = child([*common, *steps, "--phase", "trl"])
        if args.beside_engine:
            figures["learner, vllm idle"] = child([*common, "--phase", "beside"])
    print(
        f"model {args.model}, {args.episodes} episodes a step, up to 64 new tokens a turn, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}"
    )
    for name, values in figures.items():
        print(f"  {name:18s} " + "  ".join(f"{key} {value:,.3g}" for key, value in values.items()))
    if "hf engine" in figures:
        hf, vllm = figures["hf engine"], figures["vllm engine"]
        print(
            f"  vllm engine vs hf engine: rollout tokens/s {vllm['rollout tokens/s'] / hf['rollout tokens/s']:.2f}x, "
            f"episodes/s {vllm['episodes/s'] / hf['episodes/s']:.2f}x"
        )
        plain, ours = figures["plain learner"], figures["learner"]
        print(
            f"  learner vs plain learner: {plain['update s'] / ours['update s']:.2f}x faster, "
            f"peak memory {ours['peak memory GB']:.1f} GB vs {plain['peak memory GB']:.1f} GB"
        )
        print(
            f"  step (rollout + update): hf {hf['rollout s'] + ours['update s']:.1f} s, "
            f"vllm {vllm['rollout s'] + ours['update s']:.1f} s (+ weight push, see perf/weight_sync_s)"
        )
    if "train, async 0" in figures:
        sequential, overlapped = figures["train, async 0"], figures["train, async 1"]
        print(
            f"  train.async_steps 1 vs 0: {sequential['s a step after the first'] / overlapped['s a step after the first']:.2f}x "
            "the steps per minute"
        )
    if "trl" in figures:
        ours, theirs = (
            figures["train, single turn"]["s a step after the first"],
            figures["trl"]["s a step after the first"],
        )
        print(
            f"  single turn, agentrl vs TRL GRPOTrainer: {ours:.1f} s vs {theirs:.1f} s a step "
            f"(agentrl's step is {ours / theirs:.2f}x TRL's)"
        )


if __name__ == "__main__":
    main()

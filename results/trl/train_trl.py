"""Trains a recipe's task with TRL's GRPOTrainer, for the side-by-side comparison with agentrl (runs in
.venv-trl, made by setup.sh; results/trl_compare.py runs it and evaluates what it saves).

    .venv-trl/bin/python results/trl/train_trl.py --task DIR --budget-s SECONDS --out DIR [--max-steps N]

DIR is what export_task.py wrote from the run config: the training prompts as agentrl's engine renders
them (token ids), in the order agentrl draws them, and the config's settings.

Which form of the task: multi-turn, as agentrl runs it. TRL 1.13 has two ways to train with tools:

* `tools=` / `environment_factory=`: TRL writes the tool descriptions into the prompt with the chat
  template's `tools` argument and parses the model's calls with the tokenizer's response schema, i.e. the
  template's own JSON tool-call convention. SmolLM2-135M-Instruct's template has no tool support (it
  ignores `tools`, and TRL knows no response schema for it), and the demo's task is written in the tag
  format (`<calculator>24 * 37</calculator>`), which TRL cannot parse. Used as is, it would be another task.
* `rollout_func=` (experimental in TRL 1.13): the rollout is the caller's, and GRPOTrainer does the rest:
  group advantages, the clipped policy loss, the optimizer. Its `env_mask` output marks which completion
  tokens the model sampled (in the loss) and which came from the environment (context only, no loss).

So this script uses `rollout_func`, and it is the demo's episode, turn for turn: generate until EOS or the
call's closing tag (`rollout.stop_at_tool_call`), parse the turn with agentrl's tag format, run the
calculator, let the recipe's ToolEnv say what happens next, append the tool message as the chat template
renders it (env_mask 0), generate the next turn; at the end the ToolEnv scores the last turn. The env,
the tool, the parser and the chat rendering are imported from trainer-server (agentrl's own code, no
agentrl training code), so both trainers run the same task and reward. Generation is plain
`model.generate` on the policy being trained, the same backend TRL's own generation uses without vLLM.

Settings mirrored from the run config: group size (num_generations), episodes per step (the generation
batch = train.batch_size, one optimizer step per batch), micro batch, temperature, top_p, max new tokens
per turn, max turns, max context, learning rate (constant, AdamW), weight decay, gradient clipping, update
epochs (num_iterations), clip range, KL coefficient (beta), loss aggregation (token-mean = TRL's "dapo"),
reward scaling by the group std, and train.bf16_autocast: bf16 autocast for the learner's forward and
backward while the weights stay float32 and the rollout runs in full precision, as agentrl does.

The wall-clock budget counts from before the model is loaded, as agentrl's train_wall_s does, and a
callback ends training at the end of the step after which one more step would not fit in it (so TRL never
gets more time than agentrl had). Saving the final model comes after the clock stops.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Everything is local: the model is a folder on disk and nothing may reach a hub.
for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func's warning; the docs say it's experimental

FORM = "multi-turn"
FORM_NOTE = (
    "multi-turn episodes through GRPOTrainer(rollout_func=...) with env_mask: the tool call, the "
    "calculator's result as a tool message (outside the loss) and the answer, as agentrl runs them; "
    "TRL's template-based tools= cannot express the tag-format task on SmolLM2's tool-less template"
)
LOSS_TYPE = {"token-mean": "dapo", "seq-mean-token-mean": "grpo", "seq-mean-token-sum-norm": "dr_grpo"}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


@contextlib.contextmanager
def full_precision(model: Any) -> Iterator[None]:
    """With bf16=True, accelerate wraps the model's forward in bf16 autocast (and keeps the original as
    `_original_forward`). agentrl's bf16_autocast covers the learner only and samples in full precision;
    generating through the original forward does the same here."""
    original = getattr(model, "_original_forward", None)
    if original is None:
        yield
        return
    wrapped = model.forward
    model.forward = original
    try:
        yield
    finally:
        model.forward = wrapped


@dataclass
class Episode:
    """One rollout: the prompt (fixed) and the completion, turn by turn."""

    task: dict[str, Any]
    env: Any
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)  # 1: sampled by the model (in the loss); 0: from the env
    logprobs: list[float] = field(default_factory=list)
    last_text: str = ""
    done: bool = False
    status: str = "running"  # finished / truncated / error, as agentrl's episode status
    tool_calls: int = 0

    def add(self, ids: list[int], logprobs: list[float], sampled: bool) -> None:
        self.completion_ids += ids
        self.env_mask += [int(sampled)] * len(ids)
        self.logprobs += logprobs

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)


class AgentRollout:
    """GRPOTrainer's rollout_func: runs every prompt of the step as an agentrl episode (see the docstring)."""

    def __init__(self, settings: dict[str, Any], tokenizer: Any, records: list[dict[str, Any]]) -> None:
        from agentrl.environment.loader import env_factory, load_env_class
        from agentrl.environment.toolcall import get_format, schemas_by_name
        from agentrl.rollout.chat import ChatFormat

        self.tokenizer = tokenizer
        self.rollout = settings["rollout"]
        self.by_prompt = {r["prompt"]: r for r in records}
        env = settings["env"]
        self.make_env = env_factory(load_env_class(env["module"], env["class_name"]), env["args"], env["data_files"])
        self.call_format = get_format(self.rollout["tool_format"])
        self.chat = ChatFormat(tokenizer, self.rollout["tool_output_tokens"], self.call_format)
        self.schemas = schemas_by_name([t.schema() for t in self.make_env().tools])
        stop = self.rollout["stop_at_tool_call"] and self.schemas
        self.call_ends = self.call_format.call_end(self.schemas) if stop else []
        self.eos_id, self.pad_id = tokenizer.eos_token_id, tokenizer.pad_token_id
        self.history: list[dict[str, Any]] = []  # per call (= per step): the episodes' outcome means

    def check_prompts(self, records: list[dict[str, Any]]) -> None:
        """The exported ids must be what this venv's tokenizer and template render too: a different
        transformers here than in the project's venv would otherwise go unnoticed."""
        for record in records[:8]:
            env = self.make_env()
            ids = self.chat.prompt(env.reset(record["task"]), [t.schema() for t in env.tools])
            if ids != record["prompt_ids"]:
                raise SystemExit(
                    "train_trl: this venv renders the prompts differently from the export; "
                    "give .venv-trl the project's transformers version (setup.sh does)"
                )

    def __call__(self, prompts: list[str], trainer: Any) -> dict[str, list]:
        started = time.perf_counter()
        # GRPOTrainer's sampler repeats each prompt num_generations times, consecutively: one episode each.
        episodes = []
        for prompt in prompts:
            record = self.by_prompt[prompt]
            env = self.make_env()
            env.reset(record["task"])  # the env's per-episode state (the gold answer); the prompt is the export's
            episodes.append(Episode(task=record["task"], env=env, prompt_ids=list(record["prompt_ids"])))
        model = trainer.accelerator.unwrap_model(trainer.model)
        for turn in range(self.rollout["max_turns"]):
            active = [
                (e, min(self.rollout["max_new_tokens"], self.rollout["max_context"] - e.length))
                for e in episodes
                if not e.done
            ]
            for episode, room in active:
                if room <= 0:
                    episode.done, episode.status = True, "truncated"
            active = [(e, room) for e, room in active if room > 0]
            if not active:
                break
            turns = self.generate(model, [e.prompt_ids + e.completion_ids for e, _ in active], [r for _, r in active])
            texts = []
            for (episode, _), (ids, logprobs, _) in zip(active, turns):
                episode.add(ids, logprobs, sampled=True)
                episode.last_text = self.tokenizer.decode(ids, skip_special_tokens=True)
                texts.append(episode.last_text)
            replies = asyncio.run(self.interpret([e for e, _ in active], texts, turn))
            for (episode, room), (_, _, end), messages in zip(active, turns, replies):
                if episode.done:
                    continue
                if end == "limit" and room < self.rollout["max_new_tokens"]:
                    episode.done, episode.status = True, "truncated"  # out of context mid-turn
                    continue
                if turn == self.rollout["max_turns"] - 1:
                    episode.done, episode.status = True, "truncated"  # agentrl's max_turns
                    continue
                observation = self.chat.observation(messages, end == "eos")
                if episode.length + len(observation) >= self.rollout["max_context"]:
                    episode.done, episode.status = True, "truncated"
                    continue
                episode.add(observation, [0.0] * len(observation), sampled=False)
        scores = [self.score(e) for e in episodes]
        self.history.append(
            {
                "reward": sum(s.reward for s in scores) / len(scores),
                **{k: sum(s.breakdown.get(k, 0.0) for s in scores) / len(scores) for k in scores[0].breakdown},
                "rollout_s": time.perf_counter() - started,
                "sampled_tokens": float(sum(sum(e.env_mask) for e in episodes)),
                "example": self.tokenizer.decode(episodes[0].completion_ids),  # one episode, to read what happened
            }
        )
        return {
            "prompt_ids": [e.prompt_ids for e in episodes],
            "completion_ids": [e.completion_ids for e in episodes],
            "logprobs": [e.logprobs for e in episodes],
            "env_mask": [e.env_mask for e in episodes],
            "episode_reward": [s.reward for s in scores],  # read by episode_reward() below
        }

    async def interpret(self, episodes: list[Episode], texts: list[str], turn: int) -> list[list[dict[str, Any]]]:
        """agentrl's _interpret_turn for each episode: parse the calls, run them, let the env decide."""
        from agentrl.environment.tool import execute_calls

        async def one(episode: Episode, text: str) -> list[dict[str, Any]]:
            parsed = self.call_format.parse(text, f"call-{turn}", self.schemas)
            calls = await execute_calls(parsed.calls, episode.env.tool_map(), self.rollout["tool_timeout_s"])
            episode.tool_calls += len(calls)
            try:
                result = episode.env.step(text, calls)
            except Exception:  # noqa: BLE001 - as agentrl: a broken env ends this episode, not the run
                episode.done, episode.status = True, "error"
                return []
            if result.done:
                episode.done, episode.status = True, "finished"
            return [
                {**m, "content": self.chat.cut_to_budget(str(m["content"]))} if m.get("role") == "tool" else m
                for m in result.messages
            ]

        return list(await asyncio.gather(*(one(e, t) for e, t in zip(episodes, texts))))

    def score(self, episode: Episode) -> Any:
        from agentrl import EpisodeScore

        try:
            return episode.env.score(episode.last_text)
        except Exception:  # noqa: BLE001
            return EpisodeScore(reward=0.0)

    def ends_with_call(self, ids: list[int]) -> bool:
        """agentrl's RolloutEngine._ends_with_any: only the last few tokens need decoding."""
        tail = self.tokenizer.decode(ids[-max(len(e) for e in self.call_ends) :], skip_special_tokens=True)
        return any(e in tail for e in self.call_ends)

    def generate(
        self, model: Any, contexts: list[list[int]], limits: list[int]
    ) -> list[tuple[list[int], list[float], str]]:
        """One assistant turn for every context: (ids, logprobs, end) with end eos / call_end / limit,
        cut where agentrl's engine would stop sampling that row."""
        import torch
        from transformers import (
            GenerationConfig,
            StoppingCriteria,
            StoppingCriteriaList,
        )

        width = max(len(c) for c in contexts)
        input_ids = torch.full((len(contexts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, ids in enumerate(contexts):  # left padding: every row's next token is in the same column
            input_ids[row, width - len(ids) :] = torch.tensor(ids)
            attention[row, width - len(ids) :] = 1
        device = next(model.parameters()).device
        rollout = self.rollout
        sampling = (
            {"do_sample": True, "temperature": rollout["temperature"], "top_p": rollout["top_p"], "top_k": 0}
            if rollout["temperature"] > 0
            else {"do_sample": False}
        )
        config = GenerationConfig(
            max_new_tokens=max(limits),
            eos_token_id=self.eos_id,
            pad_token_id=self.pad_id,
            return_dict_in_generate=True,
            output_scores=True,
            **sampling,
        )
        outer = self

        class CallEnd(StoppingCriteria):
            def __call__(self, ids: Any, scores: Any, **kwargs: Any) -> Any:
                done = [outer.ends_with_call(row[width:].tolist()) for row in ids]
                return torch.tensor(done, dtype=torch.bool, device=ids.device)

        stopping = StoppingCriteriaList([CallEnd()] if self.call_ends else [])
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad(), full_precision(model):
                out = model.generate(
                    input_ids=input_ids.to(device),
                    attention_mask=attention.to(device),
                    generation_config=config,
                    stopping_criteria=stopping,
                )
                logprobs = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
        finally:
            model.train(was_training)
        turns = []
        for row, limit in enumerate(limits):
            new, row_logprobs = out.sequences[row, width:].tolist(), logprobs[row].tolist()
            end = "limit"
            for k, token in enumerate(new):  # agentrl's per-token stop rule, in its order
                if token == self.eos_id:
                    end = "eos"
                elif self.call_ends and self.ends_with_call(new[: k + 1]):
                    end = "call_end"
                elif k + 1 < limit:
                    continue
                turns.append((new[: k + 1], row_logprobs[: k + 1], end))
                break
            else:
                turns.append((new, row_logprobs, end))
        return turns


def episode_reward(prompts: list, completions: list, episode_reward: list[float], **kwargs: Any) -> list[float]:
    """The env's score of each episode, computed in the rollout (GRPOTrainer passes rollout fields on)."""
    return list(episode_reward)


def make_budget_callback(clock_start: float, budget_s: float, rollout: AgentRollout, log_path: Path) -> Any:
    from transformers import TrainerCallback

    class WallClockBudget(TrainerCallback):
        """Ends training once one more step would end past the budget (the mean step so far), and writes
        one line per step: the rollout's reward and breakdown, the step's time, the peak RSS."""

        def __init__(self) -> None:
            self.train_begin = self.last = 0.0
            self.steps: list[dict[str, Any]] = []

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.train_begin = self.last = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            now = time.perf_counter()
            line = {
                "step": state.global_step,
                **(rollout.history[-1] if rollout.history else {}),
                "step_time_s": now - self.last,
                "elapsed_s": now - clock_start,
                "peak_rss_mb": peak_rss_mb(),
            }
            self.last = now
            self.steps.append(line)
            with open(log_path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(line) + "\n")
            print(
                f"trl: step {line['step']}  reward {line.get('reward', 0.0):.3f}  {line['step_time_s']:.1f}s  "
                f"elapsed {line['elapsed_s']:.0f}/{budget_s:.0f}s",
                file=sys.stderr,
                flush=True,
            )
            mean_step = (now - self.train_begin) / len(self.steps)
            if now - clock_start + mean_step > budget_s:
                control.should_training_stop = True

    return WallClockBudget()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", required=True, help="the folder export_task.py wrote")
    parser.add_argument("--budget-s", type=float, required=True, help="wall-clock budget, model loading included")
    parser.add_argument("--out", required=True, help="where the model, metrics.jsonl and summary.json go")
    parser.add_argument("--max-steps", type=int, help="also stop after this many steps (smoke tests)")
    args = parser.parse_args()

    task_dir, out = Path(args.task), Path(args.out)
    settings = json.loads((task_dir / "settings.json").read_text(encoding="utf-8"))
    with open(task_dir / "train.jsonl", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    sys.path.insert(0, settings["agentrl_source"])  # the recipe's env, tools, parser and chat rendering

    import torch
    import transformers
    import trl
    from agentrl.models.precision import uses_bf16_autocast
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    # The budget's clock starts here, imports done, as agentrl's train_wall_s is taken around train() in a
    # process that has imported torch already: both include loading the model and building the trainer.
    clock_start = time.perf_counter()
    torch.manual_seed(settings["seed"])
    rollout_cfg, algorithm, train = settings["rollout"], settings["algorithm"], settings["train"]
    bf16 = uses_bf16_autocast(train["bf16_autocast"], torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    if algorithm["name"] != "grpo":
        raise SystemExit(f"train_trl: the recipe trains with {algorithm['name']}; this comparison is for GRPO")
    tokenizer = AutoTokenizer.from_pretrained(settings["model_folder"], local_files_only=True)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(
        settings["model_folder"], dtype=torch.float32, attn_implementation="sdpa", local_files_only=True
    )
    rollout = AgentRollout(settings, tokenizer, records)
    rollout.check_prompts(records)
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "metrics.jsonl"
    log_path.write_text("", encoding="utf-8")

    config = GRPOConfig(
        output_dir=str(out / "trainer"),
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        seed=settings["seed"],
        max_steps=args.max_steps or 1_000_000,  # the budget callback ends the run
        # One optimizer step per generation batch of train.batch_size episodes, as agentrl's steps.
        num_generations=rollout_cfg["group_size"],
        per_device_train_batch_size=train["micro_batch_size"],
        gradient_accumulation_steps=train["batch_size"] // train["micro_batch_size"],
        num_iterations=train["update_epochs"],
        shuffle_dataset=False,  # the export is already in agentrl's (seeded, shuffled) order
        temperature=rollout_cfg["temperature"] if rollout_cfg["temperature"] > 0 else 1.0,
        top_p=rollout_cfg["top_p"],
        max_completion_length=rollout_cfg["max_context"],  # a bound only: the rollout enforces the real limits
        learning_rate=train["lr"],
        lr_scheduler_type="constant",
        warmup_steps=0,
        optim="adamw_torch",
        weight_decay=train["weight_decay"],
        max_grad_norm=train["max_grad_norm"],
        bf16=bf16,
        use_cpu=not torch.cuda.is_available(),
        gradient_checkpointing=False,  # TRL's default is on; agentrl's model.gradient_checkpointing is off
        beta=algorithm["kl"]["coef"],
        epsilon=algorithm["clip_eps"],
        epsilon_high=algorithm["clip_eps_high"],
        loss_type=LOSS_TYPE[algorithm["loss_agg"]],
        scale_rewards="group" if algorithm["norm_adv_by_std"] else "none",
        entropy_coef=algorithm["entropy_coef"],
        remove_unused_columns=False,
        dataloader_num_workers=0,
    )
    budget = make_budget_callback(clock_start, args.budget_s, rollout, log_path)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[episode_reward],
        args=config,
        processing_class=tokenizer,
        train_dataset=Dataset.from_list([{"prompt": r["prompt"]} for r in records]),
        rollout_func=rollout,
        callbacks=[budget],
    )
    print(f"trl: {FORM}: {FORM_NOTE}", file=sys.stderr, flush=True)
    trainer.train()
    wall_s = time.perf_counter() - clock_start
    steps = len(budget.steps)

    model_dir = out / "model"
    trainer.accelerator.unwrap_model(trainer.model).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    summary = {
        "trainer": "trl",
        "trl_version": trl.__version__,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "form": FORM,
        "form_note": FORM_NOTE,
        "steps": steps,
        "wall_s": round(wall_s, 1),
        "budget_s": args.budget_s,
        "train_loop_s": round(budget.last - budget.train_begin, 1),
        "steps_per_min": round(steps / wall_s * 60, 3) if wall_s else 0.0,
        "mean_step_s": round(sum(s["step_time_s"] for s in budget.steps) / steps, 2) if steps else None,
        "generated_samples": steps * train["batch_size"],
        "episodes_per_step": train["batch_size"],
        "group_size": rollout_cfg["group_size"],
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "train_reward": [round(s.get("reward", 0.0), 4) for s in budget.steps],
        "model": str(model_dir),
        "settings": {
            "temperature": rollout_cfg["temperature"],
            "top_p": rollout_cfg["top_p"],
            "max_new_tokens": rollout_cfg["max_new_tokens"],
            "max_turns": rollout_cfg["max_turns"],
            "lr": train["lr"],
            "bf16_autocast": bf16,
            "loss_type": config.loss_type,
            "scale_rewards": config.scale_rewards,
        },
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

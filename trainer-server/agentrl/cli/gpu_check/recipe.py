"""The run config the learner, GRPO and vLLM checks share: the arithmetic recipe's, sized for the scale."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrl.cli.gpu_check.context import Context
from agentrl.contract.safe_yaml import load_yaml

RECIPE = Path(__file__).parents[2] / "recipes" / "arithmetic" / "arithmetic_grpo.agentrl.yaml"


def run_config(ctx: Context, model_path: str, lora: bool, steps: int = 3) -> Any:
    """The arithmetic recipe's run config, sized for the scale, on the model in `model_path`. Changed from the recipe,
    and why: no worked example in the prompt (the scripted step counts the assistant turns of its context, and the
    examples' turns would count), and a small entropy bonus: a random model never answers right, so every reward is
    0 and GRPO's advantages too; the bonus makes every episode train and every weight move."""
    from agentrl.contract.config import load_config_dict

    recipe = load_yaml(RECIPE.read_text(encoding="utf-8"))
    sizes = ctx.sizes
    recipe.update(
        name=f"gpu-check-{'lora' if lora else 'full'}",
        model={"path": model_path, "lora": {"enabled": lora}},
        env={**recipe["env"], "module": str(RECIPE.parent / "env.py"), "args": {"examples": 0}},
        data={"train": str(RECIPE.parent / recipe["data"]["train"])},
    )
    recipe["rollout"].update(group_size=sizes.grpo_group_size, max_new_tokens=sizes.grpo_new_tokens, engine="hf")
    recipe["algorithm"]["entropy_coef"] = 0.01
    recipe["train"].update(
        steps=steps,
        batch_size=sizes.grpo_batch_size,
        micro_batch_size=sizes.grpo_batch_size,
        checkpoint_every=steps,
        eval_every=0,
    )
    return load_config_dict(recipe)

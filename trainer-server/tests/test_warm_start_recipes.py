"""The arithmetic and lockers warm starts' demonstrations (arithmetic_warm_grpo / lockers_warm_grpo.agentrl.yaml):
what each recipe's script writes, of training tasks only, rendering as the run's sft warm start renders it, and
earning the reward when played again through the env."""

import json

import pytest
from agentrl.contract.config import load_config, resolve_paths
from agentrl.contract.tasks import load_tasks
from agentrl.environment.loader import config_env_factory
from agentrl.models.loading import load_policy
from agentrl.recipes.arithmetic import warm_start_demonstrations as arithmetic
from agentrl.recipes.lockers import warm_start_demonstrations as lockers
from agentrl.rollout.scripted_episode import run_scripted_episode
from agentrl.run.sft_data import sft_episodes_of, turns_over_budget


def test_the_arithmetic_call_is_the_problems_own_operation_in_the_order_that_solves_it():
    rows = {"question": "54420 students sit in rows of 60. How many rows?", "op": "/", "answer": 907}
    assert arithmetic.expression(rows) == "54420 / 60"
    assert arithmetic.expression({"question": "Take 1200 from 5000.", "op": "-", "answer": 3800}) == "5000 - 1200"
    assert arithmetic.expression({"question": "5000 and 1200", "op": "-", "answer": 12}) is None  # no order solves it
    assert arithmetic.expression({"question": "three numbers 1 2 3", "op": "+", "answer": 3}) is None


def problem(task: dict) -> str:
    """A task as its env sees it, its id aside: lockers' questions repeat with other directories."""
    return json.dumps({key: value for key, value in task.items() if key != "id"}, sort_keys=True)


@pytest.mark.parametrize("recipe", [arithmetic, lockers], ids=["arithmetic", "lockers"])
def test_the_demonstrations_are_what_the_script_writes_of_training_tasks_and_earn_the_reward(recipe, tmp_path):
    written, read = recipe.write_demonstrations(recipe.CONFIG, tmp_path / "demonstrations.jsonl")
    assert (tmp_path / "demonstrations.jsonl").read_text() == recipe.DEMONSTRATIONS.read_text()  # the file is current
    assert read == recipe.PROBLEMS and written >= 0.95 * read
    config = resolve_paths(load_config(recipe.CONFIG), recipe.CONFIG.parent)
    assert [entry.demonstrations for entry in config.data.sft] == [str(recipe.DEMONSTRATIONS)]
    assert 0 < config.train.sft_steps * config.train.batch_size <= written
    heldout = {problem(json.loads(line)) for line in open(config.data.eval, encoding="utf-8")}
    tasks = {task["id"]: task for task in load_tasks(config.data.train, recipe.PROBLEMS)}
    _, tokenizer, _ = load_policy(config.model, config.seed)
    make_env = config_env_factory(config)
    episodes = sft_episodes_of(config, tokenizer, make_env, next(iter(tasks.values())))
    assert len(episodes) == written
    assert turns_over_budget(episodes, config.rollout.max_new_tokens) is None  # no turn a rollout would cut
    for demo, episode in zip(map(json.loads, recipe.DEMONSTRATIONS.open(encoding="utf-8")), episodes, strict=True):
        task = tasks[demo["task_id"]]
        assert problem(task) not in heldout
        env = make_env()
        assert episode.prompt_messages == env.reset(task)  # the worked example's turns are prompt, not learned
        played = run_scripted_episode(make_env(), task, [turn.assistant for turn in episode.turns], config.rollout)
        assert [turn.observation for turn in played.turns] == [turn.observation for turn in episode.turns]
        assert played.outcome_reward == 1.0


def test_a_lockers_demonstration_looks_up_again_while_the_directory_is_busy():
    retried = [
        json.loads(line) for line in lockers.DEMONSTRATIONS.open(encoding="utf-8") if "The directory is busy" in line
    ]
    assert retried, "no demonstration shows a retry"
    for demo in retried:
        learned = [m for m in demo["messages"][demo["prompt_length"] :] if m["role"] == "assistant"]
        assert len({m["content"] for m in learned[:-1]}) == 1 and learned[-1]["content"].startswith("<put>")

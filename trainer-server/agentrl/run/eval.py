"""Evaluation (`agentrl eval CONFIG`, cli/eval.py): run the agent greedily on every record of a data file and score it.

Writes the episodes as a run folder (mode `eval`, trajectories at step 0, viewable in the replay panel)
and ends by printing one JSON line of metrics: `n`, the mean reward, and each of `accuracy`, `em`,
`f1`, `substring` that the env's reward breakdown reports, and of an env.gym or env.openenv section's `score_keys`.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrl.rollout.source import EpisodeSource

METRIC_KEYS = ("accuracy", "em", "f1", "substring")
# base-tool-call is the untrained model with the env as it is; any other baseline is the env's own
# (its `baseline` argument): naive-rag for multi-hop QA, no-tool for the arithmetic recipe.
UNTRAINED_BASELINE = "base-tool-call"


def heldout_metrics(engine: EpisodeSource, tasks: list[dict[str, Any]], batch_size: int, seed: int) -> dict[str, float]:
    """The policy as it is now, greedy, one sample per task (as `agentrl eval` scores it), for a training run's held-out
    evaluation (train.eval_every): eval/n, eval/reward, and eval/<key> for each key of the env's reward breakdown."""
    started = time.perf_counter()
    episodes = []
    with engine.greedy():
        for start in range(0, len(tasks), batch_size):  # the engine is sized for a batch
            episodes += engine.run(tasks[start : start + batch_size], 1, seed=seed)
    metrics = {"eval/n": float(len(episodes)), "eval/reward": sum(e.total_reward for e in episodes) / len(episodes)}
    for key in dict.fromkeys(key for episode in episodes for key in episode.reward_breakdown):
        values = [episode.reward_breakdown[key] for episode in episodes if key in episode.reward_breakdown]
        metrics[f"eval/{key}"] = sum(values) / len(values)
    metrics["perf/eval_time_s"] = time.perf_counter() - started
    return metrics


def metric_keys(config: Any) -> tuple[str, ...]:
    """The reward breakdown's keys an evaluation averages beside the reward: METRIC_KEYS, then the keys an env.gym or
    env.openenv section scores from the env's info (`score_keys`: TextWorldExpress's tasksuccess)."""
    source = config.env and (config.env.gym or config.env.openenv)
    return (*METRIC_KEYS, *(key for key in (source.score_keys if source else ()) if key not in METRIC_KEYS))


@dataclass
class Evaluation:
    metrics: dict[str, float]  # n, the mean reward, and each of metric_keys(config) the env reports
    run_dir: Path  # the eval's run folder, with its trajectories
    per_task: list[dict[str, float]]  # in the data file's order: each episode's reward and breakdown


def evaluate(
    config: Any,
    data_path: str,
    *,
    limit: int | None,
    checkpoint: str | None,
    baseline: str | None,
    batch_size: int,
    runs_dir: str | Path,
) -> Evaluation:

    from agentrl.contract.tasks import load_tasks
    from agentrl.environment.agent import load_agent
    from agentrl.environment.loader import config_env_factory
    from agentrl.models.loading import load_policy
    from agentrl.models.saving import load_policy_weights
    from agentrl.rollout.factory import make_rollout_engine

    if baseline == UNTRAINED_BASELINE and checkpoint:
        raise ValueError(f"--baseline {UNTRAINED_BASELINE} is the untrained model: drop --checkpoint")
    make_env, agent = None, None
    if config.agent is not None:  # the agent's own code is what runs: it has no env baselines
        if baseline and baseline != UNTRAINED_BASELINE:
            raise ValueError(f"--baseline {baseline}: an agent run (agent:) has no env whose baseline to run")
        agent = load_agent(config.agent)
    else:
        env_args = None
        if baseline and baseline != UNTRAINED_BASELINE:
            if config.env.class_name is None:
                raise ValueError(
                    f"--baseline {baseline}: baselines are a ToolEnv's (env.args.baseline), not env.{config.env.source}'s"
                )
            env_args = {**config.env.args, "baseline": baseline}
        make_env = config_env_factory(config, data_path, args=env_args)
        make_env()  # fail now, before loading the model, with the env's own message (no such baseline, bad data file)
    rollout = config.rollout.model_copy(update={"temperature": 0.0})
    model, tokenizer, device = load_policy(config.model, config.seed)
    if checkpoint:
        load_policy_weights(model, Path(checkpoint))
    tasks = load_tasks(data_path, limit)
    engine = make_rollout_engine(
        model, tokenizer, make_env, rollout, device, concurrent_episodes=batch_size, agent=agent
    )
    try:
        return _evaluate_on(engine, config, tasks, tokenizer, data_path, checkpoint, baseline, batch_size, runs_dir)
    finally:
        engine.close()  # vLLM's engine runs in processes of its own: a stop (SIGTERM, Ctrl-C) must end them too
        if make_env is not None:
            make_env.close()


def _evaluate_on(
    engine: EpisodeSource,
    config: Any,
    tasks: list[dict[str, Any]],
    tokenizer: Any,
    data_path: str | Path,
    checkpoint: str | None,
    baseline: str | None,
    batch_size: int,
    runs_dir: str | Path,
) -> Evaluation:
    """The evaluation's run folder and its episodes, greedy, `batch_size` at a time; a run stopped or failed on the
    way says so in its status, with how far it got."""
    from agentrl.environment.code_snapshot import record_code
    from agentrl.rollout.loop import rollout_seed
    from agentrl.run.recording import record_episodes
    from agentrl.run.runstore import RunStore, new_run_id

    name = f"eval-{config.name}" + (f"-{baseline}" if baseline else "")
    store = RunStore.create(
        Path(runs_dir),
        new_run_id(name),
        config.model_dump(mode="json"),
        {
            "name": name,
            "mode": "eval",
            "data": str(data_path),
            "checkpoint": checkpoint,
            "baseline": baseline,
            "engine": engine.description,
        },
    )
    record_code(store.run_dir, config)  # the env's code this evaluation ran (code.json)
    episodes: list[Any] = []
    try:
        for start in range(0, len(tasks), batch_size):
            batch = engine.run(tasks[start : start + batch_size], group_size=1, seed=rollout_seed(config.seed, 0))
            for episode in batch:
                episode.group += start  # unique ids across batches
            episodes += batch
            print(f"eval: {len(episodes)}/{len(tasks)} ({engine.description})", file=sys.stderr, flush=True)
    except BaseException as err:
        stopped = isinstance(err, SystemExit | KeyboardInterrupt)
        why = "stopped" if stopped else f"failed: {type(err).__name__}: {err}"
        store.append_event(
            "status",
            {
                "status": "stopped" if stopped else "failed",
                "step": 0,
                "total_steps": 0,
                "message": f"the evaluation {why}, after {len(episodes)} of {len(tasks)} episodes; none recorded",
            },
            durable=True,
        )
        raise
    record_episodes(store, 0, episodes, tokenizer)
    metrics: dict[str, float] = {
        "n": float(len(episodes)),
        "reward": sum(e.total_reward for e in episodes) / len(episodes),
    }
    for key in metric_keys(config):
        values = [e.reward_breakdown[key] for e in episodes if key in e.reward_breakdown]
        if values:
            metrics[key] = sum(values) / len(values)
    store.append_event("metrics", {"step": 0, "metrics": metrics})
    store.append_event("status", {"status": "completed", "step": 0, "total_steps": 0}, durable=True)
    return Evaluation(metrics, store.run_dir, [{"reward": e.total_reward, **e.reward_breakdown} for e in episodes])

"""`python -m agentrl.run.reroll`: a recorded episode edited at one turn and played on from there, several times, by the
run's policy in the run's env (`episode/reroll`; what a branch keeps and replays: agentrl/rollout/branch.py).

The server starts this in a fresh process for every re-roll (agentrl/server/reroll.py), as it does a tool re-run: the
env's modules are imported from disk anew, the user's code never runs inside the server, and whatever it starts ends
with the call. The process loads the run's frozen config and its policy (the base model, or a checkpoint's weights
over it), builds agentrl's own hf engine and the env as training does (Tools in the run's isolation), starts the
episode again at the branch `samples` times, plays each to its end at the asked temperature, each sample from its own
generator (`seed`; temperature 0 is greedy), and scores it with the env. The hf engine samples even for a run that
used vLLM, whose kernels differ: its recorded continuation is then not repeated token for token.

The re-roll is written to RUN/rerolls/ (reroll_store.write_reroll), beside the run and never among its trajectories:
trajectory/query, trajectory/search and the trajectories/ files do not see it, and the run's events, trajectories and
checkpoints are only read.

Reads one JSON object on stdin: {run_dir, reroll_id, record, turn, edit, text, policy_step, samples, temperature, seed,
code} (record: the trajectory record; policy_step: a checkpoint's step, or null for the base model; code: `current`, or
`snapshot` for the env's files as the run recorded them when it started, environment/code_snapshot.py). Writes JSON
lines on what was its stdout: {"progress": MESSAGE} as it goes, then {"done": REROLL_ID} once the re-roll is stored,
or {"failed": MESSAGE} when it cannot run (the env or the policy cannot be built, the run recorded no code to re-roll
with, the episode's task is not in the run's data now, playing the recorded turns again did not reach the branch).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentrl.contract.config import ConfigError, RunConfig, load_config
from agentrl.contract.files_inside import read_json_inside
from agentrl.contract.tasks import load_tasks
from agentrl.environment.code_snapshot import use_snapshot
from agentrl.environment.loader import EnvLoadError, config_env_factory
from agentrl.environment.mcp import McpUnavailableError
from agentrl.environment.rerun import answer_channel, say
from agentrl.environment.tool import describe_exception
from agentrl.models.loading import load_policy
from agentrl.models.saving import load_policy_weights
from agentrl.rollout.branch import PrefixDiverged, branch_point
from agentrl.rollout.hf_engine import HfRolloutEngine
from agentrl.rollout.loop import episode_seed, rollout_seed, task_id_of
from agentrl.run.reroll_store import write_reroll
from agentrl.run.runstore import CONFIG_FILE, MAX_RUN_RECORD_BYTES, RUN_FILE, checkpoints_by_step


class RerollFailed(RuntimeError):
    """The re-roll cannot run; the message says why, to the user."""


def find_task(config: RunConfig, run_dir: Path, task_id: str) -> dict[str, Any]:
    """The task record the episode was reset with, found by its id (`task_id_of`) in the run's data files: data.train,
    data.eval, and the file an eval run evaluated."""
    files = [
        config.data.train,
        config.data.eval,
        read_json_inside(run_dir, RUN_FILE, MAX_RUN_RECORD_BYTES).get("data"),
    ]
    unread = []
    for file in dict.fromkeys(f for f in files if f):
        try:
            tasks = load_tasks(file, None)
        except (OSError, ValueError) as err:
            unread.append(f"{file}: {err}")
            continue
        for task in tasks:
            if task_id_of(task) == task_id:
                return task
    searched = ", ".join(f for f in dict.fromkeys(files) if f)
    raise RerollFailed(
        f"the episode's task {task_id!r} is in none of the run's data files now ({searched})"
        + (f"; could not read {'; '.join(unread)}" if unread else "")
        + ": the env is reset with the task record, so the episode cannot be started again without it"
    )


def reroll(run_dir: Path, request: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """Plays the re-roll `request` asks for and stores it (RUN/rerolls/); returns the stored re-roll."""
    started = time.perf_counter()
    record, samples, step = request["record"], request["samples"], request["policy_step"]
    point = branch_point(record, request["turn"], request["edit"], request["text"])
    config = load_config(run_dir / CONFIG_FILE, inside=run_dir)
    if request["code"] == "snapshot":  # the env's files as the run recorded them when it started (RUN/code/)
        try:
            config = use_snapshot(config, run_dir)
        except ValueError as err:
            raise RerollFailed(str(err)) from None
    if config.env is None:  # the server refuses these first; a config edited since would land here
        raise RerollFailed("this run trains an agent (agent:), whose own code plays its episodes: there is no ToolEnv")
    task = find_task(config, run_dir, record["task_id"])
    make_env = config_env_factory(config)
    try:
        progress("loading the policy: " + ("the base model" if step is None else f"the checkpoint of step {step}"))
        model, tokenizer, device = load_policy(config.model, config.seed)
        if step is not None:
            checkpoint = checkpoints_by_step(run_dir).get(step)
            if checkpoint is None:  # the server saw it; the run's keep_checkpoints has removed it since
                raise RerollFailed(f"the run no longer has the checkpoint of step {step}")
            load_policy_weights(model, checkpoint)
        sampling = config.rollout.model_copy(update={"temperature": request["temperature"]})
        engine = HfRolloutEngine(model, tokenizer, make_env, sampling, device)
        try:
            progress(f"playing the {point.turn + 1} recorded turn(s) up to the edit through the env, {samples} times")
            # The env gets the seed the recorded episode's env had, so its own randomness replays as recorded.
            env_seed = episode_seed(rollout_seed(config.seed, record["step"]), record["group"], record["sample"])
            lives, isolated, differences = engine.restart(record, task, point, request["text"], samples, env_seed)
            progress(f"sampling {samples} continuation(s) at temperature {request['temperature']:g}")
            episodes = engine.play(lives, request["seed"], isolated)
        finally:
            engine.close()
    finally:
        make_env.close()  # stops the MCP servers it started, if any
    reroll_id = request["reroll_id"]
    records = [
        {
            **episode.to_record(
                run_id=record["run_id"], step=record["step"], decode_token=lambda i: tokenizer.decode([i])
            ),
            "id": f"reroll-{reroll_id}-{episode.sample}",
        }
        for episode in episodes
    ]
    stored = {
        "reroll_id": reroll_id,
        "created_at": datetime.now(UTC).isoformat(),
        "trajectory_id": record["id"],
        "turn": point.turn,
        "edit": point.edit,
        "text": request["text"],
        "recorded_text": point.recorded_text,
        "policy_step": step,
        "samples": samples,
        "temperature": request["temperature"],
        "seed": request["seed"],
        "code": request["code"],
        "differences": differences,
        "rewards": [r["reward"] for r in records],
        "elapsed_s": time.perf_counter() - started,
    }
    write_reroll(run_dir, stored, records)
    return stored


def main() -> None:
    answers = answer_channel()
    request = json.loads(sys.stdin.read())
    try:
        stored = reroll(Path(request["run_dir"]), request, lambda message: say(answers, {"progress": message}))
    except (RerollFailed, PrefixDiverged, ConfigError, EnvLoadError, McpUnavailableError) as err:
        say(answers, {"failed": str(err)})
    except Exception as err:  # noqa: BLE001 - the user's env constructor, a model that does not load: said, not raised
        traceback.print_exc()  # to stderr, the server's log of the call
        say(answers, {"failed": describe_exception(err)})
    else:
        say(answers, {"done": stored["reroll_id"]})
    # Not a normal exit: a Tool call past its timeout may still hold its thread (as in a tool re-run).
    os._exit(0)


if __name__ == "__main__":
    main()

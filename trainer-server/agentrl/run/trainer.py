"""The train loop: sample tasks, roll out, update, record; checkpoint; stop or resume cleanly.

Determinism: the data order of epoch e is a shuffle seeded by (seed, e); step s takes the next
batch_size / group_size tasks of that endless sequence; sampling at step s is seeded by (seed, s).
So a resumed run only needs the weights, the learner state and the step to continue exactly.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from agentrl.contract.config import ConfigError, RunConfig, load_config, redact_secrets, resolve_paths
from agentrl.contract.files_inside import open_inside
from agentrl.contract.tasks import items_for_step, load_tasks
from agentrl.contract.training_config import AlgorithmConfig
from agentrl.environment.agent import load_agent
from agentrl.environment.code_snapshot import record_code
from agentrl.environment.loader import config_env_factory
from agentrl.environment.mcp import MCP_RESTARTS
from agentrl.environment.tool import describe_exception
from agentrl.learning.learner import Learner, NonFiniteError
from agentrl.learning.memory_advice import check_memory
from agentrl.learning.update import Update
from agentrl.models.saving import CHECKPOINT_POLICY, load_policy_weights, save_policy
from agentrl.rollout.episode import Episode
from agentrl.rollout.loop import EpisodeCounter, count_nothing, rollout_seed
from agentrl.rollout.source import EpisodeSource
from agentrl.run.episode_filters import mark_passing
from agentrl.run.eval import heldout_metrics
from agentrl.run.health import HealthMonitor, non_finite_event
from agentrl.run.health_evidence import StepEvidence
from agentrl.run.metrics import peak_memory_mb, rollout_metrics
from agentrl.run.progress import ProgressReporter, graceful_signals
from agentrl.run.recording import record_episodes
from agentrl.run.reward_screen import screen_rewards
from agentrl.run.runstore import CONFIG_FILE, RunStore, checkpoint_state, checkpoint_step, new_run_id
from agentrl.run.sft_data import sft_batch, sft_episodes_of, turns_over_budget
from agentrl.run.step_lines import dropped_text, health_text, summary_line
from agentrl.run.trackers import Trackers

if TYPE_CHECKING:
    from agentrl.cluster import RayCluster
    from agentrl.cluster.learner_workers import ClusterLearner
    from agentrl.rollout.scripted import ScriptedPolicy


class _Run:
    """Everything a run holds while it trains."""

    def __init__(
        self,
        config: RunConfig,
        store: RunStore,
        reporter: ProgressReporter,
        start_step: int,
        progress: bool,
        policy: ScriptedPolicy | None,
    ) -> None:
        from agentrl.models.loading import load_policy
        from agentrl.models.precision import bfloat16_is_native
        from agentrl.rollout.factory import make_rollout_engine, vllm_unavailable_reason

        self.config, self.store, self.reporter, self.progress = config, store, reporter, progress
        torch.manual_seed(config.seed)
        reporter.phase("loading_model", start_step)
        self.model, self.tokenizer, self.device = load_policy(config.model, config.seed)
        # An agent run (config `agent:`) has no ToolEnv: the agent's own code runs its tools.
        self.make_env = config_env_factory(config, mcp_log_dir=store.run_dir) if config.env is not None else None
        self.tasks = load_tasks(config.data.train, config.data.limit)
        # An sft run learns from these in place of rollouts (data.sft), loaded whole before anything trains.
        self.sft_episodes = (
            sft_episodes_of(config, self.tokenizer, self.make_env, self.tasks[0]) if config.data.sft else None
        )
        if self.sft_episodes and (too_long := turns_over_budget(self.sft_episodes, config.rollout.max_new_tokens)):
            self.warn(too_long)
        self.warm_start_learner: Learner | None = None  # train.sft_steps: the warm start's, while it lasts
        self.step_in_progress = 0  # the step whose work is under way (0: a Try run's episodes)
        self.cluster: RayCluster | None = None
        self.engine: EpisodeSource
        reporter.phase("starting_engine", start_step)
        if config.cluster.backend == "ray":
            from agentrl.cluster import RayCluster

            self.cluster = RayCluster(
                config,
                self.model,
                store.run_id,
                store.run_dir.parent,
                self._worker_restarted,
                self._workers_changed,
                policy,
            )
            self.engine = self.cluster.engine
        else:
            self.engine = make_rollout_engine(
                self.model,
                self.tokenizer,
                self.make_env,
                config.rollout,
                self.device,
                concurrent_episodes=config.train.batch_size,
                policy=policy,
                agent=load_agent(config.agent) if config.agent is not None else None,
            )
        store.append_event("log", {"level": "info", "message": f"rollout engine: {self.engine.description}"})
        if progress:
            print(f"rollout engine: {self.engine.description}", file=sys.stderr)
        if config.train.async_steps and self.engine.shares_policy_weights:
            self.engine.close()
            raise ValueError(
                f"train.async_steps: 1 needs the vllm rollout engine; rollout.engine {config.rollout.engine} "
                f"chose {self.engine.description} ({vllm_unavailable_reason(self.model, self.device)})"
            )
        if config.train.bf16_autocast is True and not bfloat16_is_native(self.device):
            self.warn(
                f"train.bf16_autocast is on, but this {self.device.type} has no bfloat16 matrix instructions: the "
                "learner's products run in scalar loops, tens of times slower than float32 (auto turns it off here)"
            )
        self.health = HealthMonitor(config.health)
        self.eval_tasks = load_tasks(config.data.eval, config.train.eval_limit) if config.train.eval_every else []
        self.trackers: Trackers | None = None  # training runs only (train() opens them)
        self.completed_step = 0  # the last step whose update and events are recorded

    def rollout_stats(self) -> dict[str, float]:
        """The engine's figures for the rollout just run, and the MCP servers restarted during it (on a cluster, each
        rollout worker holds its own servers, and the engine's figures add up their restarts)."""
        stats = dict(self.engine.last_stats)
        if self.make_env is not None and self.make_env.mcp and self.cluster is None:
            stats[MCP_RESTARTS] = float(self.make_env.mcp.take_restarts())
        return stats

    @functools.cached_property
    def learner(self) -> Learner | ClusterLearner:
        """Built on first use, so a Try run, which only rolls out, builds no optimizer, no reference copy and no
        learner workers; and a run with a warm start builds it after the warm start, whose model its reference is."""
        if self.cluster is not None:
            return self.cluster.learner()
        return Learner(self.model, self.tokenizer, self.config, self.device)

    def in_warm_start(self, step: int) -> bool:
        """Whether step `step` is one of the warm start's (train.sft_steps): sft on data.sft before the algorithm's."""
        return step <= self.config.train.sft_steps

    def learns_from_sft(self, step: int) -> bool:
        """Whether step `step` learns from data.sft in place of rollouts: every step of an sft run, a warm start's."""
        return self.sft_episodes is not None and (self.config.algorithm.name == "sft" or self.in_warm_start(step))

    def learner_for(self, step: int) -> Learner | ClusterLearner:
        """The learner that runs step `step`: the warm start's (sft, an optimizer of its own, freed when it ends),
        then the run's."""
        if not self.in_warm_start(step):
            if self.warm_start_learner is not None:
                self.warm_start_learner = None
                self.store.append_event(
                    "log",
                    {
                        "level": "info",
                        "message": f"warm start done: steps 1-{step - 1} were sft on data.sft, from "
                        f"step {step} on {self.config.algorithm.name} on rollouts",
                    },
                )
            return self.learner
        if self.warm_start_learner is None:
            sft = AlgorithmConfig(
                name="sft", kl=self.config.algorithm.kl, entropy_coef=self.config.algorithm.entropy_coef
            )
            train = self.config.train.model_copy(update={"lr": self.config.train.sft_lr or self.config.train.lr})
            warm = self.config.model_copy(update={"algorithm": sft, "train": train})
            self.warm_start_learner = Learner(self.model, self.tokenizer, warm, self.device)
        return self.warm_start_learner

    def _worker_restarted(self, data: dict[str, Any]) -> None:
        """A cluster worker died and Ray restarted it; the step goes on (agentrl/cluster/rollout_workers.py)."""
        self.store.append_event("worker_restarted", {"step": self.step_in_progress, **data})
        print(f"WARN {data['message']}", file=sys.stderr)

    def _workers_changed(self, workers: list[dict[str, Any]]) -> None:
        """The cluster's workers, each in its state, after one of them changed (agentrl/cluster/worker_states.py)."""
        self.store.append_event("workers", {"workers": workers})

    def close(self) -> None:
        """Release the engine's processes, or the run's Ray workers (and Ray, if the run started it), the MCP
        servers this process started, and the trackers."""
        if self.cluster is not None:
            self.cluster.close()
        else:
            self.engine.close()
        if self.make_env is not None:
            self.make_env.close()
        if self.trackers is not None:
            self.trackers.close()

    def record(self, step: int, episodes: list[Episode], update: Update | None = None) -> list[dict[str, Any]]:
        return record_episodes(self.store, step, episodes, self.tokenizer, update)

    def warn(self, message: str) -> None:
        """A warning for the event log (the editor shows it) and for stderr (the CLI, a server's run log)."""
        self.store.append_event("log", {"level": "warning", "message": message})
        print(f"WARN {message}", file=sys.stderr)

    def record_code(self, step: int) -> None:
        """The code this process runs the run with, now that its env or agent is loaded (code.json; a resume's beside
        the first's, with a warning when it differs): what was trained with is kept, and never a reason to fail."""
        try:
            changed = record_code(self.store.run_dir, self.config, step)
        except (OSError, ValueError) as err:
            self.warn(f"the run's code was not recorded: {err}")
            return
        if changed:
            shown = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more" if len(changed) > 10 else "")
            self.warn(f"resumed with code that differs from the run's start ({shown}); code.json records both")

    def checkpoint(self, step: int) -> None:
        self.reporter.phase("checkpointing", step)
        if self.cluster is not None:
            self.cluster.update_driver_copy()  # the learner workers hold the current weights

        def write(folder: Path) -> None:
            save_policy(self.model, self.tokenizer, folder / CHECKPOINT_POLICY)
            torch.save(self.learner_for(step).state_dict(), folder / "learner.pt")
            (folder / "state.json").write_text(
                json.dumps({"step": step, "seq": self.store.last_seq + 1, **self.health.state_dict()})
            )

        path = self.store.save_checkpoint(step, write, self.config.train.keep_checkpoints)
        self.store.append_event(
            "checkpoint", {"step": step, "path": str(path.relative_to(self.store.run_dir))}, durable=True
        )

    def restore(self, checkpoint: Path) -> dict[str, Any]:
        """The checkpoint's weights, optimizer and health state loaded; its state.json, read once."""
        load_policy_weights(self.model, checkpoint)
        state = checkpoint_state(checkpoint)
        with open_inside(checkpoint, "learner.pt", None) as learner_state:  # tensors and numbers: no pickled code
            self.learner_for(int(state["step"])).load_state_dict(
                torch.load(learner_state, map_location=self.device, weights_only=True)
            )
        self.health.load_state_dict(state)
        self.completed_step = int(state["step"])
        self.engine.weights_updated()
        return state


def _restore_newest_good(run: _Run, store: RunStore) -> tuple[int, int, str]:
    """The newest checkpoint that loads whole, restored: (its step, the event seq it was taken at, what was skipped,
    as text for the resume's status). A damaged newer checkpoint (a file cut short, deleted or garbled) is skipped
    and named; RuntimeError naming every one when none loads."""
    damaged = []
    run.reporter.phase("restoring_checkpoint", checkpoint_step(store.checkpoints()[-1]))
    for checkpoint in reversed(store.checkpoints()):
        try:
            seq = run.restore(checkpoint)["seq"]
            if type(seq) is not int:
                raise ValueError(f"state.json's seq is {seq!r}, not an integer")
        except Exception as err:  # noqa: BLE001 - any damage to any file: the previous checkpoint may be whole
            damaged.append(f"{checkpoint.relative_to(store.run_dir)} ({describe_exception(err)})")
            run.warn(f"checkpoint {checkpoint} is damaged and is skipped: {describe_exception(err)}")
            continue
        skipped = f" (skipped as damaged: {'; '.join(damaged)})" if damaged else ""
        return run.completed_step, seq, skipped
    raise RuntimeError(f"no checkpoint of {store.run_dir} loads: {'; '.join(damaged)}")


def train(
    config: RunConfig,
    *,
    runs_dir: str | Path,
    run_id: str | None = None,
    resume_dir: str | Path | None = None,
    max_steps: int | None = None,
    rollout_only_episodes: int | None = None,
    config_base_dir: str | Path | None = None,
    stop_event: threading.Event | None = None,
    progress: bool = False,
    policy: ScriptedPolicy | None = None,
) -> Path:
    """Train (or, with rollout_only_episodes, just roll out) and return the run folder. `policy` scripts the
    assistant's turns instead of sampling them (agentrl/rollout/scripted.py)."""
    stop = stop_event or threading.Event()
    if resume_dir is not None:
        store = RunStore(Path(resume_dir))
        frozen = store.run_dir / CONFIG_FILE
        try:
            config = load_config(frozen, inside=store.run_dir)
        except ConfigError as err:
            said = " ".join(str(err).split())  # one line: what a server shows of a run that failed is its last
            raise ConfigError(
                f"the run's frozen config {frozen} cannot be used (changed since it started?): {said}"
            ) from None
        if store.meta().get("mode") == "try":
            raise ValueError("a Try run has nothing to resume; start a new one")
        memory_warning = check_memory(config, store.run_dir)
    else:
        base = Path(config_base_dir or Path.cwd()).resolve()
        config = resolve_paths(config, base)
        if rollout_only_episodes and config.rollout.engine == "auto":  # a Try: vLLM's start would be most of its time
            config = config.model_copy(update={"rollout": config.rollout.model_copy(update={"engine": "hf"})})
        # Before the run folder: a run that cannot fit its device is refused (train.memory_check), leaving nothing.
        memory_warning = None if rollout_only_episodes else check_memory(config, base)
        mode = "try" if rollout_only_episodes else "train"
        store = RunStore.create(
            Path(runs_dir),
            run_id or new_run_id(config.name),
            config.model_dump(mode="json"),
            {"name": config.name, "mode": mode},
        )
    total = 0 if rollout_only_episodes else config.train.steps
    resume_from = store.latest_checkpoint() if resume_dir is not None else None
    step = checkpoint_step(resume_from) if resume_from is not None else 0  # a resume says where it starts at once
    store.write_pid()
    reporter = ProgressReporter(
        store,
        total,
        stop,
        "stopping once the episodes under way end"
        if rollout_only_episodes
        else "stopping after the step under way: it finishes, a checkpoint is written, then the run ends stopped "
        "(resumable)",
    )
    run: _Run | None = None
    try:
        with graceful_signals(reporter):
            reporter.working(
                step, **({"message": f"resuming from the checkpoint at step {step}"} if resume_from else {})
            )
            run = _Run(config, store, reporter, step, progress, policy)
            if memory_warning:
                run.warn(memory_warning)
            if resume_from is not None:
                step, resumed_seq, skipped = _restore_newest_good(run, store)
                reporter.working(
                    step,
                    message=f"resumed from checkpoint at step {step}{skipped}; events from seq {resumed_seq} "
                    f"up to this one belong to work after that checkpoint and are superseded",
                    superseded_from_seq=resumed_seq,
                )
            run.record_code(step)
            if rollout_only_episodes:
                _try_episodes(run, rollout_only_episodes)
                reporter.end("completed", 0)
                return store.run_dir
            last = min(total, step + max_steps) if max_steps is not None else total
            run.trackers = Trackers(
                config.logging,
                run_id=store.run_id,
                run_dir=str(store.run_dir),
                resolved_config=redact_secrets(config.model_dump(mode="json")),
                warn=run.warn,
            )
            step = _train_steps(run, step, last, total, stop)
            latest = store.latest_checkpoint()
            if step > 0 and (latest is None or checkpoint_step(latest) != step):
                run.checkpoint(step)  # the end of a run, or of a graceful stop, is always resumable
            reporter.end("completed" if step >= total else "stopped", step)
    except BaseException as err:
        step = run.completed_step if run is not None else step  # the failing step did not complete
        reporter.end("failed", step, message=f"{type(err).__name__}: {err}", traceback=traceback.format_exc())
        raise
    finally:
        if run is not None:
            run.close()
        store.clear_pid()
    return store.run_dir


def _try_episodes(run: _Run, count: int) -> None:
    run.reporter.phase("rollouts", 0, 0, count)
    episodes = run.engine.run(
        run.tasks[:count] if len(run.tasks) >= count else [run.tasks[i % len(run.tasks)] for i in range(count)],
        1,
        rollout_seed(run.config.seed, 0),
        on_episode_end=run.reporter.episode_counter(0),
    )
    run.record(0, episodes)
    run.store.append_event("metrics", {"step": 0, "metrics": rollout_metrics(episodes) | run.rollout_stats()})


def _report_non_finite(run: _Run, step: int, bar: Any, explanation: str) -> None:
    """The step stops before the optimizer (learner.NonFiniteError): an error `health` event, in the log, the
    trackers and the CLI, before the run fails with the same explanation."""
    event = non_finite_event(step, explanation)
    run.store.append_event("health", event)
    assert run.trackers is not None
    run.trackers.log_step(step, {}, [event], [])
    if run.progress:
        bar.write(health_text(event), file=sys.stderr)


def _train_steps(run: _Run, step: int, last: int, total: int, stop: threading.Event) -> int:
    """Steps `step + 1` to `last`. With train.async_steps the next step's rollouts run in a second thread while
    this step updates: the engine was given the weights before the update started, so the rollouts are one
    step behind the learner, and the learner corrects for it (see `Learner.behaviour_correction`)."""
    from tqdm import tqdm

    cfg = run.config
    per_step = cfg.train.batch_size // cfg.rollout.group_size
    bar = tqdm(
        total=total,
        initial=step,
        desc=cfg.name,
        unit="step",
        file=sys.stderr,
        disable=not run.progress,
        dynamic_ncols=True,
    )

    def rollout(at_step: int, on_episode_end: EpisodeCounter = count_nothing) -> tuple[list[Episode], dict[str, float]]:
        if run.learns_from_sft(at_step):
            assert run.sft_episodes is not None
            return sft_batch(run.sft_episodes, at_step, cfg.train.batch_size, cfg.seed, cfg.data.shuffle), {}
        tasks = items_for_step(run.tasks, at_step, per_step, cfg.seed, cfg.data.shuffle)
        episodes = run.engine.run(
            tasks, cfg.rollout.group_size, seed=rollout_seed(cfg.seed, at_step), on_episode_end=on_episode_end
        )
        if cfg.algorithm.rft_where is None:
            return episodes, run.rollout_stats()
        episodes, passed = mark_passing(episodes, cfg.algorithm.rft_where, at_step, run.tokenizer, run.store.run_id)
        return episodes, run.rollout_stats() | passed

    prefetcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rollout") if cfg.train.async_steps else None
    prefetched: Future[tuple[list[Episode], dict[str, float]]] | None = None
    try:
        while step < last and not stop.is_set():
            step += 1
            run.step_in_progress = step
            started = time.perf_counter()
            # A prefetched step's rollouts ran beside the previous update: they are counted only when waited for.
            run.reporter.phase("rollouts", step, 0, per_step * cfg.rollout.group_size)
            episodes, rollout_stats = (
                prefetched.result() if prefetched is not None else rollout(step, run.reporter.episode_counter(step))
            )
            prefetched = None
            if prefetcher is not None and step < last:
                run.engine.sync_weights()  # here, before the update below starts changing them
                prefetched = prefetcher.submit(rollout, step + 1)
            run.reporter.phase("updating", step)
            try:
                episodes, dropped = screen_rewards(
                    episodes,
                    step,
                    cfg.train.non_finite_rewards,
                    from_agent=cfg.agent is not None,
                    max_abs=cfg.rollout.max_abs_reward,
                )
                try:
                    update = run.learner_for(step).update(episodes)
                except NonFiniteError as err:
                    raise NonFiniteError(f"step {step}: {err}") from None
            except NonFiniteError as err:
                _report_non_finite(run, step, bar, str(err))
                raise
            run.engine.weights_updated()
            metrics = rollout_metrics(episodes) | rollout_stats | update.metrics
            if dropped:
                metrics["health/dropped_non_finite"] = float(dropped)
            if cfg.train.eval_every and step % cfg.train.eval_every == 0:
                run.reporter.phase("evaluating", step)
                if prefetched is not None:
                    wait([prefetched])  # the engine samples greedily for the evaluation: the prefetch must be done
                metrics |= heldout_metrics(run.engine, run.eval_tasks, cfg.train.batch_size, cfg.seed)
            metrics["perf/step_time_s"] = time.perf_counter() - started
            metrics["perf/peak_memory_mb"] = peak_memory_mb()
            records = run.record(step, episodes, update)
            run.store.append_event("metrics", {"step": step, "metrics": metrics})
            run.completed_step = step
            behind, sampled = bool(cfg.train.async_steps), not run.learns_from_sft(step)  # what the checks may read
            health_events = run.health.observe(
                StepEvidence(step, metrics, episodes, update.per_episode, behind, sampled)
            )
            for event in health_events:
                run.store.append_event("health", event)
            assert run.trackers is not None
            run.trackers.log_step(step, metrics, health_events, records)
            run.reporter.working(step)
            if step % cfg.train.checkpoint_every == 0:
                run.checkpoint(step)
            bar.update(1)
            if run.progress:
                bar.write(summary_line(step, total, metrics, run.health.active), file=sys.stderr)
                for event in health_events:
                    bar.write(health_text(event), file=sys.stderr)
                if dropped:
                    bar.write(dropped_text(dropped), file=sys.stderr)
    finally:
        if prefetcher is not None:
            # A stop or a failure leaves the prefetched step unused; its rollouts finish first (the engine is shared).
            prefetcher.shutdown(wait=True)
        bar.close()
    return step

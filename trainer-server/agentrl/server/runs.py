"""Runs as child processes: start, stop, resume, list; notice when one dies.

Each run is `python -m agentrl.cli train ...` in its own session, so it outlives a client and even
the server. Its `events.jsonl` is the source of truth; the server appends to it only when the run's
process is gone and the log does not say how it ended (killed, crashed, or found dead on restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
import os
import shutil
import signal
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from agentrl.contract.config import ConfigError, RunConfig, load_config_dict, redact_secrets, resolve_paths
from agentrl.contract.files_inside import is_plain_folder, open_own_file, read_inside
from agentrl.contract.processes import pid_alive
from agentrl.contract.safe_yaml import MAX_YAML_BYTES, load_yaml
from agentrl.contract.schemas import (
    ACTIVE_RUN_STATUSES,
    ENDED_RUN_STATUSES,
    RESUMABLE_RUN_STATUSES,
    WORKING_RUN_STATUSES,
)
from agentrl.environment.code_snapshot import read_code_manifest, read_snapshot_file
from agentrl.learning.memory_advice import check_memory
from agentrl.run.runstore import (
    CONFIG_FILE,
    EXPORTS_DIR,
    PID_FILE,
    RUN_FILE,
    RunStore,
    check_run_id,
    checkpoint_step,
    last_status,
    list_checkpoints,
    list_run_dirs,
    new_run_id,
    process_start_time,
    reverse_events,
    run_folder,
    run_process,
)
from agentrl.run.stderr_log import cap_log
from agentrl.server.children import agentrl_command
from agentrl.server.protocol import CONFIG_INVALID, INVALID_PARAMS, RUN_NOT_FOUND, RUN_STATE_CONFLICT, RpcError
from agentrl.server.run_holds import RunHolds
from agentrl.server.run_info import MAX_DAMAGE_SHOWN, read_run_record, status_run_info
from agentrl.server.run_process import RunProcess, stderr_log_path, unfinished_end

log = logging.getLogger("agentrl.server")
# How often the server cuts a run's stderr log (RUNS_DIR/.logs/RUN.stderr.log, run/stderr_log.py); the run cuts it
# too, every second, whether a server watches or not.
LOG_CAP_EVERY_S = 5.0
# A run's process exits moments after it writes how it ended (a failed or stopped status): run/resume waits this
# long for it to be gone rather than refuse a resume that is asked for at once.
EXIT_AFTER_END_STATUS_S = 30.0
# run/delete renames a run's folder to this prefix (at once, so the run is gone from every listing) before removing it
# (seconds, for checkpoints of a large model); one left by a server that ended meanwhile is removed at start.
DELETING_PREFIX = ".deleting-"


def default_max_runs() -> int:
    """How many runs a server runs at once unless told (`agentrl serve --max-runs`): one per 2 cores and per 4 GiB of
    memory, at least 2 (a training run and a Try run beside it). A CPU run uses every core it is given; twenty at
    once on 2 cores took 11 GB and a load of 36."""
    cores = len(os.sched_getaffinity(0))
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return max(2, min(cores // 2, int(memory_gib // 4)))


def _steps_of(info: dict[str, Any]) -> dict[str, int]:
    return {"step": info["step"], "total_steps": info["totalSteps"]}


def on_ray_cluster(config: RunConfig, address: str) -> RunConfig:
    """The config a server started with `--ray ADDRESS` runs: on that cluster, unless the config already names a
    cluster of its own (cluster.backend ray with an address other than auto). Worker counts and resources stay the
    config's. Raises ConfigError if the config cannot run on a cluster (train.async_steps)."""
    cluster = config.cluster
    if cluster.backend == "ray" and cluster.address != "auto":
        return config
    tree = config.model_dump(mode="json")
    tree["cluster"] |= {"backend": "ray", "address": address}
    return load_config_dict(tree)


class RunManager:
    def __init__(self, runs_dir: Path, ray_address: str | None = None, max_runs: int | None = None) -> None:
        self.runs_dir = runs_dir
        self.ray_address = ray_address  # `agentrl serve --ray ADDRESS`: every run it starts runs there
        self.max_runs = max_runs or default_max_runs()  # runs whose processes run at once; the rest wait, queued
        self.incoming_dir = runs_dir / ".incoming"
        self.live: dict[str, RunProcess] = {}  # runs with a process, and runs waiting for a slot, in start order
        self._started: dict[str, asyncio.Event] = {}  # set when a run's process starts: wakes its idle subscribers
        self.holds = RunHolds()  # what else works on a run's folder (an export, a re-roll): run/delete waits for none

    # --- start-up -----------------------------------------------------------------------------
    def recover(self) -> None:
        """Every run on disk is listed; one whose process died without saying so is `interrupted`."""
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        for half_deleted in self.runs_dir.glob(f"{DELETING_PREFIX}*"):
            if half_deleted.is_symlink():  # a link a server renamed before links were removed as links
                half_deleted.unlink()
            else:
                shutil.rmtree(half_deleted, ignore_errors=True)
        for run_dir in list_run_dirs(self.runs_dir):
            exports = run_dir / EXPORTS_DIR  # never a link's: what it leads to is not the run's to remove
            for half_export in exports.glob(".tmp-*") if is_plain_folder(exports) else ():  # an export cut short
                shutil.rmtree(half_export, ignore_errors=True)
            status = last_status(run_dir) or {}
            if status.get("status") in ENDED_RUN_STATUSES:
                continue
            if self._adopt(run_dir):
                continue
            try:
                RunStore(run_dir).append_event(
                    "status",
                    {
                        "status": "interrupted",
                        "step": status.get("step", 0),
                        "total_steps": status.get("total_steps", 0),
                        "message": "the run's process ended without finishing (server or machine restart); resume "
                        "it to continue from its last checkpoint",
                    },
                    durable=True,
                )
            except OSError as err:  # a log that is a link or a FIFO: listed with its damage, never written through
                log.warning("run %s: its end could not be recorded: %s", run_dir.name, err)
            (run_dir / PID_FILE).unlink(missing_ok=True)

    # --- queries ------------------------------------------------------------------------------
    def run_dir(self, run_id: str) -> Path:
        """The folder of a run this server knows; every method that takes a run id finds its run here."""
        try:
            path = run_folder(self.runs_dir, run_id)
        except ValueError as err:
            raise RpcError(RUN_NOT_FOUND, f"no run {run_id!r} in {self.runs_dir}: {err}") from None
        if run_id in self.live and not path.exists():
            return path  # queued: the process has not created its folder yet
        if not (path / RUN_FILE).is_file():
            raise RpcError(RUN_NOT_FOUND, f"no run {run_id!r} in {self.runs_dir}")
        return path

    def info(self, run_id: str) -> dict[str, Any]:
        path = self.run_dir(run_id)
        last, status, metrics, phase = 0, None, None, None
        phase_open = True  # whether an older event may still be the run's phase
        working_statuses = 0
        damage: list[str] = []
        # The log's tail holds what a RunInfo shows: a long log is not read, so only damage in what is read shows.
        for event in reverse_events(path, damage):
            last = last or event["seq"]
            status = status or (event["data"] if event["type"] == "status" else None)
            metrics = (
                metrics if metrics is not None else (event["data"]["metrics"] if event["type"] == "metrics" else None)
            )
            if phase_open and event["type"] == "phase":
                phase, phase_open = event["data"], False
            elif phase_open and event["type"] == "status":
                # A status other than running or stopping ends the phase. The trainer writes a phase at the start of
                # every step, so one is never more than two working statuses back: a log written before phases
                # existed is not read further for one.
                working_statuses += 1
                phase_open = event["data"]["status"] in WORKING_RUN_STATUSES and working_statuses < 2
            if status is not None and metrics is not None and not phase_open:
                break
        queued = self.live[run_id].queued_meta if run_id in self.live else None
        status = status or {"status": "queued", "step": 0, "total_steps": (queued or {}).get("total_steps", 0)}
        if run_id in self.live and self.live[run_id].waiting_args is not None:
            status = {**status, "status": "queued", "message": self._waiting_message(run_id)}
        elif run_id in self.live and "message" not in status and status["status"] == "queued":
            status = {**status, "message": "starting: its process is loading"}  # until the process says `running`
        meta = read_run_record(path, damage) if (path / RUN_FILE).is_file() else (queued or {})
        metrics = metrics or {}
        return {
            "runId": run_id,
            "name": meta.get("name", run_id),
            "mode": meta.get("mode", "train"),
            **status_run_info(status),
            "createdAt": meta.get("created_at", ""),
            "latestMetrics": metrics,
            "lastSeq": last,
            "hasCheckpoint": bool(list_checkpoints(path)),
            **({"phase": phase} if phase is not None and status["status"] in WORKING_RUN_STATUSES else {}),
            **({"damage": damage[:MAX_DAMAGE_SHOWN]} if damage else {}),
        }

    def config(self, run_id: str) -> dict[str, Any]:
        """The run's frozen, resolved config; for a queued run, the one its process was started with."""
        frozen = self.run_dir(run_id) / CONFIG_FILE
        path = frozen if frozen.is_file() else self.incoming_dir / f"{run_id}.agentrl.yaml"
        if not path.is_file():
            raise RpcError(RUN_STATE_CONFLICT, f"run {run_id} has no config yet; ask again once it has started")
        try:
            config = load_yaml(read_inside(path.parent, path.name, MAX_YAML_BYTES).decode("utf-8"))
        except (OSError, ValueError, yaml.YAMLError) as err:
            config = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        if not isinstance(config, dict):
            why = config if isinstance(config, str) else f"a YAML {type(config).__name__}, not a mapping"
            raise RpcError(CONFIG_INVALID, f"run {run_id}'s {path.name} is damaged: {why}")
        return redact_secrets(config)

    def code(self, run_id: str) -> dict[str, Any] | None:
        """The run's code manifest (code.json), or None when the run recorded none."""
        try:
            return read_code_manifest(self.run_dir(run_id))
        except ValueError as err:
            raise RpcError(RUN_STATE_CONFLICT, f"run {run_id}: {err}") from None

    def code_file(self, run_id: str, path: str) -> dict[str, Any]:
        """One file of the run's code snapshot (`run/codeFile`): only a file its manifest lists, read from inside the
        snapshot folder; its text, or None for a file that is not UTF-8."""
        manifest = self.code(run_id)
        if manifest is None:
            raise RpcError(INVALID_PARAMS, f"run {run_id} recorded no code: it has no file {path!r}")
        try:
            data = read_snapshot_file(self.run_dir(run_id), manifest, path)
        except ValueError as err:  # a path the manifest does not list
            raise RpcError(INVALID_PARAMS, f"run {run_id}: {err}") from None
        except OSError as err:  # the run folder's damage (a link, a FIFO, a file too large), not the request's
            raise RpcError(RUN_STATE_CONFLICT, f"run {run_id}'s code snapshot is damaged: {err}") from None
        try:
            text: str | None = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        return {
            "runId": run_id,
            "path": path,
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
            "text": text,
        }

    def list(self) -> list[dict[str, Any]]:
        ids = {p.name for p in list_run_dirs(self.runs_dir)} | set(self.live)
        return [self.info(run_id) for run_id in sorted(ids)]

    # --- control ------------------------------------------------------------------------------
    async def start(self, config: dict[str, Any], base_dir: Path, mode: str, episodes: int | None) -> str:
        try:
            parsed = resolve_paths(load_config_dict(config), base_dir)
            if self.ray_address is not None:
                parsed = on_ray_cluster(parsed, self.ray_address)
            if mode == "train":
                # The run's process checks again; refused here, the editor hears why at once (train.memory_check).
                await asyncio.to_thread(check_memory, parsed, base_dir)
        except ConfigError as err:
            raise RpcError(CONFIG_INVALID, str(err)) from None
        run_id = new_run_id(parsed.name)
        self.incoming_dir.mkdir(parents=True, exist_ok=True)
        config_path = self.incoming_dir / f"{run_id}.agentrl.yaml"
        config_path.write_text(yaml.safe_dump(parsed.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
        args = ["train", str(config_path), "--runs-dir", str(self.runs_dir), "--run-id", run_id, "--quiet"]
        if mode == "try":
            args += ["--rollout-only", str(episodes or 4)]
        await self._admit(run_id, args)
        self.live[run_id].queued_meta = {
            "name": parsed.name,
            "mode": mode,
            "created_at": datetime.now(UTC).isoformat(),
            "total_steps": parsed.train.steps if mode == "train" else 0,
        }
        return run_id

    async def resume(self, run_id: str) -> str:
        """Starts the run's process again (or queues it past --max-runs); returns running or queued."""
        info = self.info(run_id)
        proc = self.live.get(run_id)
        if proc is not None and info["status"] in ENDED_RUN_STATUSES:
            # The log says the run ended, and its process is exiting: a resume asked for right after the failed
            # or stopped event waits for it, since two processes must never write one run folder.
            try:
                await asyncio.wait_for(proc.finished.wait(), EXIT_AFTER_END_STATUS_S)
            except TimeoutError:
                pid = proc.process.pid if proc.process else proc.adopted_pid
                raise RpcError(
                    RUN_STATE_CONFLICT,
                    f"run {run_id} is {info['status']}, but its process (pid {pid}) has not exited "
                    f"{EXIT_AFTER_END_STATUS_S:.0f} s later; resume it once the process is gone",
                ) from None
            info = self.info(run_id)
        if run_id in self.live:
            why = (
                "it waits for a slot and starts once a running run ends"
                if self.live[run_id].waiting_args is not None
                else "its process is still running"
            )
            raise RpcError(RUN_STATE_CONFLICT, f"run {run_id} is {info['status']}: {why}")
        if info["status"] not in RESUMABLE_RUN_STATUSES:
            raise RpcError(
                RUN_STATE_CONFLICT,
                f"run {run_id} is {info['status']}; only a stopped, interrupted or failed run can be resumed",
            )
        if info["mode"] == "try":
            raise RpcError(RUN_STATE_CONFLICT, "a Try run has nothing to resume; start a new one")
        if not info["hasCheckpoint"]:
            raise RpcError(RUN_STATE_CONFLICT, f"run {run_id} has no checkpoint to resume from")
        # Said before the process starts, so a resume that dies early still ends with a status; its step is where the
        # run continues from (the trainer passes over a damaged checkpoint, and says so, once it has loaded them).
        resume_from = checkpoint_step(list_checkpoints(self.run_dir(run_id))[-1])
        RunStore(self.run_dir(run_id)).append_event(
            "status",
            {
                "status": "queued",
                "step": resume_from,
                "total_steps": info["totalSteps"],
                "message": f"resume requested: from the checkpoint at step {resume_from}",
            },
            durable=True,
        )
        await self._admit(run_id, ["train", "--resume", str(self.run_dir(run_id)), "--quiet"])
        return "queued" if self.live[run_id].waiting_args is not None else "running"

    async def stop(self, run_id: str, mode: str) -> str:
        info = self.info(run_id)
        self.adopt_unwatched([info])  # a run that started as this server did can be stopped
        proc = self.live.get(run_id)
        if proc is None:
            raise RpcError(RUN_STATE_CONFLICT, f"run {run_id} is not running (it is {info['status']})")
        if proc.waiting_args is not None:  # never started: it leaves the queue, listed as stopped
            self.live.pop(run_id)
            incoming = self.incoming_dir / f"{run_id}.agentrl.yaml"
            if not (self.runs_dir / run_id / RUN_FILE).is_file():  # a new run: its folder, with the config it had
                config = load_yaml(read_inside(self.incoming_dir, incoming.name, MAX_YAML_BYTES).decode("utf-8"))
                meta = proc.queued_meta or {}
                RunStore.create(self.runs_dir, run_id, config, {"name": meta.get("name", run_id), "mode": info["mode"]})
            RunStore(self.runs_dir / run_id).append_event(
                "status",
                {**_steps_of(info), "status": "stopped", "message": "stopped while queued; nothing ran"},
                durable=True,
            )
            incoming.unlink(missing_ok=True)
            proc.finished.set()
            return "stopped"
        proc.stop_mode = mode
        pid = proc.process.pid if proc.process else proc.adopted_pid
        assert pid is not None
        if proc.process is None and process_start_time(pid) != proc.adopted_start:  # its process is gone
            raise RpcError(
                RUN_STATE_CONFLICT, f"run {run_id}'s process (pid {pid}) has ended; its end is being recorded"
            )
        # graceful: the trainer finishes its step and checkpoints; immediate: gone now.
        try:
            os.kill(pid, signal.SIGTERM if mode == "graceful" else signal.SIGKILL)
        except ProcessLookupError:
            pass
        return "stopping" if mode == "graceful" else "stopped"

    async def delete(self, run_id: str) -> None:
        """Removes an ended run's folder, its stderr log and the config it was queued with; a run a process works on
        (or waits to), or that something else holds (an export, a re-roll: `holds`), is refused. Only a folder inside
        the runs folder is removed (run_dir: a valid id, not a link); a link planted in a run's place is removed as a
        link, and what it points to stays."""
        with contextlib.suppress(ValueError):
            if (self.runs_dir / check_run_id(run_id)).is_symlink():
                (self.runs_dir / run_id).unlink()
                log.info("the link %s in place of a run removed", self.runs_dir / run_id)
                return
        info = self.info(run_id)
        # A run whose log says it runs is refused if its process lives (adopted here, if this server never watched
        # it); one whose process is gone without a word can go.
        self.adopt_unwatched([info])
        if run_id in self.live:
            raise RpcError(RUN_STATE_CONFLICT, f"run {run_id} is {info['status']}: stop it before deleting it")
        if holders := self.holds.holders(run_id):
            raise RpcError(
                RUN_STATE_CONFLICT, f"run {run_id} is in use by {' and '.join(holders)}: delete it once that has ended"
            )
        doomed = self.runs_dir / f"{DELETING_PREFIX}{run_id}-{uuid.uuid4().hex[:6]}"
        self.run_dir(run_id).rename(doomed)  # gone from every listing at once; a resume can no longer find it
        stderr_log_path(self.runs_dir, run_id).unlink(missing_ok=True)
        (self.incoming_dir / f"{run_id}.agentrl.yaml").unlink(missing_ok=True)
        await asyncio.to_thread(shutil.rmtree, doomed)
        log.info("run %s deleted", run_id)

    def _running(self) -> int:
        return sum(proc.waiting_args is None for proc in self.live.values())

    def _waiting_message(self, run_id: str) -> str:
        waiting = [r for r, proc in self.live.items() if proc.waiting_args is not None]
        return (
            f"queued: {self._running()} runs are running, this server's limit (agentrl serve --max-runs "
            f"{self.max_runs}); {waiting.index(run_id) + 1} of {len(waiting)} in the queue"
        )

    async def _admit(self, run_id: str, args: list[str]) -> None:
        """Start the run's process now, or queue it until a running run ends (first come, first started)."""
        if self._running() < self.max_runs:
            await self._spawn(run_id, args)
        else:
            self.live[run_id] = RunProcess(run_id, waiting_args=args)
            log.info("run %s queued: %s", run_id, self._waiting_message(run_id))
        if run_id in self._started:  # its subscribers, idle while nothing ran it, read its log again
            self._started[run_id].set()

    async def _start_waiting(self) -> None:
        for run_id, proc in list(self.live.items()):
            if self._running() >= self.max_runs:
                return
            if proc.waiting_args is not None and self.live.get(run_id) is proc:
                queued_meta = proc.queued_meta
                await self._spawn(run_id, proc.waiting_args)
                self.live[run_id].queued_meta = queued_meta

    async def started_again(self, run_id: str, timeout_s: float) -> None:
        """Returns when a process of this server starts on the run (or is queued for it), or after `timeout_s`."""
        event = self._started.setdefault(run_id, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout_s)
        if event.is_set():
            self._started.pop(run_id, None)

    async def _spawn(self, run_id: str, args: list[str]) -> None:
        stderr_path = stderr_log_path(self.runs_dir, run_id)
        stderr_path.parent.mkdir(parents=True, exist_ok=True)
        with open_own_file(stderr_path.parent, stderr_path.name, append=True) as stderr:
            process = await asyncio.create_subprocess_exec(
                *agentrl_command("agentrl.cli", *args),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,  # runs outlive the server and its terminal's signals
            )
        self.live[run_id] = RunProcess(run_id, process=process, stderr_path=stderr_path)
        log.info("run %s started (pid %d)", run_id, process.pid)
        asyncio.get_running_loop().create_task(self._watch(run_id, process))

    async def _watch(self, run_id: str, process: asyncio.subprocess.Process) -> None:
        stderr_path = stderr_log_path(self.runs_dir, run_id)
        while True:
            try:
                code = await asyncio.wait_for(process.wait(), LOG_CAP_EVERY_S)
                break
            except TimeoutError:
                await asyncio.to_thread(cap_log, stderr_path)
        await asyncio.to_thread(cap_log, stderr_path)  # what it printed last, before its end is recorded
        self._finish(run_id, code)

    def _adopt(self, run_dir: Path) -> bool:
        """Watch the run's process if it runs (started by an earlier server, or just before this one started)."""
        found = run_process(run_dir)
        if found is None or not pid_alive(found[0]):
            return False
        self.live[run_dir.name] = RunProcess(run_dir.name, adopted_pid=found[0], adopted_start=found[1])
        asyncio.get_running_loop().create_task(self._watch_adopted(run_dir.name, *found))
        log.info("run %s adopted (pid %d)", run_dir.name, found[0])
        return True

    def adopt_unwatched(self, infos: list[dict[str, Any]]) -> None:
        """Watch the runs of these RunInfos whose log says they run but no process of this server runs them: a run
        started just before this server did had no pid file yet when it looked (it was never adopted, run/stop
        said it was not running, and its end was never recorded)."""
        for info in infos:
            if info["runId"] not in self.live and info["status"] in ACTIVE_RUN_STATUSES:
                self._adopt(self.runs_dir / info["runId"])

    async def _watch_adopted(self, run_id: str, pid: int, started: str) -> None:
        stderr_path = stderr_log_path(self.runs_dir, run_id)
        polls_per_cap = round(LOG_CAP_EVERY_S / 0.5)
        for poll in itertools.count(1):
            if not pid_alive(pid) or process_start_time(pid) != started:  # gone, its pid perhaps reused
                break
            if poll % polls_per_cap == 0:
                await asyncio.to_thread(cap_log, stderr_path)
            await asyncio.sleep(0.5)
        await asyncio.to_thread(cap_log, stderr_path)
        self._finish(run_id, None)

    def _finish(self, run_id: str, exit_code: int | None) -> None:
        proc = self.live.pop(run_id, None)
        try:
            self._record_end(run_id, proc, exit_code)
        finally:
            if proc is not None:
                proc.finished.set()
            asyncio.get_running_loop().create_task(self._start_waiting())  # its slot goes to the first queued run

    def _record_end(self, run_id: str, proc: RunProcess | None, exit_code: int | None) -> None:
        run_dir = self.runs_dir / run_id
        if run_dir.is_dir():
            status = last_status(run_dir) or {}
            if status.get("status") not in ENDED_RUN_STATUSES:
                end = unfinished_end(self.runs_dir, status, proc, exit_code)
                RunStore(run_dir).append_event("status", end, durable=True)
            (run_dir / PID_FILE).unlink(missing_ok=True)
        log.info("run %s ended (exit %s)", run_id, exit_code)

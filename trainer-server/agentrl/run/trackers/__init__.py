"""Experiment trackers (the run config's `logging:`): TensorBoard, Weights & Biases and MLflow, one module each
behind `Tracker`. The trainer calls `Trackers` at one place per step; every metric (eval/... included), the
resolved config, the health events and a sample of the step's trajectories reach each tracker that is on.

A tracker is a convenience, never a reason to lose a run: a library that is not installed, a server that
cannot be reached or a call that fails costs one warning (a `log` event and a line on stderr) and turns that
tracker off; training goes on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from agentrl.contract.config import LoggingConfig
from agentrl.run.trackers.table import Tracker, trajectory_rows


class Trackers:
    """Every tracker the config turns on, as one. `warn(message)` reports a tracker that failed (once per tracker)."""

    def __init__(
        self,
        config: LoggingConfig,
        *,
        run_id: str,
        run_dir: str,
        resolved_config: dict[str, Any],
        warn: Callable[[str], None],
    ) -> None:
        self.config = config
        self._warn = warn
        self._trackers: list[Tracker] = []
        openers: list[tuple[str, Callable[[], Tracker]]] = []
        if config.tensorboard:
            from agentrl.run.trackers.tensorboard_tracker import TensorBoardTracker

            openers.append(("tensorboard", lambda: TensorBoardTracker(config.tensorboard, run_id, resolved_config)))
        if config.wandb:
            from agentrl.run.trackers.wandb_tracker import WandbTracker

            openers.append(("wandb", lambda: WandbTracker(config.wandb, run_id, run_dir, resolved_config)))
        if config.mlflow:
            from agentrl.run.trackers.mlflow_tracker import MlflowTracker

            openers.append(("mlflow", lambda: MlflowTracker(config.mlflow, run_id, resolved_config)))
        for name, open_tracker in openers:
            try:
                self._trackers.append(open_tracker())
            except ImportError as err:
                self._warn(
                    f"logging.{name}: the {name} library is not installed ({err}); install the extra "
                    f"`pip install 'agentrl[{name}]'`. The run goes on without it"
                )
            except Exception as err:  # whatever the tracker raises, training goes on
                self._warn(f"logging.{name}: could not start ({type(err).__name__}: {err}). The run goes on without it")

    @property
    def names(self) -> list[str]:
        return [tracker.name for tracker in self._trackers]

    def log_step(
        self, step: int, metrics: dict[str, float], health_events: list[dict[str, Any]], records: list[dict[str, Any]]
    ) -> None:
        """One step's results: its metrics (with eval/... when it evaluated), its health events, a sample of its
        trajectory records."""
        rows = trajectory_rows(records, self.config.trajectory_sample)
        for tracker in list(self._trackers):
            try:
                if metrics:
                    tracker.log_metrics(step, metrics)
                for event in health_events:
                    tracker.log_health(step, event)
                if rows:
                    tracker.log_trajectories(step, rows)
            except Exception as err:  # a tracker that fails is dropped, the run goes on
                self._trackers.remove(tracker)
                self._warn(
                    f"logging.{tracker.name}: stopped logging at step {step} ({type(err).__name__}: {err}). "
                    "The run goes on without it"
                )
                with contextlib.suppress(Exception):  # its failure is reported above, once; closing is best effort
                    tracker.close()

    def close(self) -> None:
        for tracker in self._trackers:
            self._close(tracker)
        self._trackers = []

    def _close(self, tracker: Tracker) -> None:
        try:
            tracker.close()
        except Exception as err:
            self._warn(f"logging.{tracker.name}: could not close cleanly ({type(err).__name__}: {err})")

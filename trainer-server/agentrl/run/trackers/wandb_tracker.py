"""`logging.wandb`: a Weights & Biases run named after the agentrl run (`pip install 'agentrl[wandb]'`). Offline
mode writes it under `dir` (default: the run folder) for a later `wandb sync`."""

from __future__ import annotations

import re
from typing import Any

from agentrl.contract.config import WandbConfig
from agentrl.run.trackers.table import TRAJECTORY_COLUMNS

HEALTH_COLUMNS = ("step", "code", "severity", "resolved", "message", "fix", "trajectory_ids")
# W&B run ids allow letters, digits, dashes and underscores; the agentrl run id is that already, by construction,
# but a run id given by a caller is not checked against it.
_NOT_IN_RUN_ID = re.compile(r"[^A-Za-z0-9_-]")


class WandbTracker:
    name = "wandb"

    def __init__(self, config: WandbConfig, run_id: str, run_dir: str, resolved_config: dict[str, Any]) -> None:
        import wandb

        self.wandb = wandb
        # The run id is W&B's id too, so a resumed agentrl run continues the same W&B run.
        self.run = wandb.init(
            project=config.project,
            entity=config.entity,
            mode=config.mode,
            dir=config.dir or run_dir,
            id=_NOT_IN_RUN_ID.sub("-", run_id),
            name=run_id,
            config=resolved_config,
            resume="allow",
            reinit="create_new",
            # A tracker must not hold up training: give up on a server that does not answer.
            settings=wandb.Settings(init_timeout=30, silent=True),
        )
        # Health events accumulate in one table, logged whole each time it grows (W&B tables are immutable).
        self.health_rows: list[list[Any]] = []

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log(metrics, step=step)

    def log_health(self, step: int, event: dict[str, Any]) -> None:
        self.health_rows.append(
            [
                step,
                event["code"],
                event["severity"],
                event["resolved"],
                event["message"],
                event["fix"],
                ", ".join(event["trajectory_ids"]),
            ]
        )
        self.run.log(
            {"health/events": self.wandb.Table(columns=list(HEALTH_COLUMNS), data=self.health_rows)}, step=step
        )
        if not event["resolved"]:
            self.run.summary[f"health/{event['code']}"] = event["message"]

    def log_trajectories(self, step: int, rows: list[list[Any]]) -> None:
        self.run.log({"trajectories": self.wandb.Table(columns=list(TRAJECTORY_COLUMNS), data=rows)}, step=step)

    def close(self) -> None:
        self.run.finish()

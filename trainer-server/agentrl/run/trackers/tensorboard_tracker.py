"""`logging.tensorboard`: event files under log_dir/<run id>, written by PyTorch's SummaryWriter (which needs the
`tensorboard` package: `pip install 'agentrl[tensorboard]'`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from agentrl.contract.config import TensorBoardConfig
from agentrl.run.trackers.table import TRAJECTORY_COLUMNS


def _cell(value: Any) -> str:
    # Markdown table cells: one line, no column separators.
    return str(value).replace("|", "\\|").replace("\n", "<br>")


class TensorBoardTracker:
    name = "tensorboard"

    def __init__(self, config: TensorBoardConfig, run_id: str, resolved_config: dict[str, Any]) -> None:
        import tensorboard  # noqa: F401 - SummaryWriter's backend; its absence is the ImportError to report
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(config.log_dir) / run_id
        self.writer = SummaryWriter(log_dir=str(self.log_dir))
        # TensorBoard's text plugin renders Markdown: the config as a code block.
        self.writer.add_text("config", "```yaml\n" + yaml.safe_dump(resolved_config, sort_keys=False) + "```", 0)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        for name, value in metrics.items():
            self.writer.add_scalar(name, value, step)

    def log_health(self, step: int, event: dict[str, Any]) -> None:
        state = "resolved" if event["resolved"] else event["severity"]
        self.writer.add_text(
            f"health/{event['code']}",
            f"**{state}**: {event['message']}\n\nfix: {event['fix']}\n\n"
            f"trajectories: {', '.join(event['trajectory_ids']) or 'none'}\n\n"
            f"```json\n{json.dumps(event['metrics'])}\n```",
            step,
        )

    def log_trajectories(self, step: int, rows: list[list[Any]]) -> None:
        header = "| " + " | ".join(TRAJECTORY_COLUMNS) + " |\n|" + "---|" * len(TRAJECTORY_COLUMNS)
        body = "\n".join("| " + " | ".join(_cell(value) for value in row) + " |" for row in rows)
        self.writer.add_text("trajectories", f"{header}\n{body}", step)

    def close(self) -> None:
        self.writer.close()

"""`logging.mlflow`: an MLflow run in `experiment`, on a tracking server (http(s)://...) or a local folder
(`pip install 'agentrl[mlflow]'`, which is mlflow-skinny: the client, without the server and UI)."""

from __future__ import annotations

import os
import re
import time
from typing import Any
from urllib.parse import urlparse

from agentrl.contract.config import MlflowConfig
from agentrl.run.trackers.table import TRAJECTORY_COLUMNS

# MLflow names allow letters, digits, and _ - . / and space; tool metrics can hold other characters ("(unparsed)").
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_\-./ ]")
# MLflow refuses longer parameter values; the whole config is also an artifact (config.json).
PARAM_CHARS = 6000
RUN_ID_TAG = "agentrl.run_id"


def mlflow_name(name: str) -> str:
    """A metric or parameter name as MLflow accepts it."""
    return _NOT_IN_NAME.sub("_", name)


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = str(value)[:PARAM_CHARS]
    return flat


class MlflowTracker:
    name = "mlflow"

    def __init__(self, config: MlflowConfig, run_id: str, resolved_config: dict[str, Any]) -> None:
        # A tracker must not hold up training: MLflow's client otherwise retries an unreachable server for minutes.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
        if urlparse(config.tracking_uri).scheme in ("", "file"):
            # MLflow 3 keeps its folder store in maintenance and refuses it unless asked; a folder in the run config
            # is that request.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow.entities import Metric, Param
        from mlflow.tracking import MlflowClient

        self.Metric = Metric
        self.client = MlflowClient(tracking_uri=config.tracking_uri)
        experiment = self.client.get_experiment_by_name(config.experiment)
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(config.experiment)
        # A resumed agentrl run continues its MLflow run, found by its tag.
        found = self.client.search_runs(
            [experiment_id], filter_string=f"tags.`{RUN_ID_TAG}` = '{run_id}'", max_results=1
        )
        if found:
            self.run_id = found[0].info.run_id
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            self.run_id = self.client.create_run(experiment_id, run_name=run_id, tags={RUN_ID_TAG: run_id}).info.run_id
            params = [Param(mlflow_name(key), value) for key, value in _flatten(resolved_config).items()]
            for start in range(0, len(params), 100):  # log_batch takes at most 100 parameters
                self.client.log_batch(self.run_id, params=params[start : start + 100])
            self.client.log_dict(self.run_id, resolved_config, "config.json")

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        now = int(time.time() * 1000)
        batch = [self.Metric(mlflow_name(name), value, now, step) for name, value in metrics.items()]
        for start in range(0, len(batch), 1000):  # log_batch takes at most 1000 metrics
            self.client.log_batch(self.run_id, metrics=batch[start : start + 1000])

    def log_health(self, step: int, event: dict[str, Any]) -> None:
        state = "resolved" if event["resolved"] else event["severity"]
        self.client.log_dict(self.run_id, event, f"health/step-{step:06d}-{event['code']}-{state}.json")

    def log_trajectories(self, step: int, rows: list[list[Any]]) -> None:
        # A JSON table artifact ({"columns", "data"}); mlflow.log_table would need pandas for the same.
        self.client.log_dict(
            self.run_id, {"columns": list(TRAJECTORY_COLUMNS), "data": rows}, f"trajectories/step-{step:06d}.json"
        )

    def close(self) -> None:
        self.client.set_terminated(self.run_id)

"""Records the Run Dashboard's test fixtures with the real trainer on the tiny model.

    PYTHONPATH=trainer-server .venv/bin/python protocol/examples/run-logs/make_fixtures.py

Two runs of the bundled lookup example, 12 steps each, differing in learning rate and group size, so the
dashboard has two runs to overlay and a config diff to show. Each is written as RUN.events.jsonl (the run's
event log exactly as the trainer wrote it: status, metrics, health, log, trajectory and checkpoint events)
and RUN.config.json (its frozen config.yaml, what `run/config` returns, with this repository's path cut off
so the fixture does not depend on where it was recorded). Both runs hit health alerts on this tiny model.

Then each log is served by a real `agentrl serve` and what the editor receives is recorded: RUN.run-events.jsonl
(every `run/event` notification's params, from a subscription since 0) and RUN.run-info.json (`run/get`). The
Runs-model tests read these, so a field the server renames fails them. `--events-only` records just these from
the committed logs, without training again.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
EXAMPLE = REPO / "trainer-server" / "agentrl" / "examples" / "lookup" / "lookup.agentrl.yaml"
RUNS = {
    "lookup-lr-high": ["train.steps=12", "train.lr=0.01"],
    "lookup-lr-low": ["train.steps=12", "train.lr=0.001", "rollout.group_size=4", "train.batch_size=8"],
}


def without_repo_path(value):
    if isinstance(value, dict):
        return {k: without_repo_path(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_repo_path(v) for v in value]
    return value.replace(f"{REPO}/", "") if isinstance(value, str) else value


def record_run_events() -> None:
    """Serve the committed logs as a runs folder and record what a subscribed client receives."""
    from agentrl.server.protocol import PROTOCOL_VERSION
    from websockets.sync.client import connect

    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        for run_id in RUNS:
            run_dir = runs / run_id
            run_dir.mkdir(parents=True)
            log = (HERE / f"{run_id}.events.jsonl").read_text()
            (run_dir / "events.jsonl").write_text(log)
            for event in map(
                json.loads, log.splitlines()
            ):  # the checkpoints the log names (their files are not needed)
                if event["type"] == "checkpoint":
                    (run_dir / event["data"]["path"]).mkdir(parents=True, exist_ok=True)
            (run_dir / "config.yaml").write_text(
                yaml.safe_dump(json.loads((HERE / f"{run_id}.config.json").read_text()))
            )
            meta = {"run_id": run_id, "created_at": "2026-11-24T22:00:00+00:00", "name": run_id, "mode": "train"}
            (run_dir / "run.json").write_text(json.dumps(meta))
        server = subprocess.Popen(
            [sys.executable, "-m", "agentrl.cli", "serve", "--port", "0", "--runs-dir", str(runs)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            ready = json.loads(server.stdout.readline())
            token = Path(ready["token_file"]).read_text().strip()
            with connect(ready["url"], additional_headers={"Authorization": f"Bearer {token}"}, max_size=None) as ws:
                ids = iter(range(1, 1_000_000))

                def request(method: str, params: dict) -> dict:
                    request_id = next(ids)
                    ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
                    while True:
                        message = json.loads(ws.recv(timeout=30))
                        if message.get("id") == request_id:
                            return message["result"]
                        notifications.append(message)

                notifications: list[dict] = []
                request("initialize", {"protocolVersion": PROTOCOL_VERSION})
                for run_id in RUNS:
                    info = request("run/get", {"runId": run_id})
                    (HERE / f"{run_id}.run-info.json").write_text(json.dumps(info, indent=2) + "\n")
                    notifications.clear()
                    last = request("run/subscribe", {"runId": run_id, "since": 0})["lastSeq"]
                    while not notifications or notifications[-1]["params"]["seq"] < last:
                        notifications.append(json.loads(ws.recv(timeout=30)))
                    events = [n["params"] for n in notifications if n["method"] == "run/event"]
                    lines = "".join(json.dumps(event) + "\n" for event in events)
                    (HERE / f"{run_id}.run-events.jsonl").write_text(lines)
                    request("run/unsubscribe", {"runId": run_id})
        finally:
            server.terminate()
            server.wait(timeout=10)


def main() -> None:
    if "--events-only" in sys.argv:
        record_run_events()
        return
    import torch
    from agentrl.contract.config import load_config
    from agentrl.run.trainer import train

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        for run_id, overrides in RUNS.items():
            run_dir = train(
                load_config(EXAMPLE, overrides), runs_dir=Path(tmp), run_id=run_id, config_base_dir=EXAMPLE.parent
            )
            (HERE / f"{run_id}.events.jsonl").write_text((run_dir / "events.jsonl").read_text())
            config = without_repo_path(yaml.safe_load((run_dir / "config.yaml").read_text()))
            (HERE / f"{run_id}.config.json").write_text(json.dumps(config, indent=2) + "\n")
    record_run_events()


if __name__ == "__main__":
    main()

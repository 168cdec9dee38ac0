"""What a RunInfo (rpc.schema.json) is made of besides the run's log: run.json's fields, each kept only when it is
valid, and the fields a status event sets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrl.contract.files_inside import read_json_inside
from agentrl.contract.schemas import RUN_MODES
from agentrl.run.runstore import MAX_RUN_RECORD_BYTES, RUN_FILE

MAX_DAMAGE_SHOWN = 20  # a RunInfo's `damage`: the first problems found, enough to say where to look


def read_run_record(run_dir: Path, damage: list[str]) -> dict[str, Any]:
    """run.json's name, mode and created_at, each kept only when it has the type run-folder.schema.json gives it;
    what is wrong with the file is said in `damage`, and the run is still listed, under its id."""
    try:
        record = read_json_inside(run_dir, RUN_FILE, MAX_RUN_RECORD_BYTES)
    except (OSError, ValueError) as err:
        damage.append(f"{RUN_FILE}: unreadable ({type(err).__name__})")
        return {}
    if not isinstance(record, dict):
        damage.append(f"{RUN_FILE}: a JSON {type(record).__name__}, not an object")
        return {}
    kept = {key: record[key] for key in ("name", "created_at") if isinstance(record.get(key), str)}
    if record.get("mode") in RUN_MODES:
        kept["mode"] = record["mode"]
    wrong = sorted({"name", "mode", "created_at"} & set(record) - set(kept))
    if wrong:
        damage.append(f"{RUN_FILE}: {', '.join(wrong)} of the wrong type or value")
    return kept


def status_run_info(status: dict[str, Any]) -> dict[str, Any]:
    """The RunInfo fields a status event's data sets (rpc.schema.json#/$defs/statusRunInfo): run/get's, and what
    a status event's run/event carries, so a client never maps the stored event itself."""
    return {
        "status": status["status"],
        "step": status.get("step", 0),
        "totalSteps": status.get("total_steps", 0),
        "message": status.get("message"),
    }

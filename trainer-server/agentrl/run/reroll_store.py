"""A run's stored re-rolls (`episode/reroll`: an episode edited at one turn and played on, agentrl/run/reroll.py),
RUN/rerolls/: beside the run's history, never in it (trajectory/query, trajectory/search and the trajectories/ files
do not see them).

A re-roll is two files, written by rename so that it is listed only once it is whole. Reading one checks both (the
files are read through files_inside: no link, no FIFO, capped; its own file against run-folder.schema.json's
`reroll`, each record line as JSON), so a damaged re-roll is skipped in a listing and said there, and asked for alone
it is DamagedReroll with why; the other re-rolls of the run still read.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentrl.contract.files_inside import (
    folder_to_write,
    is_plain_file,
    is_plain_folder,
    parse_json,
    read_inside,
    read_json_inside,
    replace_file,
)
from agentrl.contract.schemas import REROLL_ID_PATTERN, validator_for

REROLLS_DIR = "rerolls"
# A re-roll's own file is a few KiB; its records are samples x turns of an episode, each turn at most the context.
MAX_REROLL_BYTES = 2**20
MAX_REROLL_RECORDS_BYTES = 256 * 2**20


class DamagedReroll(ValueError):
    """A stored re-roll whose files cannot be read as one; the message names the file and what is wrong."""


def new_reroll_id() -> str:
    """When it was made (UTC, so ids sort by time) and 6 random hex digits: `$defs/rerollId`."""
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"


def reroll_files(run_dir: Path, reroll_id: str) -> tuple[Path, Path]:
    """(ID.json: what was edited, with which policy, and what came of it; ID.trajectories.jsonl: its episodes'
    trajectory records, one a line, as a step's file holds them, so the replay opens it as it opens one)."""
    if not re.fullmatch(REROLL_ID_PATTERN, reroll_id):
        raise ValueError(f"{reroll_id!r} is not a re-roll id")
    folder = Path(run_dir) / REROLLS_DIR
    return folder / f"{reroll_id}.json", folder / f"{reroll_id}.trajectories.jsonl"


def write_reroll(run_dir: Path, reroll: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """The records first, then the re-roll's own file, each by rename: a re-roll is listed only once it is whole."""
    validator_for("run-folder.schema.json", "reroll").validate(reroll)
    summary, trajectories = reroll_files(run_dir, reroll["reroll_id"])
    folder = folder_to_write(run_dir, summary.parent.name)
    for path, text in (
        (trajectories, "".join(json.dumps(record, allow_nan=False) + "\n" for record in records)),
        (summary, json.dumps(reroll, allow_nan=False)),
    ):
        replace_file(folder, path.name, text.encode())


def _read_summary(run_dir: Path, reroll_id: str) -> dict[str, Any]:
    """The re-roll's own file, checked; FileNotFoundError when there is none, DamagedReroll when it is damaged."""
    name = f"{REROLLS_DIR}/{reroll_id}.json"
    try:
        reroll = read_json_inside(run_dir, name, MAX_REROLL_BYTES)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise DamagedReroll(f"{name}: unreadable: {err}") from None
    except ValueError:  # not UTF-8, not JSON
        raise DamagedReroll(f"{name}: not JSON") from None
    problem = next(validator_for("run-folder.schema.json", "reroll").iter_errors(reroll), None)
    if problem is not None:
        where = "/".join(map(str, problem.absolute_path)) or "the top level"
        raise DamagedReroll(f"{name}: damaged at {where}: {problem.message[:200]}")
    if reroll["reroll_id"] != reroll_id:
        raise DamagedReroll(f"{name}: names another re-roll, {reroll['reroll_id']!r}")
    return reroll


def read_reroll(run_dir: Path, reroll_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A stored re-roll and its episodes' records: FileNotFoundError when there is none of that id, DamagedReroll
    when either file is damaged."""
    reroll = _read_summary(run_dir, reroll_id)
    name = f"{REROLLS_DIR}/{reroll_id}.trajectories.jsonl"
    try:
        lines = read_inside(run_dir, name, MAX_REROLL_RECORDS_BYTES).splitlines()
    except OSError as err:  # its own file is written last: records missing are damage too
        raise DamagedReroll(f"{name}: unreadable: {err}") from None
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = parse_json(line)
        except ValueError:  # not UTF-8, not JSON, nested too deep
            record = None
        if not isinstance(record, dict):
            raise DamagedReroll(f"{name} line {number}: not a JSON object")
        records.append(record)
    return reroll, records


def list_rerolls(run_dir: Path, damage: list[str]) -> list[dict[str, Any]]:
    """The run's stored re-rolls (their own files, not their records), oldest first; a damaged one is left out and
    said in `damage`."""
    folder = Path(run_dir) / REROLLS_DIR
    found = []
    for path in sorted(folder.glob("*.json")) if is_plain_folder(folder) else []:
        if not re.fullmatch(REROLL_ID_PATTERN, path.stem):
            continue
        if not is_plain_file(path):
            damage.append(f"{REROLLS_DIR}/{path.name}: a link or not a regular file: not read")
            continue
        try:
            found.append(_read_summary(run_dir, path.stem))
        except (DamagedReroll, FileNotFoundError) as err:  # FileNotFoundError: removed as it was listed
            damage.append(str(err))
    return found

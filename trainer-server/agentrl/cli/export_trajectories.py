"""`agentrl export-trajectories RUN_DIR --format atif [--out FILE] [--step N]`: a run's episodes in another tool's
trajectory format. `atif`: Harbor's Agent Trajectory Interchange Format (agentrl/run/atif.py), one ATIF trajectory per
episode, each checked against the spec before it is written: a .jsonl file holds one a line, a .json file the one
episode of a run or step that has one (Harbor's own layout: a trajectory.json per trajectory)."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FORMATS = ("atif",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help="a run folder (RUNS_DIR/RUN_ID)")
    parser.add_argument("--format", required=True, choices=FORMATS, help="atif: Harbor's ATIF v1.7")
    parser.add_argument(
        "--out",
        help="the file to write: .jsonl (a trajectory a line) or .json (a run or step of one episode); default "
        "RUN_DIR/exports/trajectories.atif.jsonl (trajectories-step-N.atif.jsonl with --step)",
    )
    parser.add_argument("--step", type=int, help="only this step's episodes (default: every step's)")


def _agent(run_dir: Path) -> dict[str, Any]:
    """ATIF's agent object: agentrl, and the run's model (a local folder by its name: its path is this machine's)."""
    import yaml

    from agentrl import __version__
    from agentrl.contract.files_inside import read_inside
    from agentrl.contract.safe_yaml import MAX_YAML_BYTES, load_yaml
    from agentrl.run.runstore import CONFIG_FILE

    agent: dict[str, Any] = {"name": "agentrl", "version": __version__}
    try:  # only the model's path is read: a frozen config from an older version names it too
        config = load_yaml(read_inside(run_dir, CONFIG_FILE, MAX_YAML_BYTES).decode("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):  # the model is then not named
        config = None
    config = config if isinstance(config, dict) else None
    model = (config or {}).get("model") or {}
    if isinstance(model.get("path"), str):
        agent["model_name"] = Path(model["path"]).name if Path(model["path"]).is_absolute() else model["path"]
    return agent


def _step_files(run_dir: Path, step: int | None) -> list[Path]:
    from agentrl.run.runstore import list_trajectory_files

    files = list_trajectory_files(run_dir)
    if not files:
        raise FileNotFoundError(f"{run_dir} has no trajectories (trajectories/step-*.trajectories.jsonl)")
    if step is None:
        return list(files.values())
    if step not in files:
        raise FileNotFoundError(f"{run_dir} has no trajectories of step {step}; it has steps {list(files)}")
    return [files[step]]


def _trajectories(paths: list[Path], agent: dict[str, Any], skipped: list[str]) -> Iterator[dict[str, Any]]:
    """The ATIF trajectory of each episode of those step files, in order, as each file holds them (the latest record
    of an id). A record that does not convert (a damaged file) is named in `skipped`."""
    from agentrl.run.atif import atif_problems, record_to_atif
    from agentrl.server.trajectory_index import TrajectoryIndex

    index = TrajectoryIndex()
    for path in paths:
        for record in index.all_records(path):
            try:
                trajectory = record_to_atif(record, agent)
            except (KeyError, TypeError, AttributeError, ValueError) as err:
                skipped.append(f"{path.name}: trajectory {record['id']}: not a trajectory record ({err!r})")
                continue
            problems = atif_problems(trajectory)
            if problems:  # a record the trajectory schema allows converts to valid ATIF: this is a bug of ours
                raise ValueError(f"trajectory {record['id']}: its ATIF is not valid: {'; '.join(problems[:3])}")
            yield trajectory


def export_trajectories(run_dir: Path, out: Path | None = None, *, step: int | None = None) -> dict[str, Any]:
    from agentrl.contract.files_inside import folder_to_write
    from agentrl.run.runstore import EXPORTS_DIR

    if out is None:  # inside the run folder, never through a link planted as its exports/ (RefusedFile otherwise)
        name = "trajectories" if step is None else f"trajectories-step-{step:06d}"
        out = folder_to_write(run_dir, EXPORTS_DIR) / f"{name}.atif.jsonl"
    if out.suffix not in (".jsonl", ".json"):
        raise ValueError(f"{out}: write a .jsonl file (a trajectory a line) or a .json file (one trajectory)")
    skipped: list[str] = []
    trajectories = _trajectories(_step_files(run_dir, step), _agent(run_dir), skipped)
    out.parent.mkdir(parents=True, exist_ok=True)
    # The file appears whole or not at all; its temporary file is a new one (O_EXCL, a random name), never a link
    # planted where a fixed name would be.
    descriptor, tmp_name = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    count = 0
    try:
        with open(descriptor, "w", encoding="utf-8") as handle:
            if out.suffix == ".jsonl":
                for trajectory in trajectories:
                    handle.write(json.dumps(trajectory, ensure_ascii=False) + "\n")
                    count += 1
            else:
                found = list(itertools.islice(trajectories, 2))
                if len(found) != 1:
                    episodes = "no episode" if not found else "more than one episode"
                    raise ValueError(
                        f"{out}: a .json file holds one ATIF trajectory, and this "
                        f"{'run' if step is None else 'step'} has {episodes}: write a .jsonl file"
                    )
                json.dump(found[0], handle, ensure_ascii=False, indent=2)
                handle.write("\n")
                count = 1
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    for line in skipped:
        print(f"agentrl export-trajectories: skipped {line}", file=sys.stderr)
    return {"out": str(out), "format": "atif", "trajectories": count, "skipped": len(skipped)}


def run(args: argparse.Namespace) -> int:
    from agentrl.contract.files_inside import RefusedFile

    try:
        result = export_trajectories(Path(args.run_dir), Path(args.out) if args.out else None, step=args.step)
    except (FileNotFoundError, ValueError, RefusedFile) as err:
        print(f"agentrl export-trajectories: {err}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0

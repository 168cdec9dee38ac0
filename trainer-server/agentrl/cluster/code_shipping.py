"""What a run's Ray workers need from the driver's disk, carried to them through Ray's object store: the env folder,
every file the run config names by its path, and a model folder. A worker on another node finds none of them at
the driver's paths (no shared file system is assumed); it writes what it received into a private folder of its own
and reads the config with those paths pointing there.

What travels:
- the env folder (agentrl/environment/code_snapshot.py's `env_folder`): every regular file in it, as the code snapshot
  chooses them (no hidden folder such as `.venv` or `.git`, no installed packages or caches, no link), except the
  runs folder when it lies inside. Not only the modules the code snapshot records: an env also opens its own data
  files, and an MCP server's or OpenEnv server's script is never imported;
- each file the config names by an absolute path outside that folder (data.train, data.eval, a file module of
  algorithm.name, ...), except what every node installs of its own: the Python environment (an MCP server's
  `command: /path/to/.venv/bin/python`) and the system's programs;
- model.path when it is a local folder (a Hub download or a checkpoint), read once by the driver; Ray copies an object
  to each node once, whichever of its workers there read it.

The env's files and the named files together are capped at MAX_SHIPPED_BYTES (a refusal names the largest); a model
folder is not capped (Ray's object store spills to disk).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from agentrl.contract.config import RunConfig
from agentrl.contract.processes import pid_alive
from agentrl.environment.code_snapshot import env_folder, is_env_part

MAX_SHIPPED_BYTES = 256 * 2**20
SHIPPED_PREFIX = "agentrl-shipped-"
OWNER_FILE = ".owner-pid"  # in each worker's folder: the process that wrote it
ENV_PART, FILES_PART, MODEL_PART = "env", "files", "model"


@dataclass
class ShippedFiles:
    """The files, by their path in the worker's folder, and the driver's paths they replace: (driver path, path in
    the folder), a folder's whole tree or a single file each."""

    files: dict[str, bytes] = field(default_factory=dict)
    executable: set[str] = field(default_factory=set)  # of `files`: run as programs (an MCP server's script)
    moves: list[tuple[str, str]] = field(default_factory=list)
    import_root: str | None = None  # in the worker's folder: put first on sys.path (the env's sibling imports)

    def total(self) -> int:
        return sum(len(data) for data in self.files.values())


def _folder_files(folder: Path, skip: Path | None) -> list[tuple[str, Path]]:
    """(relative posix path, file) of the regular files of `folder` that can be the env's, no link followed."""
    found = []
    for parent, dirs, names in os.walk(folder, followlinks=False):
        here = Path(parent)
        dirs[:] = sorted(d for d in dirs if not (skip is not None and (here / d) == skip))
        for name in sorted(names):
            path = here / name
            relative = PurePosixPath(path.relative_to(folder).as_posix())
            if is_env_part(relative) and not path.is_symlink() and path.is_file():
                found.append((relative.as_posix(), path))
    return found


# What every node has installed of its own, never carried: the Python environment (an MCP server's `command` is often
# this interpreter) and the system's programs.
_INSTALLED = tuple(
    dict.fromkeys(
        os.path.normpath(os.path.abspath(prefix)).rstrip("/") + "/"
        for prefix in (
            sys.prefix,
            sys.base_prefix,
            sys.exec_prefix,
            sys.base_exec_prefix,
            "/usr",
            "/bin",
            "/sbin",
            "/lib",
            "/etc",
        )
    )
)


def _installed(path: str) -> bool:
    return os.path.normpath(path).startswith(_INSTALLED) or any(
        part in ("site-packages", "dist-packages") for part in Path(path).parts
    )


def _with_strings(value: Any, change: Callable[[str], str]) -> Any:
    """A config as JSON with `change` applied to each of its strings, everything else as it was."""
    if isinstance(value, dict):
        return {key: _with_strings(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_strings(item, change) for item in value]
    return change(value) if isinstance(value, str) else value


def _named_files(config: dict[str, Any]) -> list[str]:
    """Every string of the config (as JSON) that is an absolute path to a file on this machine, or MODULE:NAME whose
    module is one; not what is installed (_INSTALLED)."""
    named: list[str] = []

    def note(value: str) -> str:
        for candidate in (value, value.rpartition(":")[0]):
            if candidate.startswith("/") and "\0" not in candidate and not _installed(candidate):
                if Path(candidate).is_file():
                    named.append(candidate)
                    break
        return value

    _with_strings(config, note)
    return list(dict.fromkeys(named))


def _add(shipped: ShippedFiles, place: str, path: Path) -> None:
    shipped.files[place] = path.read_bytes()
    if os.access(path, os.X_OK):
        shipped.executable.add(place)


def pack(config: RunConfig, runs_dir: Path | None = None) -> ShippedFiles:
    """The files a run's workers need (this module's docstring). ValueError when the env's files and the named ones
    are over MAX_SHIPPED_BYTES, naming the largest. `runs_dir` is left out when it lies in the env folder."""
    shipped = ShippedFiles()
    sizes: list[tuple[int, str]] = []
    root = env_folder(config)
    if root is not None:
        for relative, path in _folder_files(root, runs_dir.absolute() if runs_dir else None):
            _add(shipped, f"{ENV_PART}/{relative}", path)
            sizes.append((path.stat().st_size, str(path)))
        shipped.moves.append((str(root), ENV_PART))
        shipped.import_root = ENV_PART
    as_json = config.model_dump(mode="json")
    outside = [
        named for named in _named_files(as_json) if root is None or not PurePosixPath(named).is_relative_to(root)
    ]
    for index, named in enumerate(outside):
        place = f"{FILES_PART}/{index}/{Path(named).name}"  # the index keeps two files of one name apart
        _add(shipped, place, Path(named))
        sizes.append((len(shipped.files[place]), named))
        shipped.moves.append((named, place))
    if shipped.total() > MAX_SHIPPED_BYTES:
        largest = ", ".join(f"{name} ({size / 2**20:.1f} MiB)" for size, name in sorted(sizes, reverse=True)[:5])
        raise ValueError(
            f"a Ray run carries its env folder and the files its config names to every worker: these hold "
            f"{shipped.total() / 2**20:.0f} MiB, over {MAX_SHIPPED_BYTES // 2**20} MiB (largest: {largest}); move "
            "what the env does not read out of its folder"
        )
    model = Path(config.model.path)
    if model.is_absolute() and model.is_dir():
        for relative, path in _folder_files(model, None):
            _add(shipped, f"{MODEL_PART}/{relative}", path)
        shipped.moves.append((str(model), MODEL_PART))
    return shipped


def _relocated(config: dict[str, Any], moves: list[tuple[str, str]]) -> dict[str, Any]:
    """The config (as JSON) with every string that is a moved path, lies in a moved folder, or is MODULE:NAME with
    such a module, pointing at the move's place."""

    def moved(value: str) -> str:
        for candidate, suffix in ((value, ""), (value.rpartition(":")[0], ":" + value.rpartition(":")[2])):
            for old, new in moves:
                if candidate and PurePosixPath(candidate).is_relative_to(old):
                    return new + candidate[len(old.rstrip("/")) :] + suffix
        return value

    return _with_strings(config, moved)


class Unpacked:
    """The shipped files written into a private folder of this worker's (removed by `close`), and the config that
    reads them there."""

    def __init__(self, config: dict[str, Any], shipped: ShippedFiles | None) -> None:
        self.folder: Path | None = None
        self.config = config
        if shipped is None or not shipped.files and not shipped.moves:
            return
        _remove_abandoned(Path(tempfile.gettempdir()))
        self.folder = Path(tempfile.mkdtemp(prefix=SHIPPED_PREFIX))  # 0700: this user's alone
        (self.folder / OWNER_FILE).write_text(str(os.getpid()))
        for relative, data in shipped.files.items():
            target = self.folder / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            if relative in shipped.executable:
                target.chmod(0o700)
        moves = [(old, str(self.folder / new)) for old, new in shipped.moves]
        self.config = _relocated(config, moves)
        if shipped.import_root is not None and str(self.folder / shipped.import_root) not in sys.path:
            sys.path.insert(0, str(self.folder / shipped.import_root))

    def close(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def _remove_abandoned(parent: Path) -> None:
    """The folders of this node's workers that are gone: a worker Ray kills (at a run's end, or a lost one) never runs
    `close`, and each left its folder behind."""
    for folder in parent.glob(f"{SHIPPED_PREFIX}*"):
        try:
            owner = int((folder / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # no owner named: being made, or not a worker's
        if not pid_alive(owner):
            shutil.rmtree(folder, ignore_errors=True)

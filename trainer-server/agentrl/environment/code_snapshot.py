"""The code a run trained with: the files of the env's folder that the env (or the agent) imported, copied into the run
folder with their sha256, and the versions of what ran them (`code.json` and `code/`: protocol/README.md, "The run
folder"; each field in run-folder.schema.json's `codeManifest`).

The env folder is the folder of the file `env.module` names (its siblings are imported from there), else of
`agent.module`'s file; for a dotted module, the folder its top-level package lies in, with only that package's files
as the env's. The snapshot holds the files a config names (the env's module, the agent's, its reward's), every module
the run has imported from that folder by the time the env is loaded (`sys.modules`), and the run's data files when
they lie there. Files behind a link that leaves the folder, in hidden folders (`.venv`, `.git`) or `site-packages`,
and agentrl's own modules are not the env's. Each file is capped at MAX_FILE_BYTES and the whole at MAX_TOTAL_BYTES
(code first, then data); what is left out is listed with its size and why.

A resumed run keeps the first snapshot and records the resume's own hashes and versions under `resumes`, with the
files that changed. `tool/rerun` can run a recorded call against the snapshot instead of today's code
(`use_snapshot`); the server reads a snapshot's files through `read_snapshot_file`, which serves only the files
the manifest lists, from inside the snapshot folder, through files_inside (no link followed, capped).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import platform
import shutil
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from agentrl.contract.env_sources import env_module_is_file
from agentrl.contract.files_inside import RefusedFile, is_plain_folder, parse_json, read_inside, replace_file
from agentrl.contract.schemas import validator_for

if TYPE_CHECKING:
    from agentrl.contract.config import RunConfig

CODE_MANIFEST_FILE = "code.json"
CODE_DIR = "code"
# A file over this is no env code worth a copy (a corpus, a model); over the total, the run folder would be paying
# for data more than for code. Both are said in the manifest (`limits`) and the docs.
MAX_FILE_BYTES = 2**20
MAX_TOTAL_BYTES = 10 * 2**20
MAX_MANIFEST_BYTES = 16 * 2**20  # code.json: a line per file of a snapshot, and again per resume
# Whose versions a snapshot records; None for one not installed (vLLM on most CPU machines).
VERSIONED_PACKAGES = ("agentrl", "torch", "transformers", "vllm")
# Path parts under which a file is never the env's own: installed packages, virtual environments, caches, VCS folders.
_NOT_ENV_PARTS = {"site-packages", "dist-packages", "__pycache__"}


def package_versions() -> dict[str, str | None]:
    """python and VERSIONED_PACKAGES' installed versions, read from their metadata (nothing is imported)."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _named_modules(config: RunConfig) -> list[tuple[str, str]]:
    """(config key, module) of each module a config names: env.module, or agent.module and agent.reward's module."""
    if config.env is not None:
        named = config.env.user_module()
        return [named] if named is not None else []
    assert config.agent is not None
    return [("agent.module", config.agent.module), ("agent.reward", config.agent.reward.rsplit(":", 1)[0])]


def _module_place(module: str) -> tuple[Path, Path, Path | None] | None:
    """(import root, scope, named file) of a config's module: a file's folder is both its import root and its scope;
    a dotted module's top-level package is found on sys.path, its parent folder the import root and the package's
    folder (or its single file) the scope. None for agentrl's own modules and for a module not found."""
    if env_module_is_file(module):
        path = Path(module).absolute()
        return path.parent, path.parent, path
    top = module.split(".")[0]
    if top == "agentrl":
        return None  # its version is recorded
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is not None and spec.submodule_search_locations:
        package = Path(next(iter(spec.submodule_search_locations))).absolute()
        return package.parent, package, None
    if spec is not None and spec.origin and Path(spec.origin).is_file():  # not "built-in" or "frozen"
        origin = Path(spec.origin).absolute()
        return origin.parent, origin, None
    return None


def is_env_part(relative: PurePosixPath | Path) -> bool:
    """Whether a path relative to the env folder can be the env's: none of its folders hidden (`.venv`, `.git`) or
    an installed-package or cache folder."""
    return not any(part.startswith(".") or part in _NOT_ENV_PARTS for part in relative.parts[:-1])


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


class _Collector:
    """The files of one env folder (`root`, only those under `scopes`), in the order they are offered, each once."""

    def __init__(self, root: Path, scopes: list[Path]) -> None:
        self.root, self.scopes = root, scopes
        self.real_root = root.resolve()
        self.chosen: dict[str, Path] = {}  # path relative to the root -> the file to read
        self.left_out: dict[str, dict[str, Any]] = {}

    def offer(self, path: Path) -> None:
        path = path.absolute()
        if not any(_inside(path, scope) for scope in self.scopes):
            return
        relative = path.relative_to(self.root)
        key = relative.as_posix()
        if key in self.chosen or key in self.left_out:
            return
        if not is_env_part(relative):
            return
        real = path.resolve()
        if not real.is_relative_to(self.real_root):  # a link out of the folder: never followed
            self.left_out[key] = {"path": key, "size": None, "reason": "a link out of the env folder"}
        elif real.is_file():
            self.chosen[key] = real

    def offer_outside(self, key: str, path: Path) -> None:
        """A module the config names in another folder than the env's: said, not copied."""
        self.left_out.setdefault(str(path), {"path": str(path), "size": None, "reason": f"{key} outside {self.root}"})


def _found_places(config: RunConfig) -> list[tuple[str, tuple[Path, Path, Path | None]]]:
    places = [(key, _module_place(module)) for key, module in _named_modules(config)]
    return [(key, place) for key, place in places if place is not None]


def env_folder(config: RunConfig) -> Path | None:
    """The env folder (this module's docstring): the import root of the first module the config names; None when it
    names none of its own (agentrl's examples, recipes, an OpenEnv server)."""
    found = _found_places(config)
    return found[0][1][0] if found else None


def _collect(config: RunConfig) -> _Collector | None:
    """The files of the config's env folder that make its code (this module's docstring); None when the config names
    no module of its own (agentrl's examples, recipes)."""
    found = _found_places(config)
    if not found:
        return None
    root = found[0][1][0]
    collector = _Collector(root, [scope for _, (place_root, scope, _) in found if place_root == root])
    for key, (place_root, _, named) in found:
        if named is None:
            continue
        if place_root == root:
            collector.offer(named)
        else:
            collector.offer_outside(key, named)
    imported = []
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        # agentrl is recorded by its version; __main__ (and multiprocessing's __mp_main__) is the program, not the env.
        if file and name != "agentrl" and not name.startswith(("agentrl.", "__")):
            imported.append(Path(file))
    for path in sorted(imported):
        collector.offer(path)
    for data in (config.data.train, config.data.eval):
        if data:
            collector.offer(Path(data))
    return collector


def _state(collector: _Collector | None, copy_to: Path | None) -> dict[str, Any]:
    """What ran: the env folder's files within the caps (copied under `copy_to` when given), what was left out, the
    versions and the platform (rpc.schema.json#/$defs/codeState)."""
    files, left_out, total = [], list((collector.left_out if collector else {}).values()), 0
    for key, real in (collector.chosen if collector else {}).items():
        size: int | None = None
        try:
            size = real.stat().st_size
            if size > MAX_FILE_BYTES:
                reason = f"over {MAX_FILE_BYTES:,} bytes, the cap per file"
            elif total + size > MAX_TOTAL_BYTES:
                reason = f"past {MAX_TOTAL_BYTES:,} bytes, the cap of the whole snapshot"
            else:
                reason, data = None, real.read_bytes()
        except OSError as err:
            reason = f"unreadable ({type(err).__name__})"
        if reason is not None:
            left_out.append({"path": key, "size": size, "reason": reason})
            continue
        total += len(data)
        files.append({"path": key, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)})
        if copy_to is not None:
            target = copy_to / key
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return {
        "recorded_at": datetime.now(UTC).isoformat(),
        "root": str(collector.root) if collector else None,
        "files": files,
        "left_out": left_out,
        "versions": package_versions(),
        "platform": platform.platform(),
    }


def _write_json(path: Path, value: dict[str, Any]) -> None:
    replace_file(path.parent, path.name, json.dumps(value, indent=2).encode())  # the old manifest or the new one


def record_code(run_dir: Path, config: RunConfig, step: int = 0) -> list[str]:
    """Records the code this process runs `config` with in `run_dir` (call it once the env or agent is loaded). The
    first call copies the snapshot (`code/`, then `code.json`); a later one (a resume, from `step`) records its own
    hashes and versions under the manifest's `resumes`. Returns the files that differ from the first snapshot (added,
    removed or changed; empty at the first call)."""
    run_dir = Path(run_dir)
    manifest_path = run_dir / CODE_MANIFEST_FILE
    collector = _collect(config)
    manifest = read_code_manifest(run_dir)
    if manifest is None:
        tmp = run_dir / f".tmp-{CODE_DIR}-{uuid.uuid4().hex[:6]}"
        tmp.mkdir()
        try:
            state = _state(collector, tmp)
            shutil.rmtree(run_dir / CODE_DIR, ignore_errors=True)  # one a crash left without its manifest
            tmp.rename(run_dir / CODE_DIR)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        limits = {"file_bytes": MAX_FILE_BYTES, "total_bytes": MAX_TOTAL_BYTES}
        _write_json(manifest_path, {"code": state, "limits": limits, "resumes": []})
        return []
    state = _state(collector, None)
    first = {f["path"]: f["sha256"] for f in manifest["code"]["files"]}
    now = {f["path"]: f["sha256"] for f in state["files"]}
    changed = sorted(path for path in first.keys() | now.keys() if first.get(path) != now.get(path))
    manifest["resumes"].append({"step": step, "changed": changed, "code": state})
    _write_json(manifest_path, manifest)
    return changed


def read_code_manifest(run_dir: Path) -> dict[str, Any] | None:
    """The run's code.json, or None when the run recorded none (it started before runs recorded their code, or has
    not loaded its env yet). ValueError when the file is there but is not the manifest rpc.schema.json describes."""
    try:
        text = read_inside(run_dir, CODE_MANIFEST_FILE, MAX_MANIFEST_BYTES).decode("utf-8")
    except FileNotFoundError:
        return None
    except RefusedFile as err:
        raise ValueError(str(err)) from None
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{CODE_MANIFEST_FILE} is unreadable ({type(err).__name__})") from None
    try:
        manifest = parse_json(text)
    except ValueError:
        raise ValueError(f"{CODE_MANIFEST_FILE} is not JSON") from None
    problem = next(validator_for("rpc.schema.json", "codeManifest").iter_errors(manifest), None)
    if problem is not None:
        where = "/".join(map(str, problem.absolute_path)) or "the top level"
        raise ValueError(f"{CODE_MANIFEST_FILE} is damaged at {where}: {problem.message[:200]}")
    return manifest


def read_snapshot_file(run_dir: Path, manifest: dict[str, Any], path: str) -> bytes:
    """The bytes of `path` in the run's snapshot. ValueError unless `path` is a relative path of plain names that the
    manifest lists; RefusedFile (an OSError) for a file reached through a link (a `code/` folder planted as a link
    to /etc, a link in it), one that is not regular, or one over MAX_FILE_BYTES, the cap it was recorded under."""
    parts = PurePosixPath(path).parts
    if not path or "\\" in path or "\0" in path or path.startswith("/") or any(p in ("..", ".") for p in parts):
        raise ValueError(f"{path!r} is not a relative path inside the snapshot (plain names joined by '/')")
    if PurePosixPath(*parts).as_posix() != path or path not in {f.get("path") for f in manifest["code"]["files"]}:
        raise ValueError(f"the run's code snapshot has no file {path!r}")
    return read_inside(run_dir, f"{CODE_DIR}/{path}", MAX_FILE_BYTES)


def use_snapshot(config: RunConfig, run_dir: Path) -> RunConfig:
    """Makes this process run the run's recorded code: `config` with each path in the env folder that the run's snapshot holds (env.module, agent.module,
    agent.reward's module, data.train, data.eval) pointing at the snapshot's copy, and the snapshot folder first on
    sys.path (a dotted module, and the env's sibling imports, are found there). ValueError when the run recorded no
    code, or its snapshot lacks a module the config names."""
    manifest = read_code_manifest(run_dir)
    if manifest is None or manifest["code"].get("root") is None:
        raise ValueError(
            "this run recorded no code snapshot (it started before runs recorded their code, or runs agentrl's own "
            "env); re-run it with the current code"
        )
    root, folder = Path(manifest["code"]["root"]), (Path(run_dir) / CODE_DIR).absolute()
    if not is_plain_folder(folder):  # its modules are imported from there: never through a link planted in its place
        raise ValueError(f"the run's code snapshot {folder} is missing, or a link, which is never followed")
    held = {f["path"] for f in manifest["code"]["files"]}

    def moved(key: str, value: str, must_hold: bool) -> str:
        path = Path(value)
        if not (path.is_absolute() and _inside(path, root)):
            return value
        relative = path.relative_to(root).as_posix()
        if relative in held:
            return str(folder / relative)
        if must_hold:
            raise ValueError(f"{key}: the run's code snapshot has no {relative} (see its code.json's left_out)")
        return value

    changed = config.model_copy(deep=True)
    if changed.env is not None:
        if changed.env.module is not None and env_module_is_file(changed.env.module):
            changed.env.module = moved("env.module", changed.env.module, True)
        for section in (changed.env.gym, changed.env.methods):
            module, name = section.factory.rsplit(":", 1) if section is not None else ("", "")
            if section is not None and env_module_is_file(module):
                section.factory = f"{moved(f'env.{changed.env.source}.factory', module, True)}:{name}"
    if changed.agent is not None:
        if env_module_is_file(changed.agent.module):
            changed.agent.module = moved("agent.module", changed.agent.module, True)
        module, function = changed.agent.reward.rsplit(":", 1)
        if env_module_is_file(module):
            changed.agent.reward = f"{moved('agent.reward', module, True)}:{function}"
    changed.data.train = moved("data.train", changed.data.train, False)
    if changed.data.eval:
        changed.data.eval = moved("data.eval", changed.data.eval, False)
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    return changed

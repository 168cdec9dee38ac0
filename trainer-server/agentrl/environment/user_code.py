"""The user's code as a run config names it: a Python file (relative to the config's folder) or a dotted module,
and `MODULE:NAME` for one object in it (env.gym.factory, env.methods.factory, agent.reward). Every failure is an
`EnvLoadError` whose message names the config key and what to fix."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from agentrl.contract.env_sources import env_module_is_file

USER_MODULE_PREFIX = "agentrl_user_env_"  # the names `_import_file` gives modules loaded from a file path


class EnvLoadError(ValueError):
    """The env named by a config cannot be loaded; the message says what to fix."""


def _import_file(path: Path, key: str) -> object:
    if not path.is_file():
        raise EnvLoadError(f"{key}: file not found: {path}")
    if path.suffix != ".py":  # importlib finds no loader for it, and would say nothing
        raise EnvLoadError(f"{key}: {path} is not a Python source file (its name must end in .py)")
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # sibling imports (tools.py, reward.py) resolve as in the user's tests
    name = f"{USER_MODULE_PREFIX}{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        sys.modules.pop(name, None)
        raise EnvLoadError(f"{key}: importing {path} raised {type(err).__name__}: {err}") from err
    return module


def load_module(module: str, key: str, base_dir: Path | None = None) -> object:
    """A Python file (relative to `base_dir`) or a dotted module name, as a config's `key` names it."""
    if env_module_is_file(module):
        path = Path(module)
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
        return _import_file(path, key)
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise EnvLoadError(f"{key}: cannot import {module!r}: {err}") from err


def load_named(named: str, key: str, base_dir: Path | None = None) -> Any:
    """The object `MODULE:NAME` names (NAME may be dotted: `module:Class.make`), as a config's `key` gives it."""
    module, _, name = named.rpartition(":")
    if not module or not name:
        raise EnvLoadError(f"{key}: {named!r} is not MODULE:NAME (e.g. env.py:MyEnv, gymnasium:make)")
    found: Any = load_module(module, key, base_dir)
    for part in name.split("."):
        if not hasattr(found, part):
            raise EnvLoadError(f"{key}: {module} defines no {name!r}")
        found = getattr(found, part)
    if not callable(found):
        raise EnvLoadError(f"{key}: {name} in {module} is not a class or function")
    return found

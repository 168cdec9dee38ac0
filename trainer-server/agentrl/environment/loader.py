"""Finding the user's ToolEnv class from a run config's `env.module` and `env.class_name`, and building
its instances the same way in training, evaluation and `agentrl env check`."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentrl.contract.config import RunConfig
from agentrl.contract.env_sources import McpServerConfig
from agentrl.environment.adapters.gym import GymTextEnv
from agentrl.environment.adapters.methods import MethodsEnv
from agentrl.environment.adapters.openenv import OpenEnvEnv, stop_servers
from agentrl.environment.env import ToolEnv
from agentrl.environment.mcp import McpServers
from agentrl.environment.user_code import USER_MODULE_PREFIX, EnvLoadError, load_module

DATA_FILES_PARAMETER = "data_files"  # an env's __init__ parameter that asks for the run's data files


def data_files_in_use(config: RunConfig, *more: str) -> list[str]:
    """Every data file a run reads (data.train, data.eval) plus `more` (eval's --data), each once, as absolute
    paths: what an env that asks for `data_files` receives (see `env_factory` below)."""
    paths = [config.data.train, config.data.eval, *more]
    return list(dict.fromkeys(str(Path(path).resolve()) for path in paths if path))


def load_env_class(module: str, class_name: str, base_dir: Path | None = None) -> type[ToolEnv]:
    loaded = load_module(module, "env.module", base_dir)
    cls = getattr(loaded, class_name, None)
    if cls is None:
        raise EnvLoadError(f"env.class_name: {module} defines no {class_name!r}")
    if not (isinstance(cls, type) and issubclass(cls, ToolEnv)):
        raise EnvLoadError(f"env.class_name: {class_name} in {module} is not a ToolEnv subclass")
    return cls


class EnvFactory:
    """One new env per call: `env_class(**kwargs)`, offered the tools of the config's MCP servers beside its own
    (`mcp`, started on first use; `close()` stops them). It pickles as where its class comes from (a module name,
    or the file it was loaded from) and its arguments, so a worker process (rollout.tool_isolation: process)
    builds the same envs; the MCP servers stay with this process, which makes their calls (toolprocess.py)."""

    def __init__(self, env_class: type[ToolEnv], kwargs: Mapping[str, Any], mcp: McpServers | None = None) -> None:
        self.env_class, self.kwargs = env_class, dict(kwargs)
        self.mcp = mcp if mcp is not None else McpServers([])

    def __call__(self) -> ToolEnv:
        env = self.env_class(**self.kwargs)
        if self.mcp:
            env.tools = [*env.tools, *self.mcp.tools(tool.name for tool in env.tools)]
        return env

    def close(self) -> None:
        self.mcp.close()
        if self.env_class is OpenEnvEnv:
            stop_servers()

    def __getstate__(self) -> dict[str, Any]:
        module = self.env_class.__module__
        source = inspect.getfile(self.env_class) if module.startswith(USER_MODULE_PREFIX) else module
        return {"source": source, "class_name": self.env_class.__name__, "kwargs": self.kwargs}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.env_class, self.kwargs = load_env_class(state["source"], state["class_name"]), state["kwargs"]
        self.mcp = McpServers([])


def env_factory(
    env_class: type[ToolEnv],
    args: Mapping[str, Any],
    data_files: Sequence[str],
    mcp_servers: Sequence[McpServerConfig] = (),
    mcp_log_dir: str | Path | None = None,
) -> EnvFactory:
    """`env_class(**args)` per call, where args are the config's `env.args`. An env whose `__init__` declares a
    `data_files` parameter also receives every data file the run or evaluation reads (data.train, data.eval,
    eval's --data), e.g. to build a retrieval corpus that covers whatever it is evaluated on. `mcp_servers` is
    the config's `env.mcp_servers`; each stdio server's stderr goes to `mcp_log_dir`/mcp-NAME.log when given."""
    kwargs = dict(args)
    if DATA_FILES_PARAMETER in inspect.signature(env_class).parameters:
        if DATA_FILES_PARAMETER in kwargs:
            raise ValueError(
                f"env.args.{DATA_FILES_PARAMETER}: agentrl passes {env_class.__name__} the run's data "
                f"files itself; remove this key"
            )
        kwargs[DATA_FILES_PARAMETER] = tuple(data_files)
    return EnvFactory(env_class, kwargs, McpServers(mcp_servers, mcp_log_dir))


def env_class_and_args(config: RunConfig) -> tuple[type[ToolEnv], dict[str, Any]]:
    """The ToolEnv class a config's env names and its constructor's arguments: the user's ToolEnv with env.args,
    or the adapter of env.gym, env.methods or env.openenv with that section."""
    if config.env is None:
        raise EnvLoadError("this run config trains an agent (agent:), which has no ToolEnv")
    env = config.env
    if env.module is not None and env.class_name is not None:
        return load_env_class(env.module, env.class_name), dict(env.args)
    if env.methods is not None and config.rollout.tool_isolation == "process":
        raise EnvLoadError(
            "rollout.tool_isolation: process runs Tools in a worker process, but env.methods' tools change the "
            "environment object that the reward reads here: use tool_isolation: thread"
        )
    adapters: dict[str, type[ToolEnv]] = {"gym": GymTextEnv, "methods": MethodsEnv, "openenv": OpenEnvEnv}
    section = getattr(env, env.source)
    return adapters[env.source], {"section": section.model_dump()}


def config_env_factory(
    config: RunConfig,
    *more_data_files: str,
    args: Mapping[str, Any] | None = None,
    mcp_log_dir: str | Path | None = None,
) -> EnvFactory:
    """The envs a run config names, as training, evaluation, `agentrl env check`, a tool re-run and a cluster's
    rollout workers all build them: its ToolEnv class (or adapter) with its arguments (or `args`), the data files
    it reads (plus `more_data_files`), and its MCP servers."""
    env_class, env_args = env_class_and_args(config)
    assert config.env is not None
    return env_factory(
        env_class,
        env_args if args is None else args,
        data_files_in_use(config, *more_data_files),
        config.env.mcp_servers,
        mcp_log_dir,
    )

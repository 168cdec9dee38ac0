"""Check an environment: load it from its run config and play one scripted episode through the episode loop, no
model needed. `agentrl env check PATH` (cli/env.py) and the server's `env/check` request both call `check_env`, so an
editor sees the same diagnostics locally and remotely. PATH is a `*.agentrl.yaml` run config or a folder holding
exactly one."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrl.contract.config import RunConfig
    from agentrl.contract.env_sources import AgentConfig
    from agentrl.environment.loader import EnvFactory

CONFIG_GLOB = "*.agentrl.yaml"


def _diagnostic(severity: str, message: str, file: Path | str | None = None, line: int | None = None) -> dict:
    found: dict[str, Any] = {"severity": severity, "message": message}
    if file is not None:
        found["file"] = str(file)
    if line is not None:
        found["line"] = line
    return found


def _find_config(path: Path) -> Path:
    if path.is_file():
        return path
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such file or folder")
    configs = sorted(path.glob(CONFIG_GLOB))
    if len(configs) != 1:
        found = ", ".join(c.name for c in configs) or "none"
        raise FileNotFoundError(f"{path}: expected exactly one {CONFIG_GLOB} run config, found {found}")
    return configs[0]


def _source_location(obj: Any) -> tuple[str | None, int | None]:
    try:
        return inspect.getsourcefile(type(obj)), inspect.getsourcelines(type(obj))[1]
    except (OSError, TypeError):
        return None, None


def check_env(path: str | Path) -> list[dict[str, Any]]:
    """Diagnostics `{severity: error|warning|info, message, file?, line?}`; no error means usable."""
    from agentrl.contract.config import ConfigError, load_config, resolve_paths
    from agentrl.environment.loader import EnvLoadError, config_env_factory

    # The config is read from inside the checked folder, never through a link out of it: the diagnostics echo its
    # lines (a YAML error's context, a wrong value), and a config linked to /etc/shadow would have echoed that.
    folder = Path(path) if Path(path).is_dir() else Path(path).parent
    try:
        config_path = _find_config(Path(path))
        config = resolve_paths(load_config(config_path, inside=folder), config_path.resolve().parent)
    except (FileNotFoundError, ConfigError) as err:
        return [_diagnostic("error", str(err), path)]
    if config.agent is not None:
        return _check_agent(config.agent, config.data.train, config_path)
    try:
        make_env = config_env_factory(config)
    except (EnvLoadError, ValueError) as err:
        return [_diagnostic("error", str(err), config_path)]
    try:
        return _check_env(config, config_path, make_env)
    finally:
        make_env.close()


def _check_agent(agent_config: AgentConfig, train_data: str, config_path: Path) -> list[dict[str, Any]]:
    """An agent of the user's own (`agent:`) plays only against a model, through the endpoint: no scripted episode.
    What can be checked without one: its function and its reward function load, and the training tasks read."""
    from agentrl.contract.tasks import load_tasks
    from agentrl.environment.agent import load_agent
    from agentrl.environment.loader import EnvLoadError

    try:
        agent = load_agent(agent_config)
    except EnvLoadError as err:
        return [_diagnostic("error", str(err), config_path)]
    try:
        load_tasks(train_data, 1)
    except (OSError, ValueError) as err:
        return [_diagnostic("error", f"data.train: {err}", config_path)]
    return [
        _diagnostic(
            "info",
            f"agent {agent.name} and its reward function load; an agent plays only against a model (Try "
            "Environment), so there is no scripted episode",
            config_path,
        )
    ]


def _check_env(config: RunConfig, config_path: Path, make_env: EnvFactory) -> list[dict[str, Any]]:
    from agentrl.contract.tasks import load_tasks
    from agentrl.environment.mcp import McpTool, McpUnavailableError
    from agentrl.environment.toolprocess import ToolWorker
    from agentrl.rollout.scripted_episode import run_scripted_episode

    try:
        env = make_env()
        tools = env.tool_map()
    except (McpUnavailableError, ValueError) as err:
        return [_diagnostic("error", str(err), config_path)]
    except Exception as err:  # noqa: BLE001 - the user's constructor
        return [
            _diagnostic(
                "error",
                f"building {config.env.describe()} raised {type(err).__name__}: {err}",
                (config.env.user_module() or ("", str(config_path)))[1],
            )
        ]
    found: list[dict[str, Any]] = []
    for server in config.env.mcp_servers:
        listed = [tool.name for tool in tools.values() if isinstance(tool, McpTool) and tool.server == server.name]
        found.append(
            _diagnostic(
                "info", f'MCP server "{server.name}": {len(listed)} tool(s): {", ".join(listed) or "none"}', config_path
            )
        )
    for tool in tools.values():
        if isinstance(tool, McpTool):
            continue  # its server's listing above; it has no source here
        file, line = _source_location(tool)
        if not tool.name:
            found.append(_diagnostic("error", f"{type(tool).__name__} has no name", file, line))
        if not tool.description:
            found.append(
                _diagnostic("warning", f"tool {tool.name!r} has no description: the model sees none", file, line)
            )
    try:
        task = load_tasks(config.data.train, 1)[0]
    except (OSError, ValueError) as err:
        return [*found, _diagnostic("error", f"data.train: {err}", config_path)]
    turns = env.scripted_turns(task) or ["(a scripted answer with no tool call)"]
    # The Tools run in a worker process: one that ends its process is reported as that Tool's failure.
    tool_worker = ToolWorker(make_env)
    try:
        episode = run_scripted_episode(make_env(), task, turns, config.rollout, tool_worker)
    finally:
        tool_worker.close()
    env_file, env_line = _source_location(env)
    if episode.status == "error":
        found.append(_diagnostic("error", f"scripted episode failed: {episode.status_reason}", env_file, env_line))
    for turn in episode.turns:
        for call in turn.tool_calls:
            if call.error:
                tool = tools.get(call.name)
                if isinstance(tool, McpTool):
                    file, line = str(config_path), None
                else:
                    file, line = _source_location(tool) if tool else (env_file, env_line)
                found.append(_diagnostic("warning", f"turn {turn.index}: tool call failed: {call.error}", file, line))
    found.append(
        _diagnostic(
            "info",
            f"scripted episode: {len(episode.turns)} turn(s), status {episode.status}, reward {episode.total_reward:g} "
            f"(outcome {episode.outcome_reward:g}, breakdown {json.dumps(episode.reward_breakdown)})",
            config_path,
        )
    )
    return found

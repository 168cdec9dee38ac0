"""The run config's `env` and `agent` sections: where a run's episodes come from. A ToolEnv (module + class_name), an
environment nobody wrote for agentrl (gym: a reset/step text env; methods: an object whose methods are tools; openenv:
an OpenEnv server), the MCP servers whose tools join it, or an agent the user already has (agent)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from agentrl.contract.config_section import Section


def env_module_is_file(module: str) -> bool:
    """Whether `env.module` names a Python file (resolved against the config's folder) or else a dotted module name."""
    return module.endswith(".py") or "/" in module or "\\" in module


# What `agentrl env mcp-tools` exits with when the MCP server would not start or list its tools (its stderr then says
# why, in words the server passes on as they are); any other failure of the listing is described by how it ended.
MCP_LISTING_FAILED_EXIT = 3


class McpServerConfig(Section):
    """One MCP server whose tools join the ToolEnv's own: a stdio server (`command`, `args`, `env`, `cwd`) or a
    streamable HTTP one (`url`, `headers`)."""

    name: str = Field(
        ...,
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="Names the server in errors and metrics; its tools become server__tool where names collide.",
    )
    command: str | None = Field(None, min_length=1, description="stdio server: the program to start (e.g. 'python').")
    args: list[str] = Field(default_factory=list, description="stdio server: the program's arguments.")
    env: dict[str, str] = Field(
        default_factory=dict, description="stdio server: environment variables on top of PATH, HOME and the like."
    )
    cwd: str | None = Field(
        None, description="stdio server: its working folder, relative to this config (default: the config's folder)."
    )
    url: str | None = Field(
        None,
        pattern=r"^https?://",
        description="Streamable HTTP server: its endpoint (e.g. http://127.0.0.1:8000/mcp).",
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="Streamable HTTP server: headers sent with every request."
    )
    timeout_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="A call unanswered this long is a timeout error; the server is restarted for the next episode.",
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                f"mcp server {self.name!r}: give either command (a stdio server) or url (a streamable HTTP server)"
            )
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError(f"mcp server {self.name!r}: args, env and cwd are for stdio servers (command), not url")
        if self.command is not None and self.headers:
            raise ValueError(f"mcp server {self.name!r}: headers are for streamable HTTP servers (url), not command")
        return self


FACTORY_PATTERN = r"^.+:[A-Za-z_][A-Za-z0-9_.]*$"  # MODULE:NAME, the module a file relative to the config or dotted
ActionForm = Literal["text", "tool"]
_ACTION_DESCRIPTION = (
    "How the model acts. text: its whole reply (trimmed) is the action, as in text games; tool: it calls the tool "
    "`act` whose arguments are the action, and the env's raw answer is recorded as the call's result."
)


class GymEnvConfig(Section):
    """A reset/step text environment nobody wrote for agentrl: Gymnasium's 5-tuple (and the older 4-tuple),
    SkyRL-gym's BaseTextEnv (init/step returning a dict), TextWorld(Express). One instance per episode at a time."""

    factory: str = Field(
        ...,
        pattern=FACTORY_PATTERN,
        description=(
            "MODULE:NAME of the class or function that makes one environment (e.g. 'textworld_express:"
            "TextWorldExpressEnv', 'gymnasium:make', 'env.py:make_env'); the module is a Python file relative to "
            "this config or a dotted module name."
        ),
    )
    args: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments for the factory.")
    setup: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description=(
            "Methods called once on each new instance, by name with their keyword arguments, in order (e.g. "
            "TextWorldExpress's load: {gameName: coin, gameParams: 'numLocations=4'})."
        ),
    )
    reset_args: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Keyword arguments of every reset, beside seed (a task record's `reset_args` add to them and win). The "
            "seed is the task's `seed`, else a number made from its id: a group's episodes start alike."
        ),
    )
    system_prompt: str | None = Field(None, description="The system message every episode starts with.")
    action: ActionForm = Field("text", description=_ACTION_DESCRIPTION)
    valid_actions_key: str | None = Field(
        None,
        description=(
            "The info key that lists the actions valid now (e.g. 'validActions'): kept with each turn of the "
            "trajectory and, with show_valid_actions, shown to the model under the observation."
        ),
    )
    show_valid_actions: Literal["hidden", "list", "numbered"] = Field(
        "list",
        description=(
            "How the model is shown the valid actions (valid_actions_key), under each observation: hidden; list (comma "
            "separated); numbered (one per line, 1-based), where a text reply that is a number names that action."
        ),
    )
    action_prompt: str | None = Field(
        None,
        description=(
            "A line after every observation (and its valid actions) that asks for the next action, e.g. 'Your next "
            "action?': small models answer a question better than they continue a description."
        ),
    )
    observation_key: str | None = Field(
        None, description="For an env whose observation is a dict: the key that holds the text the model reads."
    )
    state_key: str | None = Field(
        None,
        description=("GiGPO's anchor state: the info key whose value names the state (default: the observation text)."),
    )
    score_keys: list[str] = Field(
        default_factory=list,
        description=(
            "Info keys whose last values (numbers or booleans) go into the episode's reward breakdown, e.g. "
            "[tasksuccess]; the first one is also the episode's success."
        ),
    )
    rewards: Literal["step", "episode"] = Field(
        "step",
        description=(
            "step: each step's reward is that turn's process reward; episode: their sum is the outcome reward, "
            "given at the end."
        ),
    )
    step_cost: float = Field(
        0.0,
        ge=0.0,
        le=1000.0,
        allow_inf_nan=False,
        description=(
            "Taken off the reward of each action the env steps on: with a reward only for success, the shorter of "
            "two successes earns more, so a policy learns to find it sooner. The breakdown's env_return is the "
            "env's own sum, without it."
        ),
    )
    reuse: bool = Field(
        True,
        description=(
            "Keep finished instances and reset them for later episodes (never two episodes at once): for envs that "
            "are slow to make (TextWorldExpress starts a JVM). false: a new instance per episode, closed at its end."
        ),
    )


class MethodsEnvConfig(Section):
    """An environment object whose public methods are the tools, as TRL's environment_factory takes them."""

    factory: str = Field(
        ...,
        pattern=FACTORY_PATTERN,
        description="MODULE:NAME of the class (or function) that makes one environment per episode.",
    )
    args: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments for the factory.")
    system_prompt: str | None = Field(None, description="A system message before the task's prompt.")
    reward: str = Field(
        "get_reward",
        description=(
            "The episode's outcome: a method of the environment taking no arguments (e.g. 'get_reward'), or "
            "MODULE:FUNCTION called as function(environment, task, final_text). It returns a number or a dict of "
            "named numbers whose 'reward' key (else their sum) is the reward."
        ),
    )


class OpenEnvConfig(Section):
    """An OpenEnv environment server: one WebSocket session per episode, reset with the episode's seed."""

    url: str | None = Field(
        None, pattern=r"^https?://", description="A running server's base URL (e.g. http://127.0.0.1:8000)."
    )
    command: list[str] | None = Field(
        None,
        min_length=1,
        description=(
            "Or a command that starts one (e.g. [python, -m, uvicorn, my_env.server:app, --port, '{port}']): "
            "{port} becomes a free port; the trainer waits for /health and ends it with the run."
        ),
    )
    cwd: str | None = Field(None, description="The command's working folder, relative to this config.")
    env: dict[str, str] = Field(default_factory=dict, description="The command's extra environment variables.")
    startup_timeout_s: float = Field(60.0, gt=0, le=3600, description="Seconds to wait for the server's /health.")
    step_timeout_s: float = Field(60.0, gt=0, le=3600, description="Seconds a reset or step may take.")
    max_sessions: int = Field(
        8,
        ge=1,
        le=4096,
        description=(
            "Episodes connected at once; more wait for a session, and so do episodes the server turns away as full "
            "(its max_concurrent_envs)."
        ),
    )
    system_prompt: str | None = Field(None, description="The system message every episode starts with.")
    action: ActionForm = Field(
        "tool",
        description=(
            _ACTION_DESCRIPTION
            + " For OpenEnv the tool's parameters are the server's action schema (/schema); text needs an action "
            "with one required string field, which the reply fills."
        ),
    )
    observation_key: str | None = Field(
        None,
        description=(
            "The observation field the model reads; default: the observation's fields other than done, reward and "
            "metadata, as text (one field alone as itself)."
        ),
    )
    score_keys: list[str] = Field(
        default_factory=list,
        description=(
            "Observation fields whose last values (numbers or booleans) go into the reward breakdown (OpenEnv sends "
            "no metadata over its sessions)."
        ),
    )

    @model_validator(mode="after")
    def _one_source(self) -> OpenEnvConfig:
        if (self.url is None) == (self.command is None):
            raise ValueError("env.openenv: give either url (a running server) or command (one the trainer starts)")
        if self.url is not None and (self.cwd or self.env):
            raise ValueError("env.openenv: cwd and env are for a server the trainer starts (command), not url")
        return self


# The sections of `env` that each name where episodes come from; exactly one is given.
ENV_SOURCES = ("class_name", "gym", "methods", "openenv")


class EnvConfig(Section):
    """Where episodes come from: a ToolEnv (module + class_name), or an environment nobody wrote for agentrl:
    a reset/step text env (gym), an object whose methods are tools (methods), or an OpenEnv server (openenv)."""

    module: str | None = Field(
        None,
        description=(
            "Where the ToolEnv lives: a Python file relative to this config (e.g. 'env.py'), "
            "or a dotted module name (e.g. 'agentrl.examples.echo')."
        ),
    )
    class_name: str | None = Field(None, description="The ToolEnv subclass to instantiate from that module.")
    args: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments for the ToolEnv constructor.")
    gym: GymEnvConfig | None = Field(None, description="A reset/step text environment, wrapped with no code.")
    methods: MethodsEnvConfig | None = Field(
        None, description="An environment class whose public methods are the tools (TRL's environment_factory)."
    )
    openenv: OpenEnvConfig | None = Field(None, description="An OpenEnv server's environment.")
    mcp_servers: list[McpServerConfig] = Field(
        default_factory=list,
        description="MCP servers whose tools every episode is offered beside the ToolEnv's own Tools.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> EnvConfig:
        given = [name for name in ENV_SOURCES if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "env: give exactly one of class_name (with module: a ToolEnv), gym, methods or openenv; "
                + (f"this gives {', '.join(given)}" if given else "this gives none")
            )
        if (self.module is None) != (self.class_name is None):
            raise ValueError("env: module and class_name go together (the file or module, and the ToolEnv in it)")
        if self.class_name is None and self.args:
            raise ValueError(f"env.args are the ToolEnv's; give them as env.{given[0]}.args")
        names = [server.name for server in self.mcp_servers]
        if len(set(names)) != len(names):
            raise ValueError(f"env.mcp_servers: each server needs its own name; {names} repeats one")
        return self

    @property
    def source(self) -> str:
        """Which of ENV_SOURCES this env comes from."""
        return next(name for name in ENV_SOURCES if getattr(self, name) is not None)

    def describe(self) -> str:
        """The env in a few words, for messages and model cards."""
        if self.class_name is not None:
            return f"{self.class_name} ({self.module})"
        if self.openenv is not None:
            where = self.openenv.url or " ".join(self.openenv.command or [])
            return f"the OpenEnv server {where}"
        adapter = self.gym or self.methods
        assert adapter is not None
        return f"{adapter.factory} (env.{self.source})"

    def user_module(self) -> tuple[str, str] | None:
        """(config key, module) of the user's code this env runs: env.module, or an adapter's factory module; None
        for an OpenEnv server (its code runs in its own process)."""
        if self.module is not None:
            return "env.module", self.module
        adapter = self.gym or self.methods
        if adapter is not None:
            return f"env.{self.source}.factory", adapter.factory.rsplit(":", 1)[0]
        return None


class AgentConfig(Section):
    """An agent the user already has, trained as it is: the trainer calls `function(task, base_url, api_key)` once
    per episode, where base_url is an OpenAI-compatible endpoint served by the policy (agentrl/rollout/endpoint.py)
    and api_key the episode's key, without which the endpoint answers nothing."""

    module: str = Field(
        ...,
        description=(
            "Where the agent lives: a Python file relative to this config (e.g. 'agent.py'), or a dotted module name."
        ),
    )
    function: str = Field(
        "run",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description=(
            "The function that plays one episode: run(task, base_url, api_key), sync or async; what it returns "
            "goes to the reward function. Point an OpenAI client at them: OpenAI(base_url=base_url, api_key=api_key)."
        ),
    )
    reward: str = Field(
        ...,
        pattern=r"^.+:[A-Za-z_][A-Za-z0-9_]*$",
        description=(
            "The reward function as MODULE:FUNCTION (e.g. 'reward.py:score'; the module as in `module`): "
            "score(task, result) -> float or EpisodeScore, where result is what the agent's function returned."
        ),
    )
    timeout_s: float = Field(
        300.0,
        gt=0,
        le=86400,
        description=(
            "Seconds an episode's agent may run; past it the episode is an error, later requests from it are refused, "
            "and the run goes on."
        ),
    )

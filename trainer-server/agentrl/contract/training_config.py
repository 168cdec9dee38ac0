"""The run config's sections that say how a run trains: its data, how episodes are sampled (rollout), the RL
algorithm and its policy loss (algorithm, with kl and rollout importance sampling), and the train loop (train)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from agentrl.contract.config_section import Section
from agentrl.contract.env_sources import FACTORY_PATTERN

# The names `algorithm.name` and `algorithm.policy_loss` may give, each the name of its file in
# agentrl/learning/algorithms/ and agentrl/learning/policy_losses/ (whose registries load them; a test checks both).
AlgorithmName = Literal["gigpo", "grpo", "ppo", "reinforce_pp", "rft", "rloo", "sft", "step_ppo"]
ALGORITHM_NAMES: tuple[AlgorithmName, ...] = get_args(AlgorithmName)
PolicyLossName = Literal["cispo", "clipped", "gspo", "nll"]
POLICY_LOSS_NAMES: tuple[PolicyLossName, ...] = get_args(PolicyLossName)


def registered_or_users_own(registered: tuple[str, ...], example: str) -> Any:
    """A setting that is one of `registered` or the user's own as MODULE:NAME (a Python file relative to the run config,
    or a dotted module: the registries load it as the environment's code is loaded, agentrl.environment.user_code).
    Its error names both forms in one line; its schema lists the names (the language server completes them) beside
    the pattern."""
    names = f"{', '.join(repr(name) for name in registered[:-1])} or {registered[-1]!r}"

    def check(value: str) -> str:
        if value in registered or re.fullmatch(FACTORY_PATTERN, value):
            return value
        raise PydanticCustomError(
            "registered_or_users_own", f"Input should be {names}, or MODULE:NAME of your own (e.g. {example})"
        )

    schema = {"anyOf": [{"enum": list(registered), "type": "string"}, {"pattern": FACTORY_PATTERN, "type": "string"}]}
    return Annotated[str, AfterValidator(check), WithJsonSchema(schema)]


AlgorithmSetting = registered_or_users_own(ALGORITHM_NAMES, "my_rl.py:MyAlgorithm")
PolicyLossSetting = registered_or_users_own(POLICY_LOSS_NAMES, "my_rl.py:my_loss")


class Bounds(Section):
    min: float | None = Field(None, description="At least this (inclusive).")
    max: float | None = Field(None, description="At most this (inclusive).")


class EpisodeFilter(Section):
    """Which episodes of a run: the filters of Search Episodes (trajectory/search), each given one must hold."""

    text: str | None = Field(None, description="Words the episode's assistant turns or observations hold.")
    text_in: Literal["assistant", "observation"] | None = Field(None, description="Where `text` must be; null: either.")
    tool: str | None = Field(None, description="A tool the episode called.")
    error_kind: str | None = Field(None, description="An error kind one of its tool calls had.")
    status: Literal["finished", "truncated", "error"] | None = Field(None, description="The episode's status.")
    reward: Bounds = Field(default_factory=Bounds, description="The episode's total reward.")
    step: Bounds = Field(default_factory=Bounds, description="The step it was sampled at.")
    turns: Bounds = Field(default_factory=Bounds, description="How many assistant turns it has.")
    health_code: str | None = Field(None, description="A health alert that fired at its step.")


# The kinds of data.sft source, each a path: exactly one a source.
SFT_SOURCE_KINDS = ("run", "demonstrations", "atif", "episodes")


class SftSource(Section):
    """Episodes to learn from, token by token (algorithm.name: sft): a run's recorded episodes, demonstrations, or ATIF
    trajectories."""

    run: str | None = Field(
        None,
        description=(
            "A run folder (relative to this config): its recorded episodes, exactly the tokens the run saw and "
            "sampled, picked by `where`. The run must use this run's model (its tokenizer)."
        ),
    )
    where: EpisodeFilter = Field(default_factory=EpisodeFilter, description="Which of the run's episodes (`run` only).")
    demonstrations: str | None = Field(
        None,
        description=(
            "A JSON Lines file (relative to this config) of demonstrations, one a line: {messages, tools?, task_id?, "
            "reward?} in OpenAI's chat format: the messages up to the first assistant one are the prompt, each "
            "assistant message (content and tool_calls) is a turn the model learns to write, tool and user "
            "messages after it are what it was told back. Rendered as the rollout renders an episode: the run's "
            "chat template and rollout.tool_format. tools: OpenAI tool schemas (default: the env's)."
        ),
    )

    atif: str | None = Field(
        None,
        description=(
            "A file of ATIF trajectories (relative to this config; .jsonl, one a line, or .json, one): what `agentrl "
            "export-trajectories --format atif` writes, or another agent tool. One agentrl wrote keeps its token "
            "sequence and is read token-exact (the tokenizer checked, as for `run`); another tool's is rendered as "
            "a demonstration of its prompt, agent steps, tool calls and results (its tools: the trajectory's tool "
            "definitions, else the env's)."
        ),
    )

    episodes: str | None = Field(
        None,
        description=(
            "A training set (relative to this config): a JSON Lines file of recorded episodes picked in the editor "
            "(Add to Training Set, in the replay, Search Episodes or a chart's group view), one a line as "
            "protocol/schemas/training-set.schema.json says: {episode: a trajectory record, from_turn}. Read "
            "token-exact, the tokenizer checked, as for `run`; the turns before from_turn are context, not learned."
        ),
    )

    @model_validator(mode="after")
    def _one_kind(self) -> SftSource:
        given = [kind for kind in SFT_SOURCE_KINDS if getattr(self, kind) is not None]
        if len(given) != 1:
            raise ValueError(
                "give one of run (a run folder's episodes), demonstrations (a JSON Lines file), atif (ATIF "
                "trajectories) or episodes (a training set), not " + (" and ".join(given) if given else "none")
            )
        if self.run is None and self.where != EpisodeFilter():
            raise ValueError("where picks a run's episodes: a demonstrations or ATIF file is read whole")
        return self


class DataConfig(Section):
    train: str = Field(..., description="JSON Lines file of task records, relative to this config.")
    eval: str | None = Field(
        None,
        description="Held-out JSON Lines file: `agentrl eval` reads it, and training scores it every train.eval_every steps.",
    )
    shuffle: bool = Field(True, description="Shuffle the training records each epoch (seeded).")
    limit: int | None = Field(None, ge=1, description="Use only the first N training records.")
    sft: list[SftSource] = Field(
        default_factory=list,
        description=(
            "What algorithm.name: sft (and the warm start of train.sft_steps) learns from, in place of rollouts: each "
            "step takes train.batch_size of these episodes (in a seeded shuffle, epoch after epoch) and trains on "
            "their assistant tokens alone."
        ),
    )


class RolloutConfig(Section):
    engine: Literal["auto", "hf", "vllm"] = Field(
        "auto",
        description=(
            "What generates the rollouts. hf: agentrl's own batched sampling over the transformers model; "
            "vllm: vLLM's async engine (continuous batching, prefix caching; weights pushed after every update); "
            "auto: vllm when it is installed and supports the model, else hf; a Try run (a few episodes, no updates) "
            "samples with hf, which starts in a second where vLLM takes half a minute or more. The run's log says "
            "which ran."
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
    # A finite 1e308 passes a NaN check but overflows its group's mean and spread, so every advantage and then the
    # weights become NaN, and the run would fail as "the gradient norm is nan" without naming the reward.
    max_abs_reward: float = Field(
        1e6,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "The largest reward, either way, that training takes (outcome, breakdown and process rewards, from the "
            "env or the agent's reward function); one beyond it fails the run naming the episode and where it came "
            "from, or its episode is dropped (train.non_finite_rewards: drop). Rewards that large are usually a bug."
        ),
    )
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


class KLConfig(Section):
    coef: float = Field(0.0, ge=0.0, description="Weight of the KL penalty to the frozen reference; 0 disables it.")
    estimator: Literal["k1", "k3"] = Field("k3", description="k1 = log ratio, k3 = unbiased low-variance estimator.")


class RolloutISConfig(Section):
    """Truncated importance sampling for the gap between the rollout engine's and the learner's kernels."""

    enabled: bool = Field(
        False,
        description=(
            "Weight each sampled token's loss by min(pi_learner / pi_rollout, cap): the engine sampled from "
            "slightly different numbers than the learner computes (actor/logprob_gap)."
        ),
    )
    cap: float = Field(2.0, ge=1.0, le=100.0, description="Upper bound of the importance weight.")


class AlgorithmConfig(Section):
    name: AlgorithmSetting = Field(
        "grpo",
        description=(
            "Policy-gradient algorithm (how rewards become advantages), or your own as MODULE:NAME: a subclass of "
            "agentrl.learning.algorithms.base.Algorithm in a Python file relative to this config (my_algo.py:MyAlgo) "
            "or a dotted module. sft: supervised fine-tuning on the episodes data.sft names, no rollouts. rft: "
            "expert iteration online: each step imitates its own rollouts that earned enough "
            "(algorithm.rft_min_reward)."
        ),
    )
    policy_loss: PolicyLossSetting = Field(
        "clipped",
        description=(
            "The loss the advantages weigh: clipped (PPO's per-token clipped ratio), gspo (one ratio per sequence, "
            "clipped; use clip_eps about 3e-4), cispo (a clipped, stop-gradient ratio weighting log pi: no token's "
            "gradient dropped), nll (-A log pi, no ratio: with sft's A = 1 the cross-entropy of the demonstrated "
            "tokens; sft's and rft's default); or your own function as MODULE:NAME (my_loss.py:policy_loss), with the "
            "signature of agentrl.learning.policy_losses.PolicyLoss."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _sft_learns_by_likelihood(cls, data: Any) -> Any:
        """sft's and rft's loss is the imitated tokens' negative log-likelihood unless a policy_loss is given."""
        if isinstance(data, dict) and data.get("name") in ("sft", "rft") and "policy_loss" not in data:
            return {**data, "policy_loss": "nll"}
        return data

    rft_min_reward: float | None = Field(
        None,
        allow_inf_nan=False,
        description=(
            "rft: the episodes imitated are those whose total reward is at least this; null = each group's best "
            "(its highest reward, where some sample of the group earned less)."
        ),
    )
    rft_where: EpisodeFilter | None = Field(
        None,
        description=(
            "rft: imitate only the step's episodes that pass these filters, Search Episodes' own (a tool called, "
            "words in what the model wrote or was told back, status, reward and turn ranges), answered as a search "
            "of the step would answer; each kept episode must also pass rft_min_reward (or be its group's best). "
            "Rounds of sample, filter by a query, fine-tune, one a step; rft/passed_filter: the share that passed. "
            "health_code cannot be asked: a step's alerts come after its update."
        ),
    )

    @model_validator(mode="after")
    def _rft_where_is_rft_s(self) -> AlgorithmConfig:
        if self.rft_where is None:
            return self
        if self.name != "rft":
            given = sorted(self.rft_where.model_fields_set) or [""]
            names = ", ".join(f"algorithm.rft_where{'.' + name if name else ''}" for name in given)
            raise ValueError(
                f"{names}: rft_where picks the episodes rft imitates; set algorithm.name: rft (not {self.name}) or "
                "remove it"
            )
        if self.rft_where.health_code is not None:
            raise ValueError(
                "algorithm.rft_where.health_code: a step's health alerts come after its update; filter by others"
            )
        return self

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

    def clip_eps_range(self) -> tuple[float, float]:
        """(eps_low, eps_high): a ratio is clipped to [1 - eps_low, 1 + eps_high], eps_high being clip_eps_high where
        set (DAPO's clip-higher), else clip_eps. Every clipped policy loss reads it here."""
        return self.clip_eps, self.clip_eps_high if self.clip_eps_high is not None else self.clip_eps


def _yaml_off(value: Any) -> Any:
    """YAML 1.1 (PyYAML's) reads a bare `off` as false: `memory_check: off`, as the docs write it, means "off"."""
    return "off" if value is False else value


class TrainConfig(Section):
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
    sft_steps: int = Field(
        0,
        ge=0,
        description=(
            "A warm start: the run's first N steps are sft on the episodes data.sft names (algorithm.name: sft's "
            "update, its own optimizer), the rest algorithm.name's on rollouts, in one run (a reference for "
            "algorithm.kl is the model as the warm start left it)."
        ),
    )
    sft_lr: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        description=(
            "The warm start's learning rate (train.sft_steps); unset: train.lr. Supervised steps on demonstrations "
            "take a larger rate than the RL steps after them, which a large rate drives off the demonstrated "
            "behaviour."
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
    memory_check: Annotated[Literal["refuse", "warn", "off"], BeforeValidator(_yaml_off)] = Field(
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

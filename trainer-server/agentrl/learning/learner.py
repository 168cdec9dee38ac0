"""The learner: one policy update from one step's episodes.

Order of work: recompute the trainer's logprobs (and the reference's, the critic's values) without
gradients; report how far they are from the rollout's; let the algorithm turn rewards into
advantages; then for each update epoch accumulate gradients over micro-batches of the rows that carry
a gradient (`_rows_to_train`) and take one optimizer step. Logits are divided by the rollout
temperature, as in the rollout engine, and projected onto the vocabulary a chunk of positions at a
time (`target_logprobs`).
What the algorithm decides (advantages, a critic, where the KL goes, extra loss terms) is in its
own file under algorithms/; the episodes are only read, and what the update computed per episode
comes back in the `Update`.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from agentrl.contract.config import RunConfig
from agentrl.learning.algorithms import get_algorithm
from agentrl.learning.algorithms.base import Advantages
from agentrl.learning.algorithms.common import aggregate, kl_penalty, masked_mean, step_sums, truncated_is_weights
from agentrl.learning.batch import TrainBatch, collate
from agentrl.learning.cpu_memory import keep_freed_memory
from agentrl.learning.logprobs import check_vocabulary_logits, target_logprobs
from agentrl.learning.microbatches import (
    in_row_order,
    plan_micro_rows,
    read_tokens,
    rows_mask,
    shared_prefix_to_run_once,
)
from agentrl.learning.policy_losses import get_policy_loss
from agentrl.models.loading import text_config
from agentrl.models.precision import uses_bf16_autocast
from agentrl.models.prefix import (
    checkpointing_keeps_cache,
    gradient_checkpointing,
    layers_read_cache,
    shared_prefix_cache,
)
from agentrl.rollout.episode import Episode

# On CPU, up to this many positions a row, scaled-dot-product attention's math backend (matmuls and a softmax) runs
# the forward and backward faster than the fused flash kernel, and beyond it slower (measured on 2 cores, bf16,
# SmolLM2's 9 heads, 8 rows, 30 layers' forward and backward: 0.22 s against 0.41 s at 95 positions, 0.37 against
# 0.54 at 128, 0.69 against 0.51 at 192, 5.6 against 2.1 at 460). The learner picks by each micro-batch's width.
CPU_MATH_ATTENTION_WIDTH = 160

log = logging.getLogger(__name__)


class NonFiniteError(ValueError):
    """A NaN or infinite reward, loss or gradient: the step stops before the optimizer changes a weight."""


def _rows_with_tokens(batch: TrainBatch) -> torch.Tensor:
    """The rows that hold an episode's tokens: an agent's episode that failed before its first request has none, so
    no pass runs it (a row of padding alone has nothing to attend to)."""
    return batch.attention_mask.any(1).nonzero().squeeze(1)


def _row_means(values: torch.Tensor, mask: torch.Tensor) -> list[float]:
    """Each row's mean of `values` over its masked positions (0 for a row with none)."""
    return ((values * mask).sum(1) / mask.sum(1).clamp(min=1.0)).tolist()


def step_advantage_spread(advantages: torch.Tensor, batch: TrainBatch) -> float:
    """Over the episodes with two trained steps or more: the mean of (largest - smallest) of their steps' mean
    advantages. 0 when every token of an episode gets the same advantage (GRPO without process rewards); a
    step-level algorithm spreads credit over the steps."""
    steps = int(batch.token_turns.max()) + 1 if batch.token_turns.numel() else 0
    if steps < 2:
        return 0.0
    sums, counts = step_sums(advantages, batch.train_mask, batch.token_turns, steps)
    means = sums / counts.clamp(min=1.0)
    present = counts > 0
    several = present.sum(1) >= 2
    if not several.any():
        return 0.0
    highest = torch.where(present, means, torch.full_like(means, -torch.inf)).max(1).values
    lowest = torch.where(present, means, torch.full_like(means, torch.inf)).min(1).values
    return float((highest - lowest)[several].mean())


def _hidden_size(model: Any) -> int:
    return int(text_config(model).hidden_size)


@dataclass(frozen=True)
class Update:
    metrics: dict[str, float]
    advantages: list[list[float | None]]  # per episode, per token: A_t on the trained tokens, None elsewhere
    # Per episode, in order: "logprob_gap" (mean |rollout - learner| logprob over its sampled tokens) and, with a
    # reference, "kl_ref" (mean KL over its trained tokens); the health checks name the worst episodes with them.
    per_episode: dict[str, list[float]]
    # Per episode, one entry per token the engine sampled (a rollout logprob), in order: what the learner read of it
    # (None where it read nothing: the rows an update skipped): "trainer_logprob" (pi_old: the learner's logprob
    # for the weights that sampled), "entropy" (of the learner's distribution there, from the update's first pass),
    # and, with a behaviour correction (algorithm.rollout_is), "is_weight" (the truncated importance weight the
    # loss multiplied by). The replay's token view shows them beside the engine's logprob.
    token_figures: list[dict[str, list[float | None]]]


@dataclass
class _Step:
    """What one update's phases hand each other."""

    batch: TrainBatch
    on_policy: bool  # pi_old is the training pass's own logprobs
    scored_first: bool  # the scoring pass runs before the advantages (they read it)
    norm: dict[str, float]  # the whole step's figures every loss term is normalised by
    scored: dict[str, torch.Tensor] = field(default_factory=dict)  # logprobs, values, ref_logprobs of the scoring pass
    old_logprobs: torch.Tensor | None = None  # pi_old; None until a scoring or the first training pass gives it
    entropy: torch.Tensor | None = None  # per token, from the first training pass; None until it ran
    kl: torch.Tensor | None = None  # per-token KL to the reference, when the algorithm has one
    targets: Advantages | None = None
    kl_in_loss: bool = False
    trained_rows: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))
    micro_rows: list[torch.Tensor] = field(default_factory=list)
    computed_norm: dict[str, float] = field(default_factory=dict)
    totals: dict[str, float] = field(default_factory=dict)  # the loss parts summed over micro-batches and epochs
    grad_norm: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    per_episode: dict[str, list[float]] = field(default_factory=dict)


class Learner:
    # Whether `_forward` runs a micro-batch's shared prefix in a call of its own (a sharded learner's processes must
    # call each layer the same number of times, whatever rows they hold).
    runs_shared_prefix_once = True

    def __init__(self, model: Any, tokenizer: Any, config: RunConfig, device: torch.device) -> None:
        self.model = model
        self.config = config
        self.device = device
        self.bf16_autocast = uses_bf16_autocast(config.train.bf16_autocast, device)
        if device.type == "cpu":
            keep_freed_memory()  # the same sizes are freed and allocated again every micro-batch
        check_vocabulary_logits(model, device)
        self.algorithm = get_algorithm(config.algorithm.name)
        self.policy_loss = get_policy_loss(config.algorithm.policy_loss)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.temperature = config.rollout.temperature if config.rollout.temperature > 0 else 1.0
        self.reference = self._make_reference() if config.algorithm.kl.coef > 0 else None
        self._checkpointing_keeps_cache: bool | None = None  # known at the first checkpointed forward
        self._distribute_models()
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        groups: list[dict[str, Any]] = [{"params": trainable, "lr": config.train.lr}]
        self.critic: nn.Module | None = self.algorithm.make_critic(_hidden_size(model))
        if self.critic is not None:
            self.critic.to(device)
            groups.append({"params": list(self.critic.parameters()), "lr": config.train.critic_lr})
        # One fused kernel a parameter instead of a dozen elementwise passes over every weight (CPU and CUDA have it).
        fused = device.type in ("cpu", "cuda")
        self.optimizer = torch.optim.AdamW(groups, weight_decay=config.train.weight_decay, fused=fused)

    def _make_reference(self) -> Any:
        if self.config.model.lora.enabled:
            return None  # the adapter-disabled base model is the reference: no copy
        reference = copy.deepcopy(self.model).eval()
        for p in reference.parameters():
            p.requires_grad_(False)
        return reference

    @contextlib.contextmanager
    def _reference_model(self) -> Any:
        if self.reference is not None:
            yield self.reference
        else:
            with self.model.disable_adapter():
                yield self.model

    def _forward(
        self, model: Any, batch: TrainBatch, *, with_values: bool, with_entropy: bool
    ) -> dict[str, torch.Tensor]:
        """Per-token logprob of each token given its prefix (entry t: token t), its entropy and whether it is the
        most likely token `with_entropy` (the training pass, which reports them; the entropy with a graph when it is
        in the loss), and values.

        Four savings, all exact. The micro-batch runs at its own width, and its rows were bucketed by
        length or by group (`_micro_rows`), so little padding or prompt is computed. The vocabulary
        projection and its softmax run only at each row's own positions that predict a token the loss or the logprob-gap metric
        reads, about one in five positions of a multi-turn episode: the decoder's last hidden states are
        picked there and projected by the model's own output head (`vocabulary_logits`), a chunk of
        positions at a time (`target_logprobs`), and the entropy only where it is asked for. And the prefix
        every row shares (system prompt, worked examples) runs once: its keys and values are repeated
        for every row, and the gradient flows back through the repeat into that one computation."""
        width = int(batch.attention_mask.sum(1).max())
        input_ids = batch.input_ids[:, :width].to(self.device)
        attention = batch.attention_mask[:, :width].to(self.device)
        wanted = read_tokens(batch, width)
        rows, targets = (index.to(self.device) for index in wanted.nonzero(as_tuple=True))
        shared = shared_prefix_to_run_once(batch, width, wanted, with_values) if self.runs_shared_prefix_once else 0
        if shared and not self._prefix_runs_once_under_checkpointing(model):
            shared = 0
        past = shared_prefix_cache(model, input_ids[0, :shared], len(batch), self.device) if shared else None
        positions = torch.arange(shared, width, device=self.device).expand(len(batch), -1)
        with self._attention_kernel(width), layers_read_cache(model):
            hidden = model.get_decoder()(
                input_ids=input_ids[:, shared:],
                attention_mask=attention,
                position_ids=positions,
                past_key_values=past,
                # Under checkpointing transformers turns use_cache off (with a warning); the layers still read `past`.
                use_cache=past is not None and not gradient_checkpointing(model),
            ).last_hidden_state  # [B, width - shared, H]
        picked, entropy, greedy = target_logprobs(
            model,
            hidden[rows, targets - 1 - shared],  # [N, H]: the hidden state that predicts each read token
            input_ids[rows, targets],
            temperature=self.temperature,
            entropy=with_entropy,
            entropy_grad=self.config.algorithm.entropy_coef > 0,  # a graph only when it is in the loss
        )
        shape = (len(batch), batch.input_ids.shape[1])
        result = {"logprobs": torch.zeros(shape, device=self.device).index_put((rows, targets), picked)}
        if entropy is not None and greedy is not None:
            result["entropy"] = torch.zeros(shape, device=self.device).index_put((rows, targets), entropy)
            result["greedy"] = torch.zeros(shape, device=self.device).index_put((rows, targets), greedy)
        if with_values:
            assert self.critic is not None
            result["values"] = nn.functional.pad(self.critic(hidden), (0, shape[1] - width))
        return result

    def _prefix_runs_once_under_checkpointing(self, model: Any) -> bool:
        """Whether the shared prefix can run once for this forward: always, but under gradient checkpointing with a
        transformers whose checkpointed layers drop every cache (`checkpointing_keeps_cache`); then each row runs the
        prefix itself (exact, slower), and the run's log says so once."""
        if not gradient_checkpointing(model):
            return True
        if self._checkpointing_keeps_cache is None:
            self._checkpointing_keeps_cache = checkpointing_keeps_cache(model)
            if not self._checkpointing_keeps_cache:
                import transformers

                log.warning(
                    "model.gradient_checkpointing: this transformers (%s) drops the cache in checkpointed layers, "
                    "so the training pass computes the prompt a group's rows share in every row rather than once",
                    transformers.__version__,
                )
        return self._checkpointing_keeps_cache

    def _rows_to_train(self, zero_advantage: torch.Tensor, kl_in_loss: bool, batch: TrainBatch) -> torch.Tensor:
        """The rows the training passes run (and a scoring pass that runs after the advantages). A row whose
        advantage is 0 on every trained token adds exactly nothing to the gradient when the advantage-weighted
        surrogate is the only loss term (no critic, no KL term in the loss, no entropy bonus): its tokens' loss is
        -0 * ratio, and every loss is normalised by the whole batch's figures, so leaving the row out changes no
        weight. GRPO and RLOO give every episode of a group whose samples all earned the same reward that
        advantage; in the bundled demo that was 13 of its 40 groups."""
        if self.critic is not None or kl_in_loss or self.config.algorithm.entropy_coef > 0:
            return _rows_with_tokens(batch)
        return (~zero_advantage).nonzero().squeeze(1)

    def on_policy(self) -> bool:
        """Whether the weights that sampled are the weights this update starts from, and nothing but the training
        pass needs logprobs: then pi_old is the training pass's own (detached) logprobs."""
        return (
            self.config.train.update_epochs == 1
            and self.critic is None
            and self.config.algorithm.kl.coef == 0
            and self.config.train.async_steps == 0
        )

    def behaviour_correction(self) -> bool:
        """Truncated importance weights for tokens sampled by other numbers than pi_old: another engine's kernels
        (algorithm.rollout_is), or weights one step older (train.async_steps, whose pi_old is then the scoring
        pass's: the decoupled, proximal-policy form of PPO)."""
        return self.config.algorithm.rollout_is.enabled or self.config.train.async_steps > 0

    def _attention_kernel(self, width: int) -> Any:
        """Attention for rows of `width` positions: the math backend on CPU up to `CPU_MATH_ATTENTION_WIDTH`, else
        the model's own choice. The same attention either way; only the kernel, and so the rounding, differs."""
        if self.device.type == "cpu" and width <= CPU_MATH_ATTENTION_WIDTH:
            return sdpa_kernel(SDPBackend.MATH)
        return contextlib.nullcontext()

    def _precision(self, enabled: bool = True) -> Any:
        """bf16 autocast (train.bf16_autocast). Autocast keeps the bf16 copy of each weight it casts until its
        outermost region ends, so one region spans a pass's micro-batches and each weight is cast once a pass, not
        once a micro-batch; inside it, `enabled=False` keeps each backward out of autocast, as autocast asks."""
        if not self.bf16_autocast:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=enabled)

    def _micro_rows(self, batch: TrainBatch) -> list[torch.Tensor]:
        """The rows of each micro-batch this process computes (`plan_micro_rows`)."""
        return plan_micro_rows(batch, self.config.train.micro_batch_size, self.critic is not None)

    def _micro_rows_of(self, batch: TrainBatch, rows: torch.Tensor) -> list[torch.Tensor]:
        """`_micro_rows` of these rows of the batch, as the batch's row numbers."""
        return [rows[planned] for planned in self._micro_rows(batch.select(rows))] if len(rows) else []

    # A data-parallel learner (agentrl/cluster/learner_workers.py) computes some of the micro-batches in each of
    # its processes and overrides the three methods below to add up what they computed; one process has all.
    # Every loss term is normalised by the whole batch's figures (`norm` in `update`), so the sum over the
    # micro-batches of all processes is the single-process loss, whichever process computed which.

    def _sum_rows(self, per_row: torch.Tensor) -> torch.Tensor:
        """A [rows, ...] tensor in which each process filled the rows it computed (zeros elsewhere), complete."""
        return per_row

    def _sum_gradients(self, params: list[torch.Tensor]) -> None:
        """Make each parameter's gradient the sum of every process's, before clipping and the optimizer step."""

    def _sum_totals(self, totals: dict[str, float]) -> dict[str, float]:
        """The loss parts summed over every process's micro-batches."""
        return totals

    # A sharded learner (agentrl/cluster/sharded_learner.py) splits the weights across its processes, which gather
    # each layer's weights from the others for every pass: the three methods below are where it does so.

    def _distribute_models(self) -> None:
        """Place the policy's (and the reference's) parameters before the optimizer takes them: one process keeps
        them whole."""

    def _keep_in_step(self, passes: int, batch: TrainBatch, model: Any, *, training: bool) -> None:
        """Before this process runs `passes` forward passes of `model` (and their backward, `training`): the passes
        that keep it in step with processes that run more. One process has no others."""

    def _clip_gradients(self, params: list[torch.Tensor]) -> float:
        """Clip the gradients to train.max_grad_norm; returns their norm before clipping."""
        return float(torch.nn.utils.clip_grad_norm_(params, self.config.train.max_grad_norm))

    @torch.no_grad()
    def _score_batch(self, batch: TrainBatch, micro_rows: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        was_training = self.model.training
        self.model.eval()
        # Every process returns (and adds up with the others, `_sum_rows`) the same parts, whether its share of
        # `micro_rows` is empty or not.
        parts: dict[str, list[torch.Tensor]] = {"logprobs": []}
        if self.critic is not None:
            parts["values"] = []
        if self.config.algorithm.kl.coef > 0:
            parts["ref_logprobs"] = []
        try:
            with self._precision():
                self._keep_in_step(len(micro_rows), batch, self.model, training=False)
                for rows in micro_rows:
                    out = self._forward(
                        self.model, batch.select(rows), with_values=self.critic is not None, with_entropy=False
                    )
                    parts["logprobs"].append(out["logprobs"])
                    if "values" in parts:
                        parts["values"].append(out["values"])
            if "ref_logprobs" in parts:
                with self._reference_model() as reference, self._precision():
                    self._keep_in_step(len(micro_rows), batch, reference, training=False)
                    for rows in micro_rows:
                        ref_out = self._forward(reference, batch.select(rows), with_values=False, with_entropy=False)
                        parts["ref_logprobs"].append(ref_out["logprobs"])
        finally:
            self.model.train(was_training)
        return {
            name: self._sum_rows(in_row_order(chunks, micro_rows, tuple(batch.input_ids.shape)))
            for name, chunks in parts.items()
        }

    def update(self, episodes: list[Episode]) -> Update:
        """One policy update from one step's episodes, in named phases."""
        started = time.perf_counter()
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        step = self._plan(episodes)
        self._score_what_advantages_read(step)
        self._advantages(step)
        self._score_old_policy(step)
        for _ in range(self.config.train.update_epochs):
            self._train_epoch(step)
        return self._report(step, episodes, started)

    def _plan(self, episodes: list[Episode]) -> _Step:
        """Phase 1, the plan: the batch, and which scoring passes this update runs. On-policy (one pass, one optimizer
        step, nothing else read before the update): the weights that sampled are the weights of the training pass,
        so pi_old is that pass's own detached logprobs and a separate scoring pass would compute the same numbers a
        second time. Otherwise the scoring pass runs before the advantages only when they read it (a critic's values,
        the KL to the reference); else it computes pi_old after them, of the rows the update trains alone."""
        cfg = self.config.algorithm
        batch = collate(episodes, pad_id=self.pad_id, train_on_tool_tokens=cfg.train_on_tool_tokens)
        on_policy = self.on_policy()
        return _Step(
            batch=batch,
            on_policy=on_policy,
            scored_first=not on_policy and (self.critic is not None or cfg.kl.coef > 0),
            norm={
                "tokens": float(batch.train_mask.sum().clamp(min=1.0)),
                "sequences": float(len(batch)),
                "max_tokens": float(self.config.rollout.max_turns * self.config.rollout.max_new_tokens),
            },
        )

    def _score_what_advantages_read(self, step: _Step) -> None:
        """Phase 2, scoring before the advantages (with a critic or a KL to the reference): pi_old, the critic's
        values V_t and the reference's logprobs for every row; the KL to the reference from them."""
        if not step.scored_first:
            return
        step.scored = self._score_batch(step.batch, self._micro_rows_of(step.batch, _rows_with_tokens(step.batch)))
        step.old_logprobs = step.scored["logprobs"]
        if "ref_logprobs" in step.scored:
            mask = step.batch.train_mask
            step.kl = kl_penalty(step.old_logprobs, step.scored["ref_logprobs"], self.config.algorithm.kl.estimator)
            step.metrics["actor/kl_ref"] = float(masked_mean(step.kl, mask))
            step.per_episode["kl_ref"] = _row_means(step.kl, mask)

    def _advantages(self, step: _Step) -> None:
        """Phase 3, the advantages (the algorithm's file says how), and the rows that carry a gradient, planned into
        micro-batches."""
        cfg = self.config.algorithm
        step.targets = self.algorithm.compute_advantages(step.batch, cfg, values=step.scored.get("values"), kl=step.kl)
        advantages, mask = step.targets.advantages, step.batch.train_mask
        step.kl_in_loss = step.kl is not None and not self.algorithm.kl_in_reward
        zero_advantage = (advantages * mask == 0).all(1)
        step.metrics["adv/zero_frac"] = float(zero_advantage.float().mean())
        step.trained_rows = self._rows_to_train(zero_advantage, step.kl_in_loss, step.batch)
        step.micro_rows = self._micro_rows_of(step.batch, step.trained_rows)
        # The diagnostics (entropy, clip fraction, importance weights) are means over the tokens the passes computed.
        step.computed_norm = {**step.norm, "tokens": float(mask[step.trained_rows].sum().clamp(min=1.0))}

    def _score_old_policy(self, step: _Step) -> None:
        """Phase 4, scoring after the advantages (off-policy, when nothing before them needed it): pi_old of the rows
        the update trains."""
        if not step.on_policy and not step.scored_first and len(step.trained_rows):
            step.old_logprobs = self._score_batch(step.batch, step.micro_rows)["logprobs"]

    def _train_epoch(self, step: _Step) -> None:
        """Phase 5, one update epoch: gradients accumulated over the micro-batches, summed over the data-parallel
        processes, clipped, checked for non-finite values, and one optimizer step."""
        self.optimizer.zero_grad(set_to_none=True)
        from_training_pass: list[torch.Tensor] = []
        entropies: list[torch.Tensor] = []
        with self._precision():  # one region a pass: each weight cast to bf16 once
            self._keep_in_step(len(step.micro_rows), step.batch, self.model, training=True)
            for rows in step.micro_rows:
                loss, parts, out = self._micro_batch_loss(step, rows, from_training_pass)
                with self._precision(enabled=False):
                    loss.backward()
                if step.old_logprobs is None:
                    from_training_pass.append(out["logprobs"].detach())
                if step.entropy is None:
                    entropies.append(out["entropy"].detach().float())
                for name, value in parts.items():
                    step.totals[name] = step.totals.get(name, 0.0) + float(value.detach())
        shape = tuple(step.batch.train_mask.shape)
        if step.old_logprobs is None:
            step.old_logprobs = self._sum_rows(in_row_order(from_training_pass, step.micro_rows, shape))
        if step.entropy is None:
            step.entropy = self._sum_rows(in_row_order(entropies, step.micro_rows, shape))
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        if not step.micro_rows:  # no row carried a gradient: the zeros running them would have summed to, for AdamW
            for p in params:  # (a sharded learner's passes that kept it in step left the others' sums)
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
        self._sum_gradients(params)
        step.grad_norm = self._clip_gradients(params)
        if not math.isfinite(step.grad_norm):
            losses = ", ".join(f"{name} {value:.4g}" for name, value in step.totals.items() if name.startswith("loss/"))
            raise NonFiniteError(
                f"the gradient norm is {step.grad_norm} (losses: {losses}); the optimizer step was not "
                "taken, so the weights are those of the last step"
            )
        self.optimizer.step()

    def _micro_batch_loss(
        self, step: _Step, rows: torch.Tensor, from_training_pass: list[torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
        """One micro-batch's loss: the policy loss (corrected by truncated importance weights when another engine or
        older weights sampled) - the entropy bonus (+ the KL term) + the algorithm's extra terms, each aggregated
        with the whole step's norms. Returns (loss, its parts for the metrics, the training pass's logprobs and
        entropy)."""
        cfg = self.config.algorithm
        micro = step.batch.select(rows)
        out = self._forward(self.model, micro, with_values=self.critic is not None, with_entropy=True)
        micro_mask = micro.train_mask.to(self.device)
        old = out["logprobs"].detach() if step.old_logprobs is None else step.old_logprobs[rows].to(self.device)
        advantages = step.targets.advantages[rows].to(self.device)
        per_token, clipped = self.policy_loss(out["logprobs"], old, advantages, micro_mask, cfg)
        parts = {}
        if self.behaviour_correction():
            weights = truncated_is_weights(
                old, micro.rollout_logprobs.to(self.device), micro.sampled_mask.to(self.device), cfg.rollout_is.cap
            )
            per_token = per_token * weights
            parts["actor/rollout_is_weight"] = aggregate(weights, micro_mask, "token-mean", step.computed_norm)
            parts["actor/rollout_is_capped_frac"] = aggregate(
                (weights >= cfg.rollout_is.cap).float(), micro_mask, "token-mean", step.computed_norm
            )
        parts["loss/policy"] = aggregate(per_token, micro_mask, cfg.loss_agg, step.norm)
        parts["actor/entropy"] = aggregate(out["entropy"], micro_mask, "token-mean", step.computed_norm)
        parts["actor/clip_frac"] = aggregate(clipped, micro_mask, "token-mean", step.computed_norm)
        # The share of trained tokens that are the policy's most likely one: sft's token accuracy.
        parts["actor/token_accuracy"] = aggregate(out["greedy"], micro_mask, "token-mean", step.computed_norm)
        loss = parts["loss/policy"] - cfg.entropy_coef * parts["actor/entropy"]
        if step.kl_in_loss:  # the reference is frozen: its logprobs from the scoring pass still hold
            ref = step.scored["ref_logprobs"][rows].to(self.device)
            parts["loss/kl"] = aggregate(
                kl_penalty(out["logprobs"], ref, cfg.kl.estimator), micro_mask, "token-mean", step.norm
            )
            loss = loss + cfg.kl.coef * parts["loss/kl"]
        old_values = step.scored.get("values")
        returns = step.targets.returns
        extra_losses = self.algorithm.extra_losses(
            cfg,
            values=out.get("values"),
            old_values=None if old_values is None else old_values[rows].to(self.device),
            returns=None if returns is None else returns[rows].to(self.device),
        )
        for name, (weight, per_token_extra) in extra_losses.items():
            parts[name] = aggregate(per_token_extra, micro_mask, "token-mean", step.norm)
            loss = loss + weight * parts[name]
        return loss, parts, out

    def _report(self, step: _Step, episodes: list[Episode], started: float) -> Update:
        """Phase 6, the report: the step's metrics, the rollout-vs-learner logprob gap, and each episode's
        advantages."""
        batch, mask, advantages = step.batch, step.batch.train_mask, step.targets.advantages
        assert step.old_logprobs is not None
        # Rollout vs trainer logprobs for the same weights: should be ~0 (docs/token-pipeline.md, rule 5). Over the rows
        # the learner computed: all of them when scored first, else those the update trained.
        learner_read = (
            torch.ones(len(batch), dtype=torch.bool) if step.scored_first else rows_mask(step.trained_rows, len(batch))
        )
        gap_mask = batch.sampled_mask * learner_read[:, None]
        gap = (batch.rollout_logprobs - step.old_logprobs).abs()
        metrics = step.metrics
        if gap_mask.any():
            metrics["actor/logprob_gap"] = float(masked_mean(gap, gap_mask))
        step.per_episode["logprob_gap"] = _row_means(gap, gap_mask)
        epochs = self.config.train.update_epochs
        metrics.update({name: total / epochs for name, total in self._sum_totals(step.totals).items()})
        trained = advantages[mask.bool()]
        metrics.update(
            {
                "actor/grad_norm": step.grad_norm,
                "adv/mean": float(trained.mean()) if trained.numel() else 0.0,
                "adv/std": float(trained.std(unbiased=False)) if trained.numel() else 0.0,
                "adv/min": float(trained.min()) if trained.numel() else 0.0,
                "adv/max": float(trained.max()) if trained.numel() else 0.0,
                "steps/advantage_spread": step_advantage_spread(advantages, batch),
            }
        )
        elapsed = time.perf_counter() - started
        metrics["perf/train_time_s"] = elapsed
        metrics["perf/train_tokens_per_s"] = float(batch.attention_mask.sum()) * epochs / elapsed if elapsed else 0.0
        if torch.cuda.is_available():
            metrics["perf/peak_memory_mb"] = torch.cuda.max_memory_allocated() / 2**20
        figures = {"trainer_logprob": (step.old_logprobs, gap_mask)}
        if step.entropy is not None:
            figures["entropy"] = (step.entropy, batch.sampled_mask * rows_mask(step.trained_rows, len(batch))[:, None])
        if self.behaviour_correction():
            weights = truncated_is_weights(
                step.old_logprobs, batch.rollout_logprobs, batch.sampled_mask, self.config.algorithm.rollout_is.cap
            )
            figures["is_weight"] = (weights, gap_mask)
        per_token = {name: _at_sampled_tokens(values, read, episodes) for name, (values, read) in figures.items()}
        return Update(
            metrics,
            _per_episode_tokens(advantages, mask.bool(), episodes),
            step.per_episode,
            [{name: values[i] for name, values in per_token.items()} for i in range(len(episodes))],
        )

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"optimizer": self.optimizer.state_dict()}
        if self.critic is not None:
            state["value_head"] = self.critic.state_dict()  # the key checkpoints have always had
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        if self.critic is not None:
            self.critic.load_state_dict(state["value_head"])


def _per_episode_tokens(values: torch.Tensor, read: torch.Tensor, episodes: list[Episode]) -> list[list[float | None]]:
    """Row i's values over episode i's tokens, None where `read` is 0."""
    return [
        [float(v) if taken else None for v, taken in zip(values[row, : len(ep.token_ids)].tolist(), read[row].tolist())]
        for row, ep in enumerate(episodes)
    ]


def _at_sampled_tokens(values: torch.Tensor, read: torch.Tensor, episodes: list[Episode]) -> list[list[float | None]]:
    """Row i's values at episode i's sampled tokens (those with a rollout logprob), in order, None where `read` is 0;
    rounded to 6 decimals. Only those: a value (or a null) for every prompt and tool token as well made a trajectory
    file 28% larger (SmolLM2's chat template puts ~330 prompt tokens before 17 sampled ones in the lookup example)."""
    found = []
    for row, episode in enumerate(episodes):
        sampled = [t for t, logprob in enumerate(episode.rollout_logprobs) if logprob is not None]
        row_values, row_read = values[row, sampled].tolist(), read[row, sampled].bool().tolist()
        found.append([round(v, 6) if taken else None for v, taken in zip(row_values, row_read)])
    return found

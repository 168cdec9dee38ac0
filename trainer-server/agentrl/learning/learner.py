"""The learner: one policy update from one step's episodes.

Order of work: recompute the trainer's logprobs (and the reference's, the critic's values) without
gradients; report how far they are from the rollout's; let the algorithm turn rewards into
advantages; then for each update epoch accumulate gradients over micro-batches of the rows that carry
a gradient (`_rows_to_train`) and take one optimizer step. Each phase hands the next what it produced.
The forward pass is forward.py's (logits divided by the rollout temperature, as in the rollout engine,
and projected onto the vocabulary a chunk of positions at a time); how the work is spread over
processes is the `Distribution` the learner is given (distribution.py: one process here, data-parallel
or sharded workers in agentrl/cluster/), never a subclass.
What the algorithm decides (advantages, a critic, where the KL goes, extra loss terms) is in its
own file under algorithms/; the episodes are only read, and what the update computed per episode
comes back in the `Update`.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from agentrl.contract.config import RunConfig
from agentrl.learning.algorithms import get_algorithm
from agentrl.learning.algorithms.base import Advantages
from agentrl.learning.algorithms.common import aggregate, kl_penalty, masked_mean, truncated_is_weights
from agentrl.learning.batch import TrainBatch, collate
from agentrl.learning.cpu_memory import keep_freed_memory
from agentrl.learning.distribution import Distribution, OneProcess
from agentrl.learning.forward import PolicyForward
from agentrl.learning.logprobs import check_vocabulary_logits
from agentrl.learning.microbatches import in_row_order, rows_mask
from agentrl.learning.policy_losses import get_policy_loss
from agentrl.learning.update import Update, at_sampled_tokens, per_episode_tokens, row_means, step_advantage_spread
from agentrl.models.loading import text_config
from agentrl.models.precision import uses_bf16_autocast
from agentrl.rollout.episode import Episode


class NonFiniteError(ValueError):
    """A NaN or infinite reward, loss or gradient: the step stops before the optimizer changes a weight."""


def _rows_with_tokens(batch: TrainBatch) -> torch.Tensor:
    """The rows that hold an episode's tokens: an agent's episode that failed before its first request has none, so
    no pass runs it (a row of padding alone has nothing to attend to)."""
    return batch.attention_mask.any(1).nonzero().squeeze(1)


def _hidden_size(model: Any) -> int:
    return int(text_config(model).hidden_size)


@dataclass(frozen=True)
class _Plan:
    """Phase 1's: the batch, and which scoring passes the update runs."""

    batch: TrainBatch
    on_policy: bool  # pi_old is the training pass's own logprobs
    scored_first: bool  # the scoring pass runs before the advantages (they read it)
    norm: dict[str, float]  # the whole step's figures every loss term is normalised by


@dataclass(frozen=True)
class _Scored:
    """Phase 2's: what the scoring pass before the advantages read (nothing when it does not run)."""

    passes: dict[str, torch.Tensor] = field(default_factory=dict)  # logprobs (pi_old), values, ref_logprobs
    kl: torch.Tensor | None = None  # per-token KL to the reference, when the algorithm has one
    metrics: dict[str, float] = field(default_factory=dict)
    per_episode: dict[str, list[float]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Targets:
    """Phase 3's: the advantages, and the rows that carry a gradient, planned into micro-batches."""

    targets: Advantages
    kl_in_loss: bool
    trained_rows: torch.Tensor
    micro_rows: list[torch.Tensor]
    computed_norm: dict[str, float]  # the diagnostics' norms: over the tokens the passes computed
    zero_advantage_share: float


@dataclass(frozen=True)
class _Epoch:
    """Phase 5's, one epoch's: its training pass's logprobs and entropy (where asked for), its loss parts summed
    over the micro-batches, and the gradient norm before clipping."""

    logprobs: torch.Tensor | None
    entropy: torch.Tensor | None
    totals: dict[str, float]
    grad_norm: float


class Learner:
    """One process's part of each update: all of it, or a data-parallel or sharded worker's (`distribution`)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        config: RunConfig,
        device: torch.device,
        distribution: Distribution | None = None,
    ) -> None:
        self.model = model
        self.config = config
        self.device = device
        self.distribution: Distribution = distribution or OneProcess()
        self.bf16_autocast = uses_bf16_autocast(config.train.bf16_autocast, device)
        if device.type == "cpu":
            keep_freed_memory()  # the same sizes are freed and allocated again every micro-batch
        check_vocabulary_logits(model, device)
        self.algorithm = get_algorithm(config.algorithm.name)
        self.policy_loss = get_policy_loss(config.algorithm.policy_loss)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.reference = self._make_reference() if config.algorithm.kl.coef > 0 else None
        policy_forward = PolicyForward(
            device,
            temperature=config.rollout.temperature if config.rollout.temperature > 0 else 1.0,
            entropy_grad=config.algorithm.entropy_coef > 0,
            shared_prefix_once=self.distribution.runs_shared_prefix_once,
        )
        models = [m for m in (model, self.reference) if m is not None]
        self.forward = self.distribution.place(models, policy_forward)  # before the optimizer takes the parameters
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        groups: list[dict[str, Any]] = [{"params": trainable, "lr": config.train.lr}]
        self.critic: nn.Module | None = self.algorithm.make_critic(_hidden_size(model))
        if self.critic is not None:
            self.critic.to(device)
            groups.append({"params": list(self.critic.parameters()), "lr": config.train.critic_lr})
            policy_forward.critic = self.critic
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

    def _precision(self, enabled: bool = True) -> Any:
        """bf16 autocast (train.bf16_autocast). Autocast keeps the bf16 copy of each weight it casts until its
        outermost region ends, so one region spans a pass's micro-batches and each weight is cast once a pass, not
        once a micro-batch; inside it, `enabled=False` keeps each backward out of autocast, as autocast asks."""
        if not self.bf16_autocast:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=enabled)

    def _micro_rows(self, batch: TrainBatch) -> list[torch.Tensor]:
        """The rows of each micro-batch this process computes."""
        return self.distribution.micro_rows(batch, self.config.train.micro_batch_size, self.critic is not None)

    def _micro_rows_of(self, batch: TrainBatch, rows: torch.Tensor) -> list[torch.Tensor]:
        """`_micro_rows` of these rows of the batch, as the batch's row numbers."""
        return [rows[planned] for planned in self._micro_rows(batch.select(rows))] if len(rows) else []

    def _keep_in_step(self, passes: int, batch: TrainBatch, model: Any, *, training: bool) -> None:
        """Before this process runs `passes` passes of `model` (and their backward, `training`): the passes on one
        row that add nothing, as many as the distribution's other processes run more."""

        def filler_pass() -> None:
            out = self.forward(model, batch.select(slice(0, 1)), with_values=False, with_entropy=False)
            if training:  # its backward takes part in the others' gradient collectives (it adds zeros)
                with self._precision(enabled=False):
                    (out["logprobs"].sum() * 0).backward()

        self.distribution.keep_in_step(passes, filler_pass)

    @torch.no_grad()
    def _score_batch(self, batch: TrainBatch, micro_rows: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        was_training = self.model.training
        self.model.eval()
        # Every process returns (and adds up with the others, `sum_rows`) the same parts, whether its share of
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
                    out = self.forward(
                        self.model, batch.select(rows), with_values=self.critic is not None, with_entropy=False
                    )
                    parts["logprobs"].append(out["logprobs"])
                    if "values" in parts:
                        parts["values"].append(out["values"])
            if "ref_logprobs" in parts:
                with self._reference_model() as reference, self._precision():
                    self._keep_in_step(len(micro_rows), batch, reference, training=False)
                    for rows in micro_rows:
                        ref_out = self.forward(reference, batch.select(rows), with_values=False, with_entropy=False)
                        parts["ref_logprobs"].append(ref_out["logprobs"])
        finally:
            self.model.train(was_training)
        return {
            name: self.distribution.sum_rows(in_row_order(chunks, micro_rows, tuple(batch.input_ids.shape)))
            for name, chunks in parts.items()
        }

    def update(self, episodes: list[Episode]) -> Update:
        """One policy update from one step's episodes, in named phases, each handing on what it produced."""
        started = time.perf_counter()
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        plan = self._plan(episodes)
        scored = self._score_what_advantages_read(plan)
        targets = self._advantages(plan, scored)
        old_logprobs = scored.passes["logprobs"] if plan.scored_first else self._score_old_policy(plan, targets)
        epochs: list[_Epoch] = []
        for _ in range(self.config.train.update_epochs):
            epochs.append(self._train_epoch(plan, scored, targets, old_logprobs, first=not epochs))
            old_logprobs = epochs[-1].logprobs if old_logprobs is None else old_logprobs  # on-policy: the pass's own
        assert old_logprobs is not None
        return self._report(plan, scored, targets, old_logprobs, epochs, episodes, started)

    def _plan(self, episodes: list[Episode]) -> _Plan:
        """Phase 1, the plan: the batch, and which scoring passes this update runs. On-policy (one pass, one optimizer
        step, nothing else read before the update): the weights that sampled are the weights of the training pass,
        so pi_old is that pass's own detached logprobs and a separate scoring pass would compute the same numbers a
        second time. Otherwise the scoring pass runs before the advantages only when they read it (a critic's values,
        the KL to the reference); else it computes pi_old after them, of the rows the update trains alone."""
        cfg = self.config.algorithm
        batch = collate(episodes, pad_id=self.pad_id, train_on_tool_tokens=cfg.train_on_tool_tokens)
        on_policy = self.on_policy()
        return _Plan(
            batch=batch,
            on_policy=on_policy,
            scored_first=not on_policy and (self.critic is not None or cfg.kl.coef > 0),
            norm={
                "tokens": float(batch.train_mask.sum().clamp(min=1.0)),
                "sequences": float(len(batch)),
                "max_tokens": float(self.config.rollout.max_turns * self.config.rollout.max_new_tokens),
            },
        )

    def _score_what_advantages_read(self, plan: _Plan) -> _Scored:
        """Phase 2, scoring before the advantages (with a critic or a KL to the reference): pi_old, the critic's
        values V_t and the reference's logprobs for every row; the KL to the reference from them."""
        if not plan.scored_first:
            return _Scored()
        passes = self._score_batch(plan.batch, self._micro_rows_of(plan.batch, _rows_with_tokens(plan.batch)))
        if "ref_logprobs" not in passes:
            return _Scored(passes)
        mask = plan.batch.train_mask
        kl = kl_penalty(passes["logprobs"], passes["ref_logprobs"], self.config.algorithm.kl.estimator)
        return _Scored(passes, kl, {"actor/kl_ref": float(masked_mean(kl, mask))}, {"kl_ref": row_means(kl, mask)})

    def _advantages(self, plan: _Plan, scored: _Scored) -> _Targets:
        """Phase 3, the advantages (the algorithm's file says how), and the rows that carry a gradient, planned into
        micro-batches."""
        batch = plan.batch
        targets = self.algorithm.compute_advantages(
            batch, self.config.algorithm, values=scored.passes.get("values"), kl=scored.kl
        )
        kl_in_loss = scored.kl is not None and not self.algorithm.kl_in_reward
        zero_advantage = (targets.advantages * batch.train_mask == 0).all(1)
        trained_rows = self._rows_to_train(zero_advantage, kl_in_loss, batch)
        return _Targets(
            targets=targets,
            kl_in_loss=kl_in_loss,
            trained_rows=trained_rows,
            micro_rows=self._micro_rows_of(batch, trained_rows),
            computed_norm={**plan.norm, "tokens": float(batch.train_mask[trained_rows].sum().clamp(min=1.0))},
            zero_advantage_share=float(zero_advantage.float().mean()),
        )

    def _score_old_policy(self, plan: _Plan, targets: _Targets) -> torch.Tensor | None:
        """Phase 4, scoring after the advantages (off-policy, when nothing before them needed it): pi_old of the rows
        the update trains. None on-policy: the first training pass gives it."""
        if plan.on_policy or not len(targets.trained_rows):
            return None
        return self._score_batch(plan.batch, targets.micro_rows)["logprobs"]

    def _train_epoch(
        self, plan: _Plan, scored: _Scored, targets: _Targets, old_logprobs: torch.Tensor | None, *, first: bool
    ) -> _Epoch:
        """Phase 5, one update epoch: gradients accumulated over the micro-batches, summed over the distribution's
        processes, clipped, checked for non-finite values, and one optimizer step. The first epoch's pass reports
        the entropy, and pi_old when none was given (on-policy)."""
        self.optimizer.zero_grad(set_to_none=True)
        logprobs: list[torch.Tensor] = []
        entropies: list[torch.Tensor] = []
        totals: dict[str, float] = {}
        with self._precision():  # one region a pass: each weight cast to bf16 once
            self._keep_in_step(len(targets.micro_rows), plan.batch, self.model, training=True)
            for rows in targets.micro_rows:
                loss, parts, out = self._micro_batch_loss(plan, scored, targets, old_logprobs, rows)
                with self._precision(enabled=False):
                    loss.backward()
                if old_logprobs is None:
                    logprobs.append(out["logprobs"].detach())
                if first:
                    entropies.append(out["entropy"].detach().float())
                for name, value in parts.items():
                    totals[name] = totals.get(name, 0.0) + float(value.detach())
        shape = tuple(plan.batch.train_mask.shape)
        sum_rows = self.distribution.sum_rows
        own_logprobs = sum_rows(in_row_order(logprobs, targets.micro_rows, shape)) if old_logprobs is None else None
        entropy = sum_rows(in_row_order(entropies, targets.micro_rows, shape)) if first else None
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        if not targets.micro_rows:  # no row carried a gradient: the zeros running them would have summed to, for AdamW
            for p in params:  # (a sharded learner's passes that kept it in step left the others' sums)
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
        self.distribution.sum_gradients(params)
        grad_norm = self.distribution.clip_gradients(params, self.config.train.max_grad_norm)
        if not math.isfinite(grad_norm):
            losses = ", ".join(f"{name} {value:.4g}" for name, value in totals.items() if name.startswith("loss/"))
            raise NonFiniteError(
                f"the gradient norm is {grad_norm} (losses: {losses}); the optimizer step was not "
                "taken, so the weights are those of the last step"
            )
        self.optimizer.step()
        return _Epoch(own_logprobs, entropy, totals, grad_norm)

    def _micro_batch_loss(
        self, plan: _Plan, scored: _Scored, targets: _Targets, old_logprobs: torch.Tensor | None, rows: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """One micro-batch's loss: the policy loss (corrected by truncated importance weights when another engine or
        older weights sampled) - the entropy bonus (+ the KL term) + the algorithm's extra terms, each aggregated
        with the whole step's norms. Returns (loss, its parts for the metrics, the training pass's outputs)."""
        cfg = self.config.algorithm
        micro = plan.batch.select(rows)
        out = self.forward(self.model, micro, with_values=self.critic is not None, with_entropy=True)
        micro_mask = micro.train_mask.to(self.device)
        old = out["logprobs"].detach() if old_logprobs is None else old_logprobs[rows].to(self.device)
        advantages = targets.targets.advantages[rows].to(self.device)
        per_token, clipped = self.policy_loss(out["logprobs"], old, advantages, micro_mask, cfg)
        diagnostics = targets.computed_norm
        parts = {}
        if self.behaviour_correction():
            weights = truncated_is_weights(
                old, micro.rollout_logprobs.to(self.device), micro.sampled_mask.to(self.device), cfg.rollout_is.cap
            )
            per_token = per_token * weights
            parts["actor/rollout_is_weight"] = aggregate(weights, micro_mask, "token-mean", diagnostics)
            parts["actor/rollout_is_capped_frac"] = aggregate(
                (weights >= cfg.rollout_is.cap).float(), micro_mask, "token-mean", diagnostics
            )
        parts["loss/policy"] = aggregate(per_token, micro_mask, cfg.loss_agg, plan.norm)
        parts["actor/entropy"] = aggregate(out["entropy"], micro_mask, "token-mean", diagnostics)
        parts["actor/clip_frac"] = aggregate(clipped, micro_mask, "token-mean", diagnostics)
        # The share of trained tokens that are the policy's most likely one: sft's token accuracy.
        parts["actor/token_accuracy"] = aggregate(out["greedy"], micro_mask, "token-mean", diagnostics)
        loss = parts["loss/policy"] - cfg.entropy_coef * parts["actor/entropy"]
        if targets.kl_in_loss:  # the reference is frozen: its logprobs from the scoring pass still hold
            ref = scored.passes["ref_logprobs"][rows].to(self.device)
            parts["loss/kl"] = aggregate(
                kl_penalty(out["logprobs"], ref, cfg.kl.estimator), micro_mask, "token-mean", plan.norm
            )
            loss = loss + cfg.kl.coef * parts["loss/kl"]
        old_values = scored.passes.get("values")
        returns = targets.targets.returns
        extra_losses = self.algorithm.extra_losses(
            cfg,
            values=out.get("values"),
            old_values=None if old_values is None else old_values[rows].to(self.device),
            returns=None if returns is None else returns[rows].to(self.device),
        )
        for name, (weight, per_token_extra) in extra_losses.items():
            parts[name] = aggregate(per_token_extra, micro_mask, "token-mean", plan.norm)
            loss = loss + weight * parts[name]
        return loss, parts, out

    def _report(
        self,
        plan: _Plan,
        scored: _Scored,
        targets: _Targets,
        old_logprobs: torch.Tensor,
        epochs: list[_Epoch],
        episodes: list[Episode],
        started: float,
    ) -> Update:
        """Phase 6, the report: the step's metrics, the rollout-vs-learner logprob gap, and each episode's
        advantages."""
        batch, mask, advantages = plan.batch, plan.batch.train_mask, targets.targets.advantages
        # Rollout vs trainer logprobs for the same weights: should be ~0 (docs/token-pipeline.md, rule 5). Over the rows
        # the learner computed: all of them when scored first, else those the update trained.
        learner_read = (
            torch.ones(len(batch), dtype=torch.bool)
            if plan.scored_first
            else rows_mask(targets.trained_rows, len(batch))
        )
        gap_mask = batch.sampled_mask * learner_read[:, None]
        gap = (batch.rollout_logprobs - old_logprobs).abs()
        metrics = {**scored.metrics, "adv/zero_frac": targets.zero_advantage_share}
        if gap_mask.any():
            metrics["actor/logprob_gap"] = float(masked_mean(gap, gap_mask))
        per_episode = {**scored.per_episode, "logprob_gap": row_means(gap, gap_mask)}
        totals: dict[str, float] = {}
        for epoch in epochs:
            for name, value in epoch.totals.items():
                totals[name] = totals.get(name, 0.0) + value
        metrics.update({name: total / len(epochs) for name, total in self.distribution.sum_totals(totals).items()})
        trained = advantages[mask.bool()]
        metrics.update(
            {
                "actor/grad_norm": epochs[-1].grad_norm,
                "adv/mean": float(trained.mean()) if trained.numel() else 0.0,
                "adv/std": float(trained.std(unbiased=False)) if trained.numel() else 0.0,
                "adv/min": float(trained.min()) if trained.numel() else 0.0,
                "adv/max": float(trained.max()) if trained.numel() else 0.0,
                "steps/advantage_spread": step_advantage_spread(advantages, batch),
            }
        )
        elapsed = time.perf_counter() - started
        metrics["perf/train_time_s"] = elapsed
        tokens = float(batch.attention_mask.sum()) * len(epochs)
        metrics["perf/train_tokens_per_s"] = tokens / elapsed if elapsed else 0.0
        if torch.cuda.is_available():
            metrics["perf/peak_memory_mb"] = torch.cuda.max_memory_allocated() / 2**20
        figures = {"trainer_logprob": (old_logprobs, gap_mask)}
        entropy = epochs[0].entropy
        if entropy is not None:
            figures["entropy"] = (entropy, batch.sampled_mask * rows_mask(targets.trained_rows, len(batch))[:, None])
        if self.behaviour_correction():
            weights = truncated_is_weights(
                old_logprobs, batch.rollout_logprobs, batch.sampled_mask, self.config.algorithm.rollout_is.cap
            )
            figures["is_weight"] = (weights, gap_mask)
        per_token = {name: at_sampled_tokens(values, read, episodes) for name, (values, read) in figures.items()}
        return Update(
            metrics,
            per_episode_tokens(advantages, mask.bool(), episodes),
            per_episode,
            [{name: values[i] for name, values in per_token.items()} for i in range(len(episodes))],
        )

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"optimizer": self.distribution.whole_optimizer_state(self.optimizer.state_dict())}
        if self.critic is not None:
            state["value_head"] = self.critic.state_dict()  # the key checkpoints have always had
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        self.optimizer.load_state_dict(self.distribution.own_optimizer_state(state["optimizer"], params))
        if self.critic is not None:
            self.critic.load_state_dict(state["value_head"])

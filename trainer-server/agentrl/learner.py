"""The learner: one policy update from one step's episodes.

Order of work: recompute the trainer's logprobs (and the reference's, the critic's values) without
gradients; report how far they are from the rollout's; let the algorithm turn rewards into
advantages; then for each update epoch accumulate gradients over micro-batches and take one
optimizer step. Logits are divided by the rollout temperature, as in the rollout engine.
"""

from __future__ import annotations

import contextlib
import copy
import time
from typing import Any

import torch
from torch import nn

from agentrl.algorithms import get_algorithm
from agentrl.algorithms.common import aggregate, clipped_policy_loss, kl_penalty, masked_mean
from agentrl.algorithms.ppo import value_loss
from agentrl.batch import TrainBatch, collate
from agentrl.config import RunConfig
from agentrl.episode import Episode


def _hidden_size(model: Any) -> int:
    config = model.config
    return int(getattr(config, "hidden_size", None) or config.get_text_config().hidden_size)


class Learner:
    def __init__(self, model: Any, tokenizer: Any, config: RunConfig, device: torch.device) -> None:
        self.model = model
        self.config = config
        self.device = device
        self.algorithm = get_algorithm(config.algorithm.name)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.temperature = config.rollout.temperature if config.rollout.temperature > 0 else 1.0
        trainable = [p for p in model.parameters() if p.requires_grad]
        groups: list[dict[str, Any]] = [{"params": trainable, "lr": config.train.lr}]
        self.value_head: nn.Linear | None = None
        if getattr(self.algorithm, "NEEDS_CRITIC", False):
            self.value_head = nn.Linear(_hidden_size(model), 1).to(device)
            nn.init.zeros_(self.value_head.weight)
            nn.init.zeros_(self.value_head.bias)
            groups.append({"params": list(self.value_head.parameters()), "lr": config.train.critic_lr})
        self.optimizer = torch.optim.AdamW(groups, weight_decay=config.train.weight_decay)
        self.reference = self._make_reference() if config.algorithm.kl.coef > 0 else None

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

    def _forward(self, model: Any, batch: TrainBatch, *, with_values: bool) -> dict[str, torch.Tensor]:
        """Per-token logprob and entropy of each token given its prefix (entry t: token t), and values."""
        out = model(
            input_ids=batch.input_ids.to(self.device),
            attention_mask=batch.attention_mask.to(self.device),
            output_hidden_states=with_values,
            use_cache=False,
        )
        logits = out.logits[:, :-1, :].float() / self.temperature
        logprobs_all = torch.log_softmax(logits, -1)
        targets = batch.input_ids[:, 1:].to(self.device)
        shifted = logprobs_all.gather(-1, targets[..., None]).squeeze(-1)
        # Entropy over the whole vocabulary is costly; it needs a graph only when it is in the loss.
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.config.algorithm.entropy_coef > 0):
            entropy = -(logprobs_all.exp() * logprobs_all).sum(-1)
        zeros = torch.zeros((len(batch), 1), device=self.device)
        result = {"logprobs": torch.cat([zeros, shifted], 1), "entropy": torch.cat([zeros, entropy], 1)}
        if with_values:
            assert self.value_head is not None
            hidden = out.hidden_states[-1][:, :-1, :].float()
            result["values"] = torch.cat([zeros, self.value_head(hidden).squeeze(-1)], 1)
        return result

    def _micro_batches(self, batch: TrainBatch) -> list[TrainBatch]:
        size = self.config.train.micro_batch_size
        return [batch.select(slice(start, start + size)) for start in range(0, len(batch), size)]

    @torch.no_grad()
    def _score_batch(self, batch: TrainBatch) -> dict[str, torch.Tensor]:
        was_training = self.model.training
        self.model.eval()
        parts: dict[str, list[torch.Tensor]] = {"logprobs": [], "values": [], "ref_logprobs": []}
        try:
            for micro in self._micro_batches(batch):
                out = self._forward(self.model, micro, with_values=self.value_head is not None)
                parts["logprobs"].append(out["logprobs"])
                if "values" in out:
                    parts["values"].append(out["values"])
                if self.config.algorithm.kl.coef > 0:
                    with self._reference_model() as reference:
                        parts["ref_logprobs"].append(self._forward(reference, micro, with_values=False)["logprobs"])
        finally:
            self.model.train(was_training)
        return {name: torch.cat(chunks).cpu() for name, chunks in parts.items() if chunks}

    def update(self, episodes: list[Episode]) -> dict[str, float]:
        started = time.perf_counter()
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        cfg = self.config.algorithm
        batch = collate(episodes, pad_id=self.pad_id, train_on_tool_tokens=cfg.train_on_tool_tokens)
        mask = batch.train_mask
        scored = self._score_batch(batch)
        old_logprobs = scored["logprobs"]
        metrics: dict[str, float] = {
            # Rollout vs trainer logprobs for the same weights: should be ~0 (pipeline pitfall 5).
            "actor/logprob_gap": float(masked_mean((batch.rollout_logprobs - old_logprobs).abs(), batch.sampled_mask)),
        }
        kl = None
        if "ref_logprobs" in scored:
            kl = kl_penalty(old_logprobs, scored["ref_logprobs"], cfg.kl.estimator)
            metrics["actor/kl_ref"] = float(masked_mean(kl, mask))
        advantages, returns = self.algorithm.compute_advantages(batch, cfg, values=scored.get("values"), kl=kl)
        norm = {
            "tokens": float(mask.sum().clamp(min=1.0)),
            "sequences": float(len(batch)),
            "max_tokens": float(self.config.rollout.max_turns * self.config.rollout.max_new_tokens),
        }
        kl_in_loss = kl is not None and not getattr(self.algorithm, "KL_IN_REWARD", False)
        totals: dict[str, float] = {}
        grad_norm = 0.0
        for _ in range(self.config.train.update_epochs):
            self.optimizer.zero_grad(set_to_none=True)
            for start, micro in zip(range(0, len(batch), self.config.train.micro_batch_size),
                                    self._micro_batches(batch)):
                rows = slice(start, start + len(micro))
                out = self._forward(self.model, micro, with_values=self.value_head is not None)
                micro_mask = micro.train_mask.to(self.device)
                per_token, clipped = clipped_policy_loss(
                    out["logprobs"], old_logprobs[rows].to(self.device), advantages[rows].to(self.device),
                    cfg.clip_eps, cfg.clip_eps_high if cfg.clip_eps_high is not None else cfg.clip_eps,
                )
                parts = {"loss/policy": aggregate(per_token, micro_mask, cfg.loss_agg, norm)}
                parts["actor/entropy"] = aggregate(out["entropy"], micro_mask, "token-mean", norm)
                parts["actor/clip_frac"] = aggregate(clipped, micro_mask, "token-mean", norm)
                loss = parts["loss/policy"] - cfg.entropy_coef * parts["actor/entropy"]
                if kl_in_loss:  # the reference is frozen: its logprobs from the scoring pass still hold
                    ref = scored["ref_logprobs"][rows].to(self.device)
                    per_token_kl = kl_penalty(out["logprobs"], ref, cfg.kl.estimator)
                    parts["loss/kl"] = aggregate(per_token_kl, micro_mask, "token-mean", norm)
                    loss = loss + cfg.kl.coef * parts["loss/kl"]
                if self.value_head is not None and returns is not None:
                    per_token_v = value_loss(out["values"], scored["values"][rows].to(self.device),
                                             returns[rows].to(self.device), cfg.vf_clip)
                    parts["loss/value"] = aggregate(per_token_v, micro_mask, "token-mean", norm)
                    loss = loss + cfg.vf_coef * parts["loss/value"]
                loss.backward()
                for name, value in parts.items():
                    totals[name] = totals.get(name, 0.0) + float(value.detach())
            params = [p for group in self.optimizer.param_groups for p in group["params"]]
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, self.config.train.max_grad_norm))
            self.optimizer.step()
        epochs = self.config.train.update_epochs
        metrics.update({name: total / epochs for name, total in totals.items()})
        trained = advantages[mask.bool()]
        metrics.update({
            "actor/grad_norm": grad_norm,
            "adv/mean": float(trained.mean()) if trained.numel() else 0.0,
            "adv/std": float(trained.std(unbiased=False)) if trained.numel() else 0.0,
            "adv/min": float(trained.min()) if trained.numel() else 0.0,
            "adv/max": float(trained.max()) if trained.numel() else 0.0,
        })
        elapsed = time.perf_counter() - started
        metrics["perf/train_time_s"] = elapsed
        metrics["perf/train_tokens_per_s"] = float(batch.attention_mask.sum()) * epochs / elapsed if elapsed else 0.0
        if torch.cuda.is_available():
            metrics["perf/peak_memory_mb"] = torch.cuda.max_memory_allocated() / 2**20
        for row, ep in enumerate(episodes):
            n = len(ep.token_ids)
            trained_row = mask[row, :n].bool().tolist()
            ep.advantages = [float(a) if m else None for a, m in zip(advantages[row, :n].tolist(), trained_row)]
            ep.trainer_logprobs = [float(lp) if s else None
                                   for lp, s in zip(old_logprobs[row, :n].tolist(), batch.sampled_mask[row, :n].tolist())]
        return metrics

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"optimizer": self.optimizer.state_dict()}
        if self.value_head is not None:
            state["value_head"] = self.value_head.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        if self.value_head is not None:
            self.value_head.load_state_dict(state["value_head"])

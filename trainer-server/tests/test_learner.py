import copy
import math

import pytest
import torch
from agentrl import StepResult
from agentrl.contract.config import load_config_dict
from agentrl.examples.lookup.env import LookupEnv
from agentrl.learning import forward as forward_module
from agentrl.learning import logprobs as logprobs_module
from agentrl.learning.batch import TrainBatch, collate
from agentrl.learning.learner import Learner
from agentrl.learning.logprobs import target_logprobs, vocabulary_logits
from agentrl.models.loading import load_policy
from agentrl.models.prefix import MIN_SHARED_PREFIX, gradient_checkpointing, shared_prefix_cache, shared_prefix_length
from agentrl.rollout.hf_engine import HfRolloutEngine

BASE = {
    "env": {"module": "agentrl.examples.lookup.env", "class_name": "LookupEnv"},
    "data": {"train": "x.jsonl"},
    "rollout": {"group_size": 2, "max_turns": 2, "max_new_tokens": 8, "max_context": 400},
}


class KeepGoingEnv(LookupEnv):
    """Every turn gets a tool message back, so episodes have tool tokens between turns."""

    def step(self, assistant_text, calls):
        return StepResult(messages=[{"role": "tool", "content": "noop"}])


def episodes_for(model, tokenizer, cfg):
    engine = HfRolloutEngine(model, tokenizer, KeepGoingEnv, cfg.rollout, torch.device("cpu"))
    return engine.run([{"key": "1"}, {"key": "2"}], group_size=2, seed=3)


def config(**train):
    return load_config_dict({**BASE, "train": {"batch_size": 4, "lr": 0.01, **train}})


@pytest.mark.parametrize("bf16_autocast", [False, True])
def test_gradient_accumulation_matches_one_batch(tiny, bf16_autocast):
    """Under bf16 autocast one region spans the pass's micro-batches (each weight cast once, each backward outside
    autocast): four micro-batches still give one micro-batch's gradient, to bf16's rounding."""
    model, tokenizer = tiny
    cfg_full = config(micro_batch_size=4, bf16_autocast=bf16_autocast)
    cfg_micro = config(micro_batch_size=1, bf16_autocast=bf16_autocast)
    episodes = episodes_for(model, tokenizer, cfg_full)
    for ep in episodes:
        ep.outcome_reward = float(ep.sample)  # make sure there is a signal
    m_full, m_micro = copy.deepcopy(model), copy.deepcopy(model)
    Learner(m_full, tokenizer, cfg_full, torch.device("cpu")).update(copy.deepcopy(episodes))
    Learner(m_micro, tokenizer, cfg_micro, torch.device("cpu")).update(copy.deepcopy(episodes))
    if not bf16_autocast:
        # AdamW divides each entry's step by that entry's own gradient size, so an entry whose gradient is ~0 moves by
        # an lr-sized step that float rounding decides (on an AVX-512 CPU: one entry of 2,048 by 1.9e-5 while the two
        # gradients differed by 7e-10). Each tensor's difference is bounded by how far the update moved it.
        for a, b, before in zip(m_full.parameters(), m_micro.parameters(), model.parameters()):
            assert float((a - b).detach().norm()) <= 1e-3 * float((a - before).detach().norm()) + 1e-7
    # The gradients the optimizer stepped with (it leaves them in place), every parameter's.
    full = torch.cat([p.grad.flatten() for p in m_full.parameters()])
    micro = torch.cat([p.grad.flatten() for p in m_micro.parameters()])
    assert float(full.abs().max()) > 0
    assert float((full - micro).norm() / full.norm()) < (2e-2 if bf16_autocast else 1e-5)


def test_logprob_gap_is_tiny_for_the_same_weights_and_advantages_come_back_per_episode(tiny):
    model, tokenizer = tiny
    cfg = config()
    episodes = episodes_for(model, tokenizer, cfg)
    for ep in episodes:
        ep.outcome_reward = float(ep.sample)  # a nonzero advantage for every episode, so the update runs them all
    before = copy.deepcopy(episodes)
    update = Learner(copy.deepcopy(model), tokenizer, cfg, torch.device("cpu")).update(episodes)
    metrics = update.metrics
    assert metrics["actor/logprob_gap"] < 1e-4
    assert episodes == before  # the learner only reads the rollout's episodes
    assert len(update.advantages) == len(episodes)
    for ep, advantages in zip(episodes, update.advantages):
        assert len(advantages) == len(ep.token_ids)
        assert all((a is None) == (m == 0) for a, m in zip(advantages, ep.loss_mask))
    for name in (
        "loss/policy",
        "actor/entropy",
        "actor/clip_frac",
        "actor/token_accuracy",
        "actor/grad_norm",
        "adv/std",
        "perf/train_tokens_per_s",
    ):
        assert name in metrics


@pytest.mark.parametrize("rollout_is", [False, True])
def test_token_figures_are_the_learners_own_logprobs_and_entropy_for_the_weights_that_sampled(tiny, rollout_is):
    """What the replay's mismatch overlay shows: per sampled token, the logprob and the entropy a forward pass of the
    weights that sampled gives (computed here independently, from the logits), the truncated importance weight from
    them, one entry per sampled token; nothing on a row the update skipped (zero advantage: no pass read it)."""
    model, tokenizer = tiny
    cfg = load_config_dict(
        {**BASE, "train": {"batch_size": 4, "lr": 0.01}, "algorithm": {"rollout_is": {"enabled": rollout_is}}}
    )
    episodes = episodes_for(model, tokenizer, cfg)
    for ep in episodes:
        ep.outcome_reward = float(ep.sample) if ep.group == 0 else 1.0  # group 1: no signal, its rows are skipped
    update = Learner(copy.deepcopy(model), tokenizer, cfg, torch.device("cpu")).update(copy.deepcopy(episodes))
    temperature = cfg.rollout.temperature or 1.0
    for ep, figures in zip(episodes, update.token_figures):
        assert set(figures) == {"trainer_logprob", "entropy", *(["is_weight"] if rollout_is else [])}
        ids = torch.tensor([ep.token_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, :-1].float() / temperature
        logp = torch.log_softmax(logits, -1)
        sampled = [t for t, logprob in enumerate(ep.rollout_logprobs) if logprob is not None]
        assert sampled and all(len(values) == len(sampled) for values in figures.values())  # one per sampled token
        assert all(ep.token_roles[t] == "assistant" for t in sampled)
        for k, t in enumerate(sampled):
            if ep.group == 1:  # the update read no row of group 1
                assert all(figures[name][k] is None for name in figures)
                continue
            expected = float(logp[t - 1, ep.token_ids[t]])
            assert abs(figures["trainer_logprob"][k] - expected) < 1e-4
            if rollout_is:
                gap = figures["trainer_logprob"][k] - ep.rollout_logprobs[t]
                assert abs(figures["is_weight"][k] - min(math.exp(gap), cfg.algorithm.rollout_is.cap)) < 1e-4
            entropy = float(-(logp[t - 1].exp() * logp[t - 1]).sum())
            assert abs(figures["entropy"][k] - entropy) < 1e-4
        assert any(v is not None for v in figures["trainer_logprob"]) == (ep.group == 0)


def test_ppo_with_kl_and_tool_token_ablation_runs(tiny):
    model, tokenizer = tiny
    cfg = load_config_dict(
        {
            **BASE,
            "train": {"batch_size": 4, "micro_batch_size": 2},
            "algorithm": {"name": "ppo", "kl": {"coef": 0.1}, "train_on_tool_tokens": True},
        }
    )
    episodes = episodes_for(model, tokenizer, cfg)
    update = Learner(copy.deepcopy(model), tokenizer, cfg, torch.device("cpu")).update(episodes)
    assert {"loss/value", "loss/kl", "actor/kl_ref"} <= set(update.metrics)
    # the ablation trains on tool tokens too
    assert any(
        a is not None and r == "tool"
        for ep, advantages in zip(episodes, update.advantages)
        for a, r in zip(advantages, ep.token_roles)
    )


@pytest.mark.parametrize("math_attention_width", [0, 10_000])
def test_shared_prefix_and_kept_positions_change_nothing(tiny, monkeypatch, math_attention_width):
    """The learner runs the rows' shared prefix once and the vocabulary projection only where a token is
    read, with attention's math backend on CPU up to a width or the fused kernel beyond it; logprobs, entropy and
    gradients must equal the plain full-sequence computation either way."""
    monkeypatch.setattr(forward_module, "CPU_MATH_ATTENTION_WIDTH", math_attention_width)
    model, tokenizer = tiny
    cfg = config()
    episodes = episodes_for(model, tokenizer, cfg)
    batch = collate(episodes, pad_id=tokenizer.pad_token_id)
    assert shared_prefix_length(batch.input_ids, batch.attention_mask) >= MIN_SHARED_PREFIX  # the path under test
    learner_model, plain_model = copy.deepcopy(model), copy.deepcopy(model)
    learner = Learner(learner_model, tokenizer, cfg, torch.device("cpu"))
    out = learner.forward(learner_model, batch, with_values=False, with_entropy=True)
    logits = plain_model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1].float()
    logprobs_all = torch.log_softmax(logits, -1)
    plain = logprobs_all.gather(-1, batch.input_ids[:, 1:, None]).squeeze(-1)
    plain_entropy = -(logprobs_all.exp() * logprobs_all).sum(-1)
    read = batch.sampled_mask[:, 1:] > 0
    assert torch.allclose(out["logprobs"][:, 1:][read], plain[read], atol=1e-5)
    assert torch.allclose(out["entropy"][:, 1:][read], plain_entropy[read], atol=1e-4)
    (out["logprobs"][:, 1:] * batch.sampled_mask[:, 1:]).sum().backward()
    (plain * batch.sampled_mask[:, 1:]).sum().backward()
    for (name, a), b in zip(learner_model.named_parameters(), plain_model.parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-4), name


def checkpointed_layer_runs(model) -> list[str]:
    """A list that gets the name of each layer transformers runs through its checkpoint function."""
    runs = []

    def recorded(name, checkpoint):
        return lambda *args, **kwargs: runs.append(name) or checkpoint(*args, **kwargs)

    for name, module in model.named_modules():
        if getattr(module, "gradient_checkpointing", False) is True and hasattr(module, "_gradient_checkpointing_func"):
            module._gradient_checkpointing_func = recorded(name, module._gradient_checkpointing_func)
    return runs


@pytest.mark.parametrize("lora", [False, True])
def test_gradient_checkpointing_runs_the_shared_prefix_once_and_changes_no_gradient(monkeypatch, lora):
    """Under model.gradient_checkpointing transformers turns the cache off in the layers it checkpoints, which the
    shared prefix's forward reads (issue 49: the first update died in `shared_prefix_cache`). The learner still runs a
    group's prompt once, checkpointed, and one update gives the gradients and weights of the same update without
    checkpointing, full weights and LoRA."""
    checkpointed_prefixes = []

    def recorded_prefix(model, *args):
        checkpointed_prefixes.append(gradient_checkpointing(model))
        return shared_prefix_cache(model, *args)

    monkeypatch.setattr(forward_module, "shared_prefix_cache", recorded_prefix)
    runs, episodes = {}, None
    for checkpointing in (False, True):
        cfg = load_config_dict(
            {
                **BASE,
                "model": {"gradient_checkpointing": checkpointing, "lora": {"enabled": lora}, "device": "cpu"},
                "train": {"batch_size": 4, "micro_batch_size": 2, "lr": 0.01},
            }
        )
        torch.manual_seed(0)  # peft draws the adapters' initial weights from torch's global generator
        model, tokenizer, device = load_policy(cfg.model, seed=0)
        if episodes is None:
            episodes = episodes_for(model, tokenizer, cfg)
            for ep in episodes:
                ep.outcome_reward = float(ep.sample)  # a signal in every group
        layer_runs = checkpointed_layer_runs(model)
        before = [p.detach().clone() for p in model.parameters() if p.requires_grad]
        checkpointed_prefixes.clear()
        Learner(model, tokenizer, cfg, device).update(copy.deepcopy(episodes))
        assert checkpointed_prefixes and set(checkpointed_prefixes) == {checkpointing}  # the path under test
        assert bool(layer_runs) == checkpointing
        trained = [p for p in model.parameters() if p.requires_grad]
        runs[checkpointing] = (before, [p.detach() for p in trained], torch.cat([p.grad.flatten() for p in trained]))
    (before, plain, plain_grad), (before_checkpointed, checkpointed, checkpointed_grad) = runs[False], runs[True]
    assert all(torch.equal(a, b) for a, b in zip(before, before_checkpointed))  # the same model, the same step
    assert float(plain_grad.abs().max()) > 0
    assert float((plain_grad - checkpointed_grad).norm() / plain_grad.norm()) < 1e-5
    for a, b, start in zip(plain, checkpointed, before):  # as in test_gradient_accumulation_matches_one_batch
        assert float((a - b).norm()) <= 1e-3 * float((a - start).norm()) + 1e-7


class AdaptedHead(torch.nn.Module):
    """An output head that is not a plain linear layer (as when a LoRA adapter wraps it): autograd's backward."""

    def __init__(self, inner: torch.nn.Linear) -> None:
        super().__init__()
        self.inner = inner

    @property
    def weight(self) -> torch.Tensor:
        return self.inner.weight

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.inner(hidden) * 1.0


def head_of_kind(model, kind: str):
    """The tiny model with its own linear head, a linear head with a bias under Gemma's final soft-capping, or an
    adapted head."""
    model = copy.deepcopy(model)
    if kind == "bias and cap":
        hidden, vocabulary = model.config.hidden_size, model.config.vocab_size
        model.lm_head = torch.nn.Linear(hidden, vocabulary, bias=True)
        torch.nn.init.normal_(model.lm_head.bias, std=1.0)
        model.config.final_logit_softcapping = 2.0
    elif kind == "adapted":
        model.lm_head = AdaptedHead(model.lm_head)
    return model


@pytest.mark.parametrize("head", ["linear", "bias and cap", "adapted"])
@pytest.mark.parametrize("kept_logits_bytes", [0, logprobs_module.KEPT_LOGITS_BYTES])
@pytest.mark.parametrize("chunk_rows", [1, 7, 10_000])
def test_chunked_projection_equals_the_whole_one(tiny, monkeypatch, chunk_rows, kept_logits_bytes, head):
    """`target_logprobs` projects `chunk_rows` positions at a time, projecting each chunk again in the backward when
    the logits kept for it would exceed `kept_logits_bytes` (0: always) or keeping them from the forward: logprobs,
    entropy and their gradients (entropy in the loss; the head's weight and bias) equal those of one [N, V]
    log-softmax either way, through a linear head's written-out backward (with a bias and soft-capping too) or
    autograd's for another head; an entropy outside the loss carries no graph and is not computed again."""
    model = head_of_kind(tiny[0], head)
    temperature = 0.7
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(40, model.config.hidden_size, generator=generator)
    targets = torch.randint(0, model.config.vocab_size, (40,), generator=generator)
    with torch.no_grad():  # half the targets the most likely token, for the token accuracy to tell them apart
        targets[::2] = vocabulary_logits(model, hidden)[::2].argmax(-1)
    loss_weights = torch.randn(2, 40, generator=generator)

    def gradients(logprobs, entropy, leaf):
        output_head = model.get_output_embeddings()
        parameters = [output_head.weight] + (
            [output_head.bias] if getattr(output_head, "bias", None) is not None else []
        )
        return torch.autograd.grad((loss_weights[0] * logprobs + loss_weights[1] * entropy).sum(), [leaf, *parameters])

    whole_hidden = hidden.clone().requires_grad_(True)
    logprobs_all = torch.log_softmax(vocabulary_logits(model, whole_hidden).float() / temperature, -1)  # [N, V]
    whole = logprobs_all.gather(-1, targets[:, None]).squeeze(-1)
    whole_entropy = -(logprobs_all.exp() * logprobs_all).sum(-1)
    whole_logprob_grad = torch.autograd.grad((loss_weights[0] * whole).sum(), whole_hidden, retain_graph=True)[0]
    whole_grads = gradients(whole, whole_entropy, whole_hidden)

    chunked_hidden = hidden.clone().requires_grad_(True)
    chunked, entropy, greedy = target_logprobs(
        model,
        chunked_hidden,
        targets,
        temperature=temperature,
        entropy=True,
        entropy_grad=True,
        chunk_rows=chunk_rows,
        kept_logits_bytes=kept_logits_bytes,
    )
    assert torch.allclose(chunked, whole, atol=1e-5)
    assert torch.allclose(entropy, whole_entropy, atol=1e-5)
    assert torch.equal(greedy, (logprobs_all.argmax(-1) == targets).float()) and greedy[::2].all()
    for a, b in zip(gradients(chunked, entropy, chunked_hidden), whole_grads, strict=True):
        assert torch.allclose(a, b, atol=1e-5)

    entropy_calls = count_entropy_calls(monkeypatch)
    reported_hidden = hidden.clone().requires_grad_(True)
    logprobs, reported, _ = target_logprobs(
        model,
        reported_hidden,
        targets,
        temperature=temperature,
        entropy=True,
        entropy_grad=False,
        chunk_rows=chunk_rows,
        kept_logits_bytes=kept_logits_bytes,
    )
    assert not reported.requires_grad and torch.allclose(reported, whole_entropy, atol=1e-5)
    (loss_weights[0] * logprobs).sum().backward()
    assert len(entropy_calls) == len(hidden.split(chunk_rows))  # once per chunk, in the forward only
    assert torch.allclose(reported_hidden.grad, whole_logprob_grad, atol=1e-5)


def count_entropy_calls(monkeypatch) -> list[bool]:
    """Records, for each entropy the learner computes from now on, whether gradients were enabled."""
    calls: list[bool] = []
    entropy = logprobs_module.entropy_from_logits

    def counted(*args):
        calls.append(torch.is_grad_enabled())
        return entropy(*args)

    monkeypatch.setattr(logprobs_module, "entropy_from_logits", counted)
    return calls


def test_only_the_training_pass_computes_entropy(tiny, monkeypatch):
    """The scoring pass and the reference's pass read logprobs only: no entropy there, no softmax over the
    vocabulary; the training pass reports it."""
    model, tokenizer = tiny
    cfg = load_config_dict(
        {**BASE, "train": {"batch_size": 4, "micro_batch_size": 4}, "algorithm": {"kl": {"coef": 0.1}}}
    )
    episodes = episodes_for(model, tokenizer, cfg)
    learner = Learner(copy.deepcopy(model), tokenizer, cfg, torch.device("cpu"))
    entropy_calls = count_entropy_calls(monkeypatch)
    passes = []
    forward = learner.forward

    def recorded_forward(*args, **kwargs):
        calls_before = len(entropy_calls)
        out = forward(*args, **kwargs)
        passes.append({"grad": torch.is_grad_enabled(), "entropy": "entropy" in out})
        passes[-1]["entropy computed"] = len(entropy_calls) - calls_before
        return out

    monkeypatch.setattr(learner, "forward", recorded_forward)
    metrics = learner.update(episodes).metrics
    assert passes == [
        {"grad": False, "entropy": False, "entropy computed": 0},  # pi_old
        {"grad": False, "entropy": False, "entropy computed": 0},  # pi_ref
        {"grad": True, "entropy": True, "entropy computed": 1},  # the training pass: one chunk
    ]
    assert entropy_calls == [False]  # without a graph (entropy_coef 0), and not again in the backward
    assert "actor/entropy" in metrics


def test_on_policy_update_equals_the_update_with_a_scoring_pass(tiny, monkeypatch):
    """With one epoch the training pass's own detached logprobs are pi_old: the same step as scoring first."""
    model, tokenizer = tiny
    episodes = episodes_for(model, tokenizer, config())
    for ep in episodes:
        ep.outcome_reward = float(ep.sample)
    on_policy, scored = copy.deepcopy(model), copy.deepcopy(model)
    metrics_on = Learner(on_policy, tokenizer, config(), torch.device("cpu")).update(copy.deepcopy(episodes)).metrics
    scoring_learner = Learner(scored, tokenizer, config(), torch.device("cpu"))
    monkeypatch.setattr(scoring_learner, "on_policy", lambda: False)
    metrics_scored = scoring_learner.update(copy.deepcopy(episodes)).metrics
    assert any(not torch.equal(a, b) for a, b in zip(on_policy.parameters(), model.parameters()))
    for a, b in zip(on_policy.parameters(), scored.parameters()):
        assert torch.allclose(a, b, atol=1e-6)
    assert abs(metrics_on["actor/logprob_gap"] - metrics_scored["actor/logprob_gap"]) < 1e-6


class EveryRowLearner(Learner):
    """Runs every row, whatever its advantage (as the learner did before it left zero-advantage rows out)."""

    def _rows_to_train(self, zero_advantage, kl_in_loss, batch):
        return torch.arange(len(zero_advantage))


def rows_run_by_passes(learner, monkeypatch, *, training: bool = True):
    """The number of rows of each call of `forward` the learner makes: of the training passes, or of the no-gradient
    (scoring) passes."""
    rows = []
    forward = learner.forward

    def recorded_forward(model, batch, **kwargs):
        if torch.is_grad_enabled() == training:
            rows.append(len(batch))
        return forward(model, batch, **kwargs)

    monkeypatch.setattr(learner, "forward", recorded_forward)
    return rows


def update_with_one_group_without_signal(tiny, cfg, monkeypatch, *, training_passes: bool):
    """One update of the step's episodes, group 0's samples all rewarded 1.0 (GRPO gives them advantage 0) and group
    1's 0 and 1, by the learner and by one that runs every row, which must reach the same weights. Returns the rows of
    each `forward` call of the learner's training passes (`training_passes`) or of its scoring pass, its update,
    the other learner's update, and the episodes."""
    model, tokenizer = tiny
    episodes = episodes_for(model, tokenizer, cfg)
    for ep in episodes:
        ep.outcome_reward = float(ep.sample) if ep.group == 1 else 1.0
    skipping, every_row = copy.deepcopy(model), copy.deepcopy(model)
    learner = Learner(skipping, tokenizer, cfg, torch.device("cpu"))
    rows = rows_run_by_passes(learner, monkeypatch, training=training_passes)
    update = learner.update(copy.deepcopy(episodes))
    reference = EveryRowLearner(every_row, tokenizer, cfg, torch.device("cpu")).update(copy.deepcopy(episodes))
    assert any(not torch.equal(a, b) for a, b in zip(skipping.parameters(), model.parameters()))
    for a, b in zip(skipping.parameters(), every_row.parameters()):
        assert torch.allclose(a, b, atol=1e-6)
    return rows, update, reference, episodes


def test_rows_with_zero_advantage_are_not_run_and_the_step_is_the_same(tiny, monkeypatch):
    """Only group 1's rows run, and every weight, the loss and the logprob gap over the rows that ran are those of
    the update that runs all."""
    cfg = config(micro_batch_size=1, weight_decay=0.1)
    rows_run, update, reference, episodes = update_with_one_group_without_signal(
        tiny, cfg, monkeypatch, training_passes=True
    )
    assert rows_run == [1, 1]  # group 1's two episodes, one micro-batch each
    assert update.metrics["adv/zero_frac"] == reference.metrics["adv/zero_frac"] == 0.5
    assert update.metrics["loss/policy"] == pytest.approx(reference.metrics["loss/policy"], abs=1e-6)
    assert update.metrics["actor/grad_norm"] == pytest.approx(reference.metrics["actor/grad_norm"], rel=1e-5)
    assert update.metrics["actor/logprob_gap"] < 1e-4
    ran = [row for row, ep in enumerate(episodes) if ep.group == 1]
    assert [update.per_episode["logprob_gap"][row] for row in ran] == pytest.approx(
        [reference.per_episode["logprob_gap"][row] for row in ran], abs=1e-7
    )
    assert update.advantages == reference.advantages


def test_with_two_epochs_the_scoring_pass_runs_only_the_rows_the_update_trains(tiny, monkeypatch):
    """Off-policy (two update epochs) without a critic or a reference, the advantages read nothing the scoring pass
    computes, so it runs after them and only for the rows with a nonzero advantage: the same weights as scoring and
    training every row."""
    cfg = config(micro_batch_size=1, update_epochs=2)
    scored_rows, update, _, episodes = update_with_one_group_without_signal(
        tiny, cfg, monkeypatch, training_passes=False
    )
    assert scored_rows == [1, 1]  # group 1's two episodes
    assert update.metrics["actor/logprob_gap"] < 1e-4  # over the rows scored
    assert [gap for gap, ep in zip(update.per_episode["logprob_gap"], episodes) if ep.group == 0] == [0.0, 0.0]


def test_a_step_where_every_advantage_is_zero_runs_no_row_and_still_steps_the_optimizer(tiny, monkeypatch):
    """After a step with a signal, AdamW's moments move the weights even with a zero gradient (and weight decay
    shrinks them): a step with no signal runs no row and changes the weights exactly as running every row did."""
    model, tokenizer = tiny
    cfg = config(weight_decay=0.1)
    episodes = episodes_for(model, tokenizer, cfg)
    signal, no_signal = copy.deepcopy(episodes), copy.deepcopy(episodes)
    for ep in signal:
        ep.outcome_reward = float(ep.sample)
    skipping, every_row = copy.deepcopy(model), copy.deepcopy(model)
    learners = [
        Learner(skipping, tokenizer, cfg, torch.device("cpu")),
        EveryRowLearner(every_row, tokenizer, cfg, torch.device("cpu")),
    ]
    for learner in learners:
        learner.update(copy.deepcopy(signal))
    rows_run = rows_run_by_passes(learners[0], monkeypatch)
    before = copy.deepcopy(skipping)
    metrics = learners[0].update(copy.deepcopy(no_signal)).metrics
    learners[1].update(copy.deepcopy(no_signal))
    assert rows_run == []
    assert metrics["adv/zero_frac"] == 1.0 and metrics["actor/grad_norm"] == 0.0
    assert "actor/logprob_gap" not in metrics and "actor/entropy" not in metrics  # nothing was computed to report
    assert any(not torch.equal(a, b) for a, b in zip(skipping.parameters(), before.parameters()))
    for a, b in zip(skipping.parameters(), every_row.parameters()):
        assert torch.allclose(a, b, atol=1e-6)


@pytest.mark.parametrize(
    "algorithm",
    [{"entropy_coef": 0.01}, {"kl": {"coef": 0.1}}, {"name": "ppo"}],
    ids=["entropy bonus", "KL in the loss", "critic"],
)
def test_rows_with_zero_advantage_run_when_another_loss_term_reads_them(tiny, monkeypatch, algorithm):
    model, tokenizer = tiny
    cfg = load_config_dict({**BASE, "train": {"batch_size": 4, "micro_batch_size": 4}, "algorithm": algorithm})
    episodes = episodes_for(model, tokenizer, cfg)  # every reward 0
    learner = Learner(copy.deepcopy(model), tokenizer, cfg, torch.device("cpu"))
    rows_run = rows_run_by_passes(learner, monkeypatch)
    learner.update(episodes)
    assert rows_run == [4]


def test_micro_batches_are_bucketed_by_length_and_results_come_back_in_row_order(tiny):
    model, tokenizer = tiny
    episodes = episodes_for(model, tokenizer, config())
    episodes[0].token_ids = episodes[0].token_ids[:-3]  # rows of different lengths
    for name in ("loss_mask", "token_roles", "rollout_logprobs", "token_turns"):
        setattr(episodes[0], name, getattr(episodes[0], name)[:-3])
    batch = collate(episodes, pad_id=tokenizer.pad_token_id)
    one_by_one = Learner(copy.deepcopy(model), tokenizer, config(micro_batch_size=1), torch.device("cpu"))
    together = Learner(copy.deepcopy(model), tokenizer, config(micro_batch_size=4), torch.device("cpu"))
    rows = one_by_one._micro_rows(batch)
    lengths = batch.attention_mask.sum(1)
    assert [int(lengths[r]) for r in torch.cat(rows)] == sorted(lengths.tolist())
    scored_apart = one_by_one._score_batch(batch, rows)
    scored_together = together._score_batch(batch, together._micro_rows(batch))
    assert torch.allclose(scored_apart["logprobs"], scored_together["logprobs"], atol=1e-5)
    read = batch.sampled_mask > 0
    assert torch.allclose(scored_apart["logprobs"][read], batch.rollout_logprobs[read], atol=1e-4)  # row order kept


def synthetic_batch(lengths, groups, prompts):
    """Rows of the given lengths whose first 20 tokens are their prompt (`prompts[row]` picks one of two), then
    sampled tokens."""
    width, prompt = max(lengths), 20
    input_ids = torch.zeros((len(lengths), width), dtype=torch.long)
    attention, sampled = torch.zeros_like(input_ids), torch.zeros((len(lengths), width))
    for row, (length, which) in enumerate(zip(lengths, prompts)):
        input_ids[row, :length] = torch.arange(length) % 50 + 1
        input_ids[row, 0] = 60 + which
        attention[row, :length] = 1
        sampled[row, prompt:length] = 1
    zeros = torch.zeros((len(lengths), width))
    turns = torch.zeros_like(input_ids)
    return TrainBatch(input_ids, attention, sampled, sampled, zeros, zeros, turns, torch.tensor(groups))


@pytest.mark.parametrize(
    ("prompts", "expected"),
    [
        ([0, 1, 0, 1], [[0, 2], [1, 3]]),  # each group its own prompt: by group, each pair runs its prompt once
        ([0, 0, 0, 0], [[0, 1], [2, 3]]),  # one prompt for all: by length, the least padding
    ],
)
def test_micro_batches_take_the_order_that_computes_fewer_positions(tiny, prompts, expected):
    model, tokenizer = tiny
    learner = Learner(copy.deepcopy(model), tokenizer, config(micro_batch_size=2), torch.device("cpu"))
    batch = synthetic_batch([30, 31, 40, 41], groups=[0, 1, 0, 1], prompts=prompts)
    assert sorted(sorted(rows.tolist()) for rows in learner._micro_rows(batch)) == expected


def test_the_learner_reproduces_soft_capped_logits_and_refuses_heads_it_cannot():
    import pytest
    from agentrl.learning.logprobs import check_vocabulary_logits
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig, GraniteConfig, GraniteForCausalLM

    small = {
        "vocab_size": 64,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 16,
    }
    gemma = Gemma3ForCausalLM(Gemma3TextConfig(**small, final_logit_softcapping=5.0))
    check_vocabulary_logits(gemma, torch.device("cpu"))  # Gemma's final soft-capping is reproduced
    granite = GraniteForCausalLM(
        GraniteConfig(**{k: v for k, v in small.items() if k != "head_dim"}, logits_scaling=4.0)
    )
    with pytest.raises(ValueError, match="cannot reproduce the logits of model type 'granite'"):
        check_vocabulary_logits(granite, torch.device("cpu"))


@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_episodes_that_recorded_no_token_train_nothing_and_break_nothing(tiny, algorithm):
    """An agent's episode that failed before its first request has no tokens. With others beside it, it is a row with
    nothing to train; when every episode of the step is one, the update has no row to run (it raised an IndexError)."""
    from agentrl.rollout.episode import Episode  # noqa: PLC0415

    model, tokenizer = tiny
    cfg = load_config_dict({**BASE, "algorithm": {"name": algorithm}, "train": {"batch_size": 4, "lr": 0.01}})
    empty = [Episode(f"t{g}", g, s, [], [], status="error") for g in range(2) for s in range(2)]
    update = Learner(copy.deepcopy(model), tokenizer, cfg, torch.device("cpu")).update(copy.deepcopy(empty))
    assert update.advantages == [[], [], [], []]
    assert math.isfinite(update.metrics["actor/grad_norm"])
    mixed = episodes_for(model, tokenizer, cfg)[:2] + empty[2:]
    for ep in mixed:
        ep.outcome_reward = float(ep.sample)
    update = Learner(copy.deepcopy(model), tokenizer, cfg, torch.device("cpu")).update(mixed)
    assert update.advantages[2:] == [[], []]
    assert all(math.isfinite(v) for v in update.metrics.values())

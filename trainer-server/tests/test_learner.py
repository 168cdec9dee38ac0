import copy

import torch

from agentrl import StepResult
from agentrl.config import load_config_dict
from agentrl.examples.lookup.env import LookupEnv
from agentrl.learner import Learner
from agentrl.rollout import RolloutEngine

BASE = {"env": {"module": "agentrl.examples.lookup.env", "class_name": "LookupEnv"}, "data": {"train": "x.jsonl"},
        "rollout": {"group_size": 2, "max_turns": 2, "max_new_tokens": 8, "max_context": 400}}


class KeepGoingEnv(LookupEnv):
    """Every turn gets a tool message back, so episodes have tool tokens between turns."""

    def step(self, assistant_text, calls):
        return StepResult(messages=[{"role": "tool", "content": "noop"}])


def episodes_for(model, tokenizer, cfg):
    engine = RolloutEngine(model, tokenizer, KeepGoingEnv, cfg.rollout, torch.device("cpu"))
    return engine.run([{"key": "1"}, {"key": "2"}], group_size=2, seed=3)


def config(**train):
    return load_config_dict({**BASE, "train": {"batch_size": 4, "lr": 0.01, **train}})


def test_gradient_accumulation_matches_one_batch(tiny):
    model, tokenizer = tiny
    cfg_full, cfg_micro = config(micro_batch_size=4), config(micro_batch_size=1)
    episodes = episodes_for(model, tokenizer, cfg_full)
    for ep in episodes:
        ep.outcome_reward = float(ep.sample)  # make sure there is a signal
    m_full, m_micro = copy.deepcopy(model), copy.deepcopy(model)
    Learner(m_full, tokenizer, cfg_full, torch.device("cpu")).update(copy.deepcopy(episodes))
    Learner(m_micro, tokenizer, cfg_micro, torch.device("cpu")).update(copy.deepcopy(episodes))
    for a, b in zip(m_full.parameters(), m_micro.parameters()):
        assert torch.allclose(a, b, atol=1e-5)


def test_logprob_gap_is_tiny_for_the_same_weights_and_advantages_are_filled(tiny):
    model, tokenizer = tiny
    cfg = config()
    episodes = episodes_for(model, tokenizer, cfg)
    metrics = Learner(copy.deepcopy(model), tokenizer, cfg, torch.device("cpu")).update(episodes)
    assert metrics["actor/logprob_gap"] < 1e-4
    for ep in episodes:
        assert len(ep.advantages) == len(ep.token_ids)
        assert all((a is None) == (m == 0) for a, m in zip(ep.advantages, ep.loss_mask))
    for name in ("loss/policy", "actor/entropy", "actor/clip_frac", "actor/grad_norm", "adv/std",
                 "perf/train_tokens_per_s"):
        assert name in metrics


def test_ppo_with_kl_and_tool_token_ablation_runs(tiny):
    model, tokenizer = tiny
    cfg = load_config_dict({**BASE, "train": {"batch_size": 4, "micro_batch_size": 2},
                            "algorithm": {"name": "ppo", "kl": {"coef": 0.1}, "train_on_tool_tokens": True}})
    episodes = episodes_for(model, tokenizer, cfg)
    metrics = Learner(copy.deepcopy(model), tokenizer, cfg, torch.device("cpu")).update(episodes)
    assert {"loss/value", "loss/kl", "actor/kl_ref"} <= set(metrics)
    # the ablation trains on tool tokens too
    assert any(a is not None and r == "tool" for ep in episodes for a, r in zip(ep.advantages, ep.token_roles))

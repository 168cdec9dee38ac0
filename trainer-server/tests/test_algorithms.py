"""Every advantage estimator and loss against values computed by hand, and the one registry of their names."""

import json
import math

import pytest
import torch
from agentrl.learning.algorithms import ALGORITHM_NAMES, get_algorithm
from agentrl.learning.algorithms.base import Algorithm
from agentrl.learning.algorithms.common import (
    aggregate,
    clipped_policy_loss,
    discounted_sum_backward,
    group_stats,
    kl_penalty,
    pack_chains,
    returns_to_go,
    truncated_is_weights,
    unpack_chains,
)
from agentrl.learning.batch import TrainBatch
from agentrl.run.config import AlgorithmConfig, ConfigError, load_config_dict
from conftest import PROTOCOL

# Positions: [prompt, turn-0 token, turn-0 token, tool token, turn-1 token]
MASK = [0.0, 1.0, 1.0, 0.0, 1.0]
TURNS = [-1, 0, 0, 0, 1]


def make_batch(rewards, groups, mask=None):
    rows = len(rewards)
    mask_t = torch.tensor([mask or MASK] * rows)
    return TrainBatch(
        input_ids=torch.zeros((rows, 5), dtype=torch.long),
        attention_mask=torch.ones((rows, 5), dtype=torch.long),
        train_mask=mask_t,
        sampled_mask=mask_t,
        rollout_logprobs=torch.zeros((rows, 5)),
        token_rewards=torch.tensor(rewards, dtype=torch.float),
        token_turns=torch.tensor([TURNS] * rows),
        group_ids=torch.tensor(groups),
    )


def advantages(name, batch, cfg, **scores):
    return get_algorithm(name).compute_advantages(batch, cfg, **scores).advantages


def test_grpo_outcome_only_is_group_normalised():
    batch = make_batch([[0, 0, 0, 0, 1], [0, 0, 0, 0, 0]], [0, 0])
    adv = advantages("grpo", batch, AlgorithmConfig())
    assert adv[0].tolist() == pytest.approx([0, 1, 1, 0, 1], abs=1e-4)
    assert adv[1].tolist() == pytest.approx([0, -1, -1, 0, -1], abs=1e-4)


def test_grpo_process_rewards_credit_own_and_later_turns_against_same_turn_baseline():
    # episode 0: process 0.5 on turn 0's last token, outcome 1; episode 1: nothing. R = [1.5, 0], std 0.75
    batch = make_batch([[0, 0, 0.5, 0, 1], [0, 0, 0, 0, 0]], [0, 0])
    adv = advantages("grpo", batch, AlgorithmConfig())
    # turn 0: G = 1.5 vs baseline 0.75; turn 1: G = 1 vs baseline 0.5; all / 0.75
    assert adv[0].tolist() == pytest.approx([0, 1, 1, 0, 0.5 / 0.75], abs=1e-4)
    assert adv[1].tolist() == pytest.approx([0, -1, -1, 0, -0.5 / 0.75], abs=1e-4)


def test_dr_grpo_does_not_divide_by_std():
    batch = make_batch([[0, 0, 0.5, 0, 1], [0, 0, 0, 0, 0]], [0, 0])
    adv = advantages("grpo", batch, AlgorithmConfig(norm_adv_by_std=False))
    assert adv[0].tolist() == pytest.approx([0, 0.75, 0.75, 0, 0.5])


def test_grpo_zero_variance_group_has_no_signal():
    batch = make_batch([[0, 0, 0.5, 0, 0.5], [0, 0, 0, 0, 1]], [0, 0])  # both R = 1
    adv = advantages("grpo", batch, AlgorithmConfig())
    assert adv.abs().sum() == 0


def test_rloo_leave_one_out_baseline():
    batch = make_batch([[0, 0, 0, 0, 1], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0.5], [0, 0, 0, 0, 2]], [0, 0, 0, 1])
    adv = advantages("rloo", batch, AlgorithmConfig())
    assert adv[:, 4].tolist() == pytest.approx([0.75, -0.75, 0.0, 2.0])  # a group of one: no baseline
    assert adv[0].tolist() == pytest.approx([0, 0.75, 0.75, 0, 0.75])


def test_reinforce_pp_discounts_across_trained_tokens_and_normalises_globally():
    batch = make_batch([[0, 0, 0.5, 0, 1]], [0])
    adv = advantages("reinforce_pp", batch, AlgorithmConfig())
    # G = [1.5, 1.5, 1]; mean 4/3; std sqrt(1/18)
    std = math.sqrt(1 / 18)
    assert adv[0].tolist() == pytest.approx(
        [0, (1.5 - 4 / 3) / std, (1.5 - 4 / 3) / std, 0, (1 - 4 / 3) / std], abs=1e-4
    )


def test_reinforce_pp_folds_kl_into_the_reward():
    batch = make_batch([[0, 0, 0.5, 0, 1]], [0])
    cfg = AlgorithmConfig(kl={"coef": 0.1}, gamma=0.5)
    kl = torch.tensor([[0.0, 1.0, 1.0, 9.0, 1.0]])  # the tool token's KL must be ignored
    adv = advantages("reinforce_pp", batch, cfg, kl=kl)
    g4 = 0.9
    g2 = 0.4 + 0.5 * g4
    g1 = -0.1 + 0.5 * g2
    values = torch.tensor([g1, g2, g4])
    expected = (values - values.mean()) / values.std(unbiased=False)
    assert adv[0, [1, 2, 4]].tolist() == pytest.approx(expected.tolist(), abs=1e-4)


def test_ppo_gae_skips_tool_tokens():
    batch = make_batch([[0, 0, 0.5, 0, 1]], [0])
    values = torch.tensor([[0.0, 0.5, 0.4, 123.0, 0.3]])  # the tool token's value must not be used
    result = get_algorithm("ppo").compute_advantages(batch, AlgorithmConfig(gamma=0.9, lam=0.5), values=values)
    adv, ret = result.advantages, result.returns
    a4 = 1 - 0.3
    a2 = (0.5 + 0.9 * 0.3 - 0.4) + 0.45 * a4
    a1 = (0 + 0.9 * 0.4 - 0.5) + 0.45 * a2
    assert adv[0].tolist() == pytest.approx([0, a1, a2, 0, a4])
    assert ret[0].tolist() == pytest.approx([0, a1 + 0.5, a2 + 0.4, 0, a4 + 0.3])


def test_ppo_gae_with_gamma_lambda_one_gives_returns_to_go():
    batch = make_batch([[0, 0, 0.5, 0, 1]], [0])
    values = torch.tensor([[0.0, 0.5, 0.4, 0.0, 0.3]])
    ret = get_algorithm("ppo").compute_advantages(batch, AlgorithmConfig(gamma=1.0, lam=1.0), values=values).returns
    assert ret[0].tolist() == pytest.approx([0, 1.5, 1.5, 0, 1.0])


def test_ppo_value_loss_is_clipped_and_weighted():
    losses = get_algorithm("ppo").extra_losses(
        AlgorithmConfig(vf_clip=0.2, vf_coef=0.3),
        values=torch.tensor([1.0]),
        old_values=torch.tensor([0.0]),
        returns=torch.tensor([2.0]),
    )
    weight, per_token = losses["loss/value"]
    assert weight == 0.3
    assert per_token.item() == pytest.approx(0.5 * (0.2 - 2.0) ** 2)  # the clipped value is further: it counts


def test_only_ppo_has_a_critic_and_extra_losses_and_only_reinforce_pp_puts_the_kl_in_the_reward():
    for name in ALGORITHM_NAMES:
        algorithm = get_algorithm(name)
        assert (algorithm.make_critic(8) is not None) == (name == "ppo")
        assert algorithm.kl_in_reward == (name == "reinforce_pp")
        if name != "ppo":
            assert algorithm.extra_losses(AlgorithmConfig(), values=None, old_values=None, returns=None) == {}
    critic = get_algorithm("ppo").make_critic(8)
    values = critic(torch.randn(2, 5, 8))
    assert values.shape == (2, 5) and not values.any()  # V_t for every position, 0 before the first update


def test_clipped_policy_loss_and_clip_higher():
    logprobs, old = torch.tensor([0.5, math.log(0.5)]), torch.zeros(2)
    adv = torch.tensor([1.0, -1.0])
    loss, clipped = clipped_policy_loss(logprobs, old, adv, 0.2, 0.2)
    assert loss.tolist() == pytest.approx([-1.2, 0.8])
    assert clipped.tolist() == [1.0, 1.0]
    loss_high, _ = clipped_policy_loss(logprobs, old, adv, 0.2, 0.28)  # DAPO: a looser upper clip
    assert loss_high.tolist() == pytest.approx([-1.28, 0.8])


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("token-mean", 10 / 4),
        ("seq-mean-token-mean", (2 + 4) / 2),
        ("seq-mean-token-sum-norm", 10 / (2 * 4)),
    ],
)
def test_loss_aggregations(mode, expected):
    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, 7.0, 7.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    norm = {"tokens": 4.0, "sequences": 2.0, "max_tokens": 4.0}
    assert aggregate(per_token, mask, mode, norm).item() == pytest.approx(expected)


def test_kl_estimators():
    lp, ref = torch.tensor([0.2]), torch.tensor([0.0])
    assert kl_penalty(lp, ref, "k1").item() == pytest.approx(0.2)
    assert kl_penalty(lp, ref, "k3").item() == pytest.approx(math.exp(-0.2) - 1 + 0.2, rel=1e-5)  # float32


def test_the_registry_is_the_only_list_of_algorithm_names():
    assert all(isinstance(get_algorithm(name), Algorithm) for name in ALGORITHM_NAMES)
    with pytest.raises(ValueError, match="unknown algorithm"):
        get_algorithm("a2c")
    # the run config allows exactly the registry's names...
    base = {"env": {"module": "m", "class_name": "E"}, "data": {"train": "t.jsonl"}}
    for name in ALGORITHM_NAMES:
        assert load_config_dict({**base, "algorithm": {"name": name}}).algorithm.name == name
    with pytest.raises(ConfigError, match="algorithm.name"):
        load_config_dict({**base, "algorithm": {"name": "a2c"}})
    # ...and so does the committed schema the editor validates with (regenerate it with `agentrl schema`)
    schema = json.loads((PROTOCOL / "schemas" / "run-config.schema.json").read_text())
    assert schema["$defs"]["AlgorithmConfig"]["properties"]["name"]["enum"] == list(ALGORITHM_NAMES)


def test_truncated_importance_weights_correct_only_sampled_tokens_and_are_capped():
    learner = torch.log(torch.tensor([[0.5, 0.5, 0.9, 0.2]]))
    engine = torch.log(torch.tensor([[0.5, 0.25, 0.3, 0.4]]))
    sampled = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    learner.requires_grad_(True)
    weights = truncated_is_weights(learner, engine, sampled, cap=2.0)
    assert torch.allclose(weights, torch.tensor([[1.0, 2.0, 2.0, 1.0]]))  # 0.9 / 0.3 = 3 is capped; unsampled: 1
    assert not weights.requires_grad
    assert torch.allclose(truncated_is_weights(learner, engine, sampled, cap=5.0)[0, 2], torch.tensor(3.0))


@pytest.mark.parametrize("width", [7, 256, 700])
def test_vectorised_backward_sums_match_the_token_by_token_recurrence(width):
    generator = torch.Generator().manual_seed(width)
    rewards = torch.randn(5, width, generator=generator)
    mask = (torch.rand(5, width, generator=generator) > 0.4).float()
    mask[3] = 0  # a row with nothing trained
    expected = torch.zeros_like(rewards)
    for row in range(5):
        running = 0.0
        for t in reversed(mask[row].nonzero().flatten().tolist()):
            running = float(rewards[row, t]) + 0.97 * running
            expected[row, t] = running
    assert torch.allclose(returns_to_go(rewards, mask, 0.97), expected, atol=1e-4)
    packed, order = pack_chains(rewards, mask)
    assert torch.equal(unpack_chains(packed, order, mask), rewards * mask)
    assert torch.allclose(discounted_sum_backward(torch.ones(1, width), 1.0)[0], torch.arange(width, 0, -1).float())


def test_group_stats_are_per_group_population_statistics():
    values = torch.tensor([1.0, 3.0, 10.0, 10.0, 4.0])
    mean, std = group_stats(values, torch.tensor([7, 7, 2, 2, 9]))
    assert torch.allclose(mean, torch.tensor([2.0, 2.0, 10.0, 10.0, 4.0]))
    assert torch.allclose(std, torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0]))

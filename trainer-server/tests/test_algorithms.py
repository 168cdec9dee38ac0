"""Every advantage estimator and loss against values computed by hand, and the one registry of their names."""

import json
import math
from pathlib import Path

import pytest
import torch
from agentrl.contract.config import ConfigError, load_config_dict
from agentrl.contract.env_sources import FACTORY_PATTERN
from agentrl.contract.training_config import ALGORITHM_NAMES, POLICY_LOSS_NAMES, AlgorithmConfig
from agentrl.learning.algorithms import get_algorithm
from agentrl.learning.algorithms.base import Algorithm
from agentrl.learning.algorithms.common import (
    aggregate,
    discounted_sum_backward,
    group_stats,
    kl_penalty,
    pack_chains,
    returns_to_go,
    truncated_is_weights,
    unpack_chains,
)
from agentrl.learning.batch import TrainBatch
from agentrl.learning.policy_losses import get_policy_loss
from agentrl.learning.policy_losses.clipped import clipped_policy_loss
from conftest import PROTOCOL

POLICY_LOSSES = Path(__file__).resolve().parents[1] / "agentrl" / "learning" / "policy_losses"

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


def test_rft_imitates_each_groups_best_episodes_or_those_over_the_threshold():
    # group 0: R = [1.5, 0, 1.5]; group 1: R = [1, 1] (no sample did worse); group 2: R = [0.2, -1]
    rewards = [[0, 0, 0.5, 0, 1], [0, 0, 0, 0, 0], [0, 0, 0, 0, 1.5], [0, 0, 0, 0, 1], [0, 0, 0, 0, 1]]
    rewards += [[0, 0, 0, 0, 0.2], [0, 0, 0, 0, -1]]
    batch = make_batch(rewards, [0, 0, 0, 1, 1, 2, 2])
    best = advantages("rft", batch, AlgorithmConfig(name="rft"))
    assert [row.tolist() == MASK for row in best] == [True, False, True, False, False, True, False]
    assert [row.abs().sum() == 0 for row in best] == [False, True, False, True, True, False, True]
    over = advantages("rft", batch, AlgorithmConfig(name="rft", rft_min_reward=1.0))
    assert [row.tolist() == MASK for row in over] == [True, False, True, True, True, False, False]
    assert AlgorithmConfig(name="rft").policy_loss == "nll"  # the kept episodes' cross-entropy, as sft's

    # algorithm.rft_where: an episode that fails the filter is imitated by neither rule; the group's best is still
    # the best of the whole group (row 0 fails, so group 0 keeps row 2 alone; row 5 fails: group 2 keeps none)
    batch.passes_filter = torch.tensor([False, True, True, True, True, False, True])
    best = advantages("rft", batch, AlgorithmConfig(name="rft"))
    assert [row.tolist() == MASK for row in best] == [False, False, True, False, False, False, False]
    over = advantages("rft", batch, AlgorithmConfig(name="rft", rft_min_reward=1.0))
    assert [row.tolist() == MASK for row in over] == [False, False, True, True, True, False, False]


def test_rft_where_belongs_to_rft_and_cannot_ask_for_health_alerts():
    assert AlgorithmConfig(name="rft", rft_where={"tool": "lookup"}).rft_where.tool == "lookup"
    # the message names each setting given, as the config matrix asks of a refusal
    with pytest.raises(ValueError, match="algorithm.rft_where.status, algorithm.rft_where.tool: rft_where picks the "):
        AlgorithmConfig(name="grpo", rft_where={"tool": "lookup", "status": "finished"})
    with pytest.raises(ValueError, match="algorithm.rft_where: .* set algorithm.name: rft \\(not ppo\\) or remove"):
        AlgorithmConfig(name="ppo", rft_where={})
    with pytest.raises(ValueError, match="rft_where.health_code: a step's health alerts come after its update"):
        AlgorithmConfig(name="rft", rft_where={"health_code": "zero_variance_groups"})


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


def test_only_the_ppos_have_a_critic_and_extra_losses_and_only_reinforce_pp_puts_the_kl_in_the_reward():
    for name in ALGORITHM_NAMES:
        algorithm = get_algorithm(name)
        assert (algorithm.make_critic(8) is not None) == (name in ("ppo", "step_ppo"))
        assert algorithm.kl_in_reward == (name == "reinforce_pp")
        if name not in ("ppo", "step_ppo"):
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


def test_gspo_clips_each_sequence_on_the_geometric_mean_of_its_ratios():
    """Two sequences with the same tokens' log-ratios [0.1, -0.3] (and a padded token): s = exp(-0.1) = 0.905 each.
    With A = +1 the clip at 1 - 0.05 is not active (-A s > -A 0.95); with A = -1 it is, and the clipped sequence's
    tokens get no gradient. An unclipped token's gradient is -A s_i: d s_i,t / d log pi(a_t) = s_i,t."""
    old = torch.zeros(2, 3)
    logprobs = torch.tensor([[0.1, -0.3, 5.0], [0.1, -0.3, 5.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    advantages = torch.tensor([[1.0, 1.0, 0.0], [-1.0, -1.0, 0.0]])
    cfg = AlgorithmConfig(policy_loss="gspo", clip_eps=0.05)
    loss, clipped = get_policy_loss("gspo")(logprobs, old, advantages, mask, cfg)
    s = math.exp(-0.1)
    assert torch.allclose(loss * mask, torch.tensor([[-s, -s, 0.0], [0.95, 0.95, 0.0]]))
    assert (clipped * mask).tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]
    (loss * mask).sum().backward()
    assert torch.allclose(logprobs.grad, torch.tensor([[-s, -s, 0.0], [0.0, 0.0, 0.0]]))


def test_cispo_weighs_log_pi_by_the_clipped_ratio_and_drops_no_gradient():
    """r = [e^0.5, e^-0.5] = [1.649, 0.607] clipped to [1 - 0.2, 1 + 0.28]: weights [1.28, 0.8]; L = -w A log pi, and
    the gradient -w A reaches both tokens although both ratios left the range (PPO's clip would drop both)."""
    logprobs = torch.tensor([0.5, -0.5], requires_grad=True)
    advantages = torch.tensor([1.0, 2.0])
    cfg = AlgorithmConfig(policy_loss="cispo", clip_eps=0.2, clip_eps_high=0.28)
    loss, clipped = get_policy_loss("cispo")(logprobs, torch.zeros(2), advantages, torch.ones(2), cfg)
    assert loss.tolist() == pytest.approx([-1.28 * 0.5, 0.8 * 2 * 0.5])
    assert clipped.tolist() == [1.0, 1.0]
    loss.sum().backward()
    assert logprobs.grad.tolist() == pytest.approx([-1.28, -1.6])


def test_every_policy_loss_on_policy_has_the_clipped_losss_gradient():
    """At r = 1 (the training pass's own logprobs as pi_old) every policy loss's gradient is -A d log pi."""
    advantages = torch.tensor([[0.7, -1.3, 0.2]])
    mask = torch.ones(1, 3)
    gradients = []
    for name in POLICY_LOSS_NAMES:
        logprobs = torch.tensor([[-0.4, -1.1, -2.0]], requires_grad=True)
        loss, _ = get_policy_loss(name)(
            logprobs, logprobs.detach(), advantages, mask, AlgorithmConfig(policy_loss=name)
        )
        loss.sum().backward()
        gradients.append(logprobs.grad)
    assert all(torch.allclose(g, -advantages) for g in gradients)


def test_the_policy_loss_registry_and_the_run_config_agree():
    assert set(POLICY_LOSS_NAMES) == {p.stem for p in POLICY_LOSSES.glob("*.py")} - {"__init__"}
    with pytest.raises(ValueError, match="unknown policy loss"):
        get_policy_loss("dpo")
    with pytest.raises(ConfigError, match="algorithm.policy_loss"):
        load_config_dict(
            {"env": {"module": "m", "class_name": "E"}, "data": {"train": "t.jsonl"}, "algorithm": {"policy_loss": "x"}}
        )
    schema = json.loads((PROTOCOL / "schemas" / "run-config.schema.json").read_text())
    registered, users_own = schema["$defs"]["AlgorithmConfig"]["properties"]["policy_loss"]["anyOf"]
    assert registered["enum"] == list(POLICY_LOSS_NAMES)
    assert users_own["pattern"] == FACTORY_PATTERN  # MODULE:NAME of the user's own loss (test_user_registries.py)


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
    # the run config allows exactly the registry's names (or MODULE:NAME of the user's own)...
    base = {"env": {"module": "m", "class_name": "E"}, "data": {"train": "t.jsonl"}}
    for name in ALGORITHM_NAMES:
        data = {"train": "t.jsonl", "sft": [{"demonstrations": "d.jsonl"}]} if name == "sft" else base["data"]
        assert load_config_dict({**base, "data": data, "algorithm": {"name": name}}).algorithm.name == name
    with pytest.raises(ConfigError, match="algorithm.name"):
        load_config_dict({**base, "algorithm": {"name": "a2c"}})
    # ...and so does the committed schema the editor validates with (regenerate it with `agentrl schema`)
    schema = json.loads((PROTOCOL / "schemas" / "run-config.schema.json").read_text())
    registered, users_own = schema["$defs"]["AlgorithmConfig"]["properties"]["name"]["anyOf"]
    assert registered["enum"] == list(ALGORITHM_NAMES)
    assert users_own["pattern"] == FACTORY_PATTERN


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


# Three steps: [prompt, step-0, step-0, tool, step-1, tool, step-2]; an episode of two steps ends at position 5.
MASK3 = [0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0]
TURNS3 = [-1, 0, 0, 0, 1, 1, 2]
MASK2 = [0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0]
TURNS2 = [-1, 0, 0, 0, 1, 1, -1]


def make_step_batch(episodes):
    """episodes: (rewards per position, group, state per step); three rewards or states mean three steps."""
    rows = len(episodes)
    three = [len(states) == 3 for _, _, states in episodes]
    mask = torch.tensor([MASK3 if t else MASK2 for t in three])
    states = torch.full((rows, 3), -1, dtype=torch.long)
    for row, (_, _, keys) in enumerate(episodes):
        states[row, : len(keys)] = torch.tensor(keys)
    return TrainBatch(
        input_ids=torch.zeros((rows, 7), dtype=torch.long),
        attention_mask=torch.ones((rows, 7), dtype=torch.long),
        train_mask=mask,
        sampled_mask=mask,
        rollout_logprobs=torch.zeros((rows, 7)),
        token_rewards=torch.tensor([r for r, _, _ in episodes], dtype=torch.float),
        token_turns=torch.tensor([TURNS3 if t else TURNS2 for t in three]),
        group_ids=torch.tensor([g for _, g, _ in episodes]),
        turn_states=states,
    )


def per_step(adv, row, steps):
    """The advantage of each step of a row, checking that every token of a step has the same one."""
    values = []
    for k in range(steps):
        tokens = [adv[row, t].item() for t in range(7) if TURNS3[t] == k and MASK3[t]]
        assert max(tokens) - min(tokens) < 1e-6
        values.append(tokens[0])
    return values


# Group 0: A reaches s0 -> s1 -> s2 and succeeds; B's first call fails (s0 -> s0 -> s1) and it fails; C is cut
# after two steps (s0 -> s1), with its outcome on step 1. Group 1: one episode from a state called s0 as well.
S0, S1, S2 = 0, 1, 2
OUTCOME_ON_STEP_2 = [0, 0, 0, 0, 0, 0, 1]
OUTCOME_ON_STEP_1 = [0, 0, 0, 0, 1, 0, 0]
NOTHING = [0] * 7


def test_gigpo_adds_step_advantages_over_anchor_states_to_the_episode_advantage():
    batch = make_step_batch(
        [
            (OUTCOME_ON_STEP_2, 0, [S0, S1, S2]),
            (NOTHING, 0, [S0, S0, S1]),
            (OUTCOME_ON_STEP_1, 0, [S0, S1]),
            (OUTCOME_ON_STEP_2, 1, [S0, S1, S2]),
        ]
    )
    adv = advantages("gigpo", batch, AlgorithmConfig(norm_adv_by_std=False, gamma=0.5))
    # R = [1, 0, 1]: A^E = R - 2/3. Returns (gamma 0.5): A [.25, .5, 1], B [0, 0, 0], C [.5, 1].
    # s0 = {A0 .25, B0 0, B1 0, C0 .5}, mean .1875; s1 = {A1 .5, B2 0, C1 1}, mean .5; s2 = {A2}: one step, 0.
    assert per_step(adv, 0, 3) == pytest.approx([1 / 3 + 0.0625, 1 / 3 + 0.0, 1 / 3 + 0.0], abs=1e-5)
    assert per_step(adv, 1, 3) == pytest.approx([-2 / 3 - 0.1875, -2 / 3 - 0.1875, -2 / 3 - 0.5], abs=1e-5)
    assert per_step(adv, 2, 2) == pytest.approx([1 / 3 + 0.3125, 1 / 3 + 0.5], abs=1e-5)
    assert adv[2, 6].item() == 0.0  # past C's end
    assert not adv[3].any()  # group 1 has one episode, and its s0 is not group 0's
    assert not adv[:, [0, 3, 5]].any()  # prompt and tool tokens
    half = advantages("gigpo", batch, AlgorithmConfig(norm_adv_by_std=False, gamma=0.5, step_advantage_weight=0.5))
    assert per_step(half, 1, 3) == pytest.approx([-2 / 3 - 0.09375, -2 / 3 - 0.09375, -2 / 3 - 0.25], abs=1e-5)


def test_gigpo_with_process_rewards_and_std_normalisation():
    with_process = [0, 0, 0.5, 0, 0, 0, 1]  # A earns 0.5 on step 0
    batch = make_step_batch(
        [(with_process, 0, [S0, S1, S2]), (NOTHING, 0, [S0, S0, S1]), (OUTCOME_ON_STEP_1, 0, [S0, S1])]
    )
    adv = advantages("gigpo", batch, AlgorithmConfig(norm_adv_by_std=False))
    # R = [1.5, 0, 1], mean 5/6. Returns (gamma 1): A [1.5, 1, 1], B [0, 0, 0], C [1, 1].
    # s0 = {1.5, 0, 0, 1}, mean .625; s1 = {1, 0, 1}, mean 2/3.
    assert per_step(adv, 0, 3) == pytest.approx([2 / 3 + 0.875, 2 / 3 + 1 / 3, 2 / 3], abs=1e-5)
    assert per_step(adv, 1, 3) == pytest.approx([-5 / 6 - 0.625, -5 / 6 - 0.625, -5 / 6 - 2 / 3], abs=1e-5)
    assert per_step(adv, 2, 2) == pytest.approx([1 / 6 + 0.375, 1 / 6 + 1 / 3], abs=1e-5)
    normed = advantages("gigpo", batch, AlgorithmConfig())
    episode_std, s1_std = math.sqrt(((2 / 3) ** 2 + (5 / 6) ** 2 + (1 / 6) ** 2) / 3), math.sqrt(2 / 9)
    s0_std = math.sqrt((0.875**2 + 0.625**2 * 2 + 0.375**2) / 4)
    expected = 2 / 3 / episode_std + 0.875 / s0_std
    assert per_step(normed, 0, 3)[0] == pytest.approx(expected, rel=1e-4)
    assert per_step(normed, 1, 3)[2] == pytest.approx(-5 / 6 / episode_std - 2 / 3 / s1_std, rel=1e-4)


def test_gigpo_without_signal_is_zero_and_without_states_is_refused():
    same = make_step_batch([(OUTCOME_ON_STEP_2, 0, [S0, S1, S2]), (OUTCOME_ON_STEP_2, 0, [S0, S1, S2])])
    assert not advantages("gigpo", same, AlgorithmConfig()).any()
    stateless = make_batch([[0, 0, 0, 0, 1], [0, 0, 0, 0, 0]], [0, 0])
    with pytest.raises(ValueError, match="state"):
        advantages("gigpo", stateless, AlgorithmConfig())


def test_step_ppo_runs_gae_over_steps_with_values_read_at_each_steps_first_token():
    batch = make_step_batch([([0, 0, 0.5, 0, 0, 0, 1], 0, [S0, S1, S2]), (OUTCOME_ON_STEP_1, 1, [S0, S1])])
    nine = 9.0  # values at other positions are never read
    values = torch.tensor([[nine, 0.5, nine, nine, 0.2, nine, 0.8], [nine, 0.3, nine, nine, 0.4, nine, nine]])
    out = get_algorithm("step_ppo").compute_advantages(batch, AlgorithmConfig(gamma=0.9, lam=0.5), values=values)
    # row 0: r = [.5, 0, 1], V = [.5, .2, .8]: delta = [.18, .52, .2], A = [.18 + .45 * .61, .52 + .45 * .2, .2]
    assert per_step(out.advantages, 0, 3) == pytest.approx([0.4545, 0.61, 0.2], abs=1e-5)
    assert per_step(out.returns, 0, 3) == pytest.approx([0.9545, 0.81, 1.0], abs=1e-5)
    # row 1, cut after two steps: r = [0, 1], V = [.3, .4], nothing after: delta = [.06, .6], A = [.33, .6]
    assert per_step(out.advantages, 1, 2) == pytest.approx([0.33, 0.6], abs=1e-5)
    assert out.advantages[1, 6].item() == 0.0 and out.returns[1, 6].item() == 0.0
    assert not out.advantages[:, [0, 3, 5]].any()
    with pytest.raises(ValueError, match="critic"):
        get_algorithm("step_ppo").compute_advantages(batch, AlgorithmConfig())

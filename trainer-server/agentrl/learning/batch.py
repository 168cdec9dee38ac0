"""Episodes -> padded tensors for the learner.

Every per-token tensor is indexed like `input_ids`: entry t belongs to token t. A token's logprob
comes from the logits at t-1, so position 0 is never trained. `train_mask` is 1 on the tokens the
loss sees: the assistant's tokens (sampled, or demonstrated), plus tool/observation tokens in the no-mask ablation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agentrl.rollout.episode import Episode


@dataclass
class TrainBatch:
    input_ids: torch.Tensor  # [B, T] long, right padded
    attention_mask: torch.Tensor  # [B, T] long
    train_mask: torch.Tensor  # [B, T] float
    sampled_mask: torch.Tensor  # [B, T] float, 1 exactly on tokens the policy sampled (those with a rollout logprob)
    rollout_logprobs: torch.Tensor  # [B, T] float, 0 where not sampled
    token_rewards: torch.Tensor  # [B, T] float: process rewards at turn ends, outcome at the last sampled token
    token_turns: torch.Tensor  # [B, T] long: the turn of each token, -1 for the prompt and padding
    group_ids: torch.Tensor  # [B] long
    # [B, K] long: the state each turn started from (equal state keys, equal ids), -1 past the episode's last turn
    turn_states: torch.Tensor | None = None
    # [B] bool: the episodes algorithm.rft_where keeps (Episode.passes_filter)
    passes_filter: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def select(self, rows: slice | torch.Tensor) -> TrainBatch:
        return TrainBatch(**{name: None if value is None else value[rows] for name, value in vars(self).items()})


def collate(episodes: list[Episode], *, pad_id: int, train_on_tool_tokens: bool = False) -> TrainBatch:
    # At least one position: an agent's episode that failed before its first request has no token, and a step of
    # only such episodes is a batch whose rows train nothing (not one of width 0, which nothing can index).
    width = max(1, *(len(ep.token_ids) for ep in episodes))
    batch = len(episodes)
    input_ids = torch.full((batch, width), pad_id, dtype=torch.long)
    attention = torch.zeros((batch, width), dtype=torch.long)
    sampled = torch.zeros((batch, width))
    train = torch.zeros((batch, width))
    rollout_lp = torch.zeros((batch, width))
    rewards = torch.zeros((batch, width))
    turns = torch.full((batch, width), -1, dtype=torch.long)
    state_ids: dict[str, int] = {}
    states = torch.full((batch, max((len(ep.turns) for ep in episodes), default=0)), -1, dtype=torch.long)
    for row, ep in enumerate(episodes):
        for k, turn in enumerate(ep.turns):
            key = turn.state_key if turn.state_key is not None else f"{ep.sample}:{k}"  # unknown: a state of its own
            states[row, k] = state_ids.setdefault(key, len(state_ids))
        n = len(ep.token_ids)
        input_ids[row, :n] = torch.tensor(ep.token_ids)
        attention[row, :n] = 1
        assistant = torch.tensor(ep.loss_mask, dtype=torch.float)
        # Sampled: an assistant token the engine drew, with its logprob. A demonstration's tokens (sft) and a re-roll's
        # edited turn were written, not drawn: trained, but no rollout logprob to compare the learner's with.
        sampled[row, :n] = assistant * torch.tensor([lp is not None for lp in ep.rollout_logprobs], dtype=torch.float)
        non_prompt = torch.tensor([role != "prompt" for role in ep.token_roles], dtype=torch.float)
        train[row, :n] = non_prompt if train_on_tool_tokens else assistant
        rollout_lp[row, :n] = torch.tensor([lp if lp is not None else 0.0 for lp in ep.rollout_logprobs])
        rewards[row, :n] = torch.tensor(ep.token_rewards())
        turns[row, :n] = torch.tensor(ep.token_turns, dtype=torch.long)
    train[:, 0] = 0.0  # nothing predicts the first token
    groups = torch.tensor([ep.group for ep in episodes], dtype=torch.long)
    passes = torch.tensor([ep.passes_filter for ep in episodes], dtype=torch.bool)
    return TrainBatch(input_ids, attention, train, sampled, rollout_lp, rewards, turns, groups, states, passes)

"""What a rollout hands to the trainer and to the trajectory file.

An `Episode` is token-exact: `token_ids` is precisely what the model saw and generated,
in order. Every per-token list has the same length as `token_ids`. The algorithms read
the token arrays; the replay panel reads the turn records (see
`protocol/schemas/trajectory.schema.json`, produced by `Episode.to_record`). Nothing after the
rollout writes into an episode: the learner's advantages reach the trajectory file beside it
(`agentrl.run.runstore.record_episodes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from agentrl.environment.env import reward_problem
from agentrl.environment.tool import ToolCallRecord, cut_result

TRAJECTORY_SCHEMA_VERSION = 1
# A tool call's raw result is stored whole up to this many characters of JSON; a larger one is stored cut, with its
# full size and hash (`result_cut`): a Tool that returned 20 MB made a 320 MB step file. What the model read is the
# observation, cut to rollout.tool_output_tokens long before this.
RESULT_BUDGET_CHARS = 65_536

EpisodeStatus = Literal["finished", "truncated", "error"]
# prompt: the initial messages; assistant: tokens the policy sampled;
# tool: everything appended after a turn (tool responses and the template's turn markers), and the opening of a
# tool call that an agent's tool_choice forced before a turn's sampled ids (agent_capture.py).
TokenRole = Literal["prompt", "assistant", "tool"]


def stored_result(result: Any) -> dict[str, Any]:
    """`{"result": result}`, or for a result over RESULT_BUDGET_CHARS, its first RESULT_BUDGET_CHARS characters with
    `result_cut` ({chars, sha256} of the whole): the record says it was cut and what the whole was."""
    stored, cut = cut_result(result, RESULT_BUDGET_CHARS)
    return {"result": stored, **({"result_cut": cut} if cut else {})}


@dataclass
class TurnRecord:
    index: int
    assistant: str  # decoded text of this turn's generated tokens (display only; never re-encoded)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    observation: str | None = None  # the ToolEnv's next message: "what it means"
    process_reward: float = 0.0
    done: bool = False
    finish_reason: Literal["stop", "length", "context"] = "stop"
    parse_error: str | None = None  # a malformed tool call, as shown to the model
    state_key: str | None = None  # the state this turn started from (ToolEnv.state_key or the observation before it)
    valid_actions: list[str] | None = None  # the actions valid in that state, where the env lists them
    agent: str | None = None  # the agent that asked for the turn, where several share the policy (agentrl.agent)


@dataclass
class Episode:
    task_id: str
    group: int  # index of the prompt within the step
    sample: int  # index within the group
    prompt_messages: list[dict[str, Any]]
    tool_schemas: list[dict[str, Any]]
    token_ids: list[int] = field(default_factory=list)
    token_roles: list[TokenRole] = field(default_factory=list)
    token_turns: list[int] = field(default_factory=list)  # -1 for the prompt
    loss_mask: list[int] = field(default_factory=list)  # 1 exactly on sampled tokens
    rollout_logprobs: list[float | None] = field(default_factory=list)  # None where loss_mask is 0
    turn_end_positions: list[int] = field(default_factory=list)  # index of each turn's last sampled token
    turns: list[TurnRecord] = field(default_factory=list)
    outcome_reward: float = 0.0
    reward_breakdown: dict[str, float] = field(default_factory=dict)
    status: EpisodeStatus = "finished"
    status_reason: str | None = None  # e.g. max_turns, max_context, env_error
    final_answer: str | None = None
    tool_servers: dict[str, str] = field(default_factory=dict)  # MCP tools only: tool name -> server name
    # Whether algorithm.rft_where keeps it (run/episode_filters.py): rft imitates no episode that fails the filter.
    passes_filter: bool = True

    def append_tokens(self, ids: list[int], role: TokenRole, turn: int, logprobs: list[float] | None = None) -> None:
        """Ids appended as produced; loss mask 1 exactly on the sampled (assistant) ones, which alone have logprobs."""
        self.token_ids.extend(ids)
        self.token_roles.extend([role] * len(ids))
        self.token_turns.extend([turn] * len(ids))
        self.loss_mask.extend([1 if role == "assistant" else 0] * len(ids))
        self.rollout_logprobs.extend(logprobs if logprobs is not None else [None] * len(ids))

    @property
    def process_rewards(self) -> list[float]:
        return [t.process_reward for t in self.turns]

    @property
    def total_reward(self) -> float:
        return self.outcome_reward + sum(self.process_rewards)

    @property
    def response_length(self) -> int:
        return sum(self.loss_mask)

    def unusable_rewards(self, from_agent: bool, max_abs: float) -> list[str]:
        """Each reward the update cannot take (`reward_problem`: NaN, infinite, beyond ±`max_abs`), named with
        where it came from for the message that reports it: the outcome and its breakdown from the env's score() or
        the agent's reward function, each turn's process reward from the env's step() or the agent's
        agentrl.process_reward (the endpoint adds up a turn's)."""
        outcome, process = (
            ("the agent's reward function", "the agent's agentrl.process_reward")
            if from_agent
            else ("the env's score()", "the env's step()")
        )
        named = [(f"the outcome reward from {outcome}", self.outcome_reward)]
        named += [
            (f"the reward breakdown's {key!r} from {outcome}", value) for key, value in self.reward_breakdown.items()
        ]
        named += [
            (f"the process reward of turn {turn.index} from {process}", turn.process_reward) for turn in self.turns
        ]
        return [problem for name, value in named if (problem := reward_problem(value, name, max_abs)) is not None]

    def token_rewards(self) -> list[float]:
        """Per-token rewards: each turn's process reward on its last sampled token, the outcome
        reward on the episode's last sampled token (docs/token-pipeline.md, rule 4)."""
        rewards = [0.0] * len(self.token_ids)
        for turn, pos in zip(self.turns, self.turn_end_positions):
            rewards[pos] += turn.process_reward
        if self.turn_end_positions:
            rewards[self.turn_end_positions[-1]] += self.outcome_reward
        return rewards

    def step_returns(self) -> list[float]:
        """Per turn: the reward still to come from it (its own and later turns' process rewards, and the outcome)."""
        to_go, returns = self.outcome_reward, []
        for turn in reversed(self.turns):
            to_go += turn.process_reward
            returns.append(to_go)
        return returns[::-1]

    def step_advantages(self, advantages: list[float | None]) -> list[float | None]:
        """Per turn: the mean advantage the update gave the turn's sampled tokens (None where it gave none). A
        step-level algorithm (gigpo, step_ppo) gives every token of a turn the same one."""
        sums: dict[int, list[float]] = {}
        for turn, sampled, advantage in zip(self.token_turns, self.loss_mask, advantages):
            if sampled and advantage is not None:
                sums.setdefault(turn, []).append(advantage)
        return [sum(sums[t.index]) / len(sums[t.index]) if t.index in sums else None for t in self.turns]

    def check_invariants(self) -> None:
        n = len(self.token_ids)
        for name in ("token_roles", "token_turns", "loss_mask", "rollout_logprobs"):
            if len(getattr(self, name)) != n:
                raise AssertionError(f"episode {self.task_id}: {name} has {len(getattr(self, name))} entries, ids {n}")
        for i, (role, mask) in enumerate(zip(self.token_roles, self.loss_mask)):
            if mask != (role == "assistant"):
                raise AssertionError(f"episode {self.task_id}: token {i} role {role} has loss_mask {mask}")

    def to_record(
        self,
        *,
        run_id: str,
        step: int,
        decode_token: Any,
        advantages: list[float | None] | None = None,
        token_figures: dict[str, list[float | None]] | None = None,
    ) -> dict[str, Any]:
        """The trajectory record (protocol/schemas/trajectory.schema.json). `decode_token(id) -> str`; `advantages`:
        the update's, one per token (None where untrained, and everywhere for an episode nothing learned from);
        `token_figures`: what the learner read of each token (`Update.token_figures`), absent without an update."""
        advantages = advantages or [None] * len(self.token_ids)
        seq_adv = [a for a, m in zip(advantages, self.loss_mask) if m and a is not None]
        tool_calls = [c for t in self.turns for c in t.tool_calls]
        step_advantages = self.step_advantages(advantages)
        step_returns = self.step_returns()
        return {
            "schema_version": TRAJECTORY_SCHEMA_VERSION,
            "id": trajectory_id(step, self),
            "run_id": run_id,
            "step": step,
            "group": self.group,
            "sample": self.sample,
            "task_id": self.task_id,
            "status": self.status,
            "status_reason": self.status_reason,
            "reward": self.total_reward,
            "outcome_reward": self.outcome_reward,
            "reward_breakdown": dict(self.reward_breakdown),
            "advantage": (sum(seq_adv) / len(seq_adv)) if seq_adv else None,
            "final_answer": self.final_answer,
            "prompt": self.prompt_messages,
            "tools": self.tool_schemas,
            **({"tool_servers": dict(self.tool_servers)} if self.tool_servers else {}),
            "turns": [
                {
                    "index": t.index,
                    "assistant": t.assistant,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "name": c.name,
                            "arguments": c.arguments,
                            "raw": c.raw,
                            **stored_result(c.result),
                            "error": c.error,
                            "error_kind": c.error_kind,
                            "latency_ms": c.latency_ms,
                        }
                        for c in t.tool_calls
                    ],
                    "observation": t.observation,
                    "process_reward": t.process_reward,
                    "done": t.done,
                    "finish_reason": t.finish_reason,
                    "parse_error": t.parse_error,
                    "state_key": t.state_key,
                    **({"valid_actions": list(t.valid_actions)} if t.valid_actions is not None else {}),
                    **({"agent": t.agent} if t.agent is not None else {}),
                    "step_return": step_returns[k],
                    "step_advantage": step_advantages[k],
                }
                for k, t in enumerate(self.turns)
            ],
            "stats": {
                "num_turns": len(self.turns),
                "num_tool_calls": len(tool_calls),
                "num_tool_errors": sum(1 for c in tool_calls if c.error),
                "response_tokens": self.response_length,
                "total_tokens": len(self.token_ids),
            },
            "tokens": {
                "ids": list(self.token_ids),
                "text": [decode_token(i) for i in self.token_ids],
                "role": list(self.token_roles),
                "turn": list(self.token_turns),
                "loss_mask": list(self.loss_mask),
                "logprob": list(self.rollout_logprobs),
                "advantage": list(advantages),
                **(token_figures or {}),
            },
        }


def trajectory_id(step: int, episode: Episode) -> str:
    """The id of an episode's trajectory record: unique in its run."""
    return f"{step}-{episode.group}-{episode.sample}"


def episode_from_record(record: dict[str, Any]) -> Episode:
    """The Episode a trajectory record was made from (`Episode.to_record`), token-exact: its token arrays as recorded,
    its turns with their tool calls. ValueError saying what is missing or wrong in a damaged record."""
    try:
        tokens = record["tokens"]
        episode = Episode(
            task_id=str(record["task_id"]),
            group=int(record["group"]),
            sample=int(record["sample"]),
            prompt_messages=list(record["prompt"]),
            tool_schemas=list(record["tools"]),
            token_ids=[int(i) for i in tokens["ids"]],
            token_roles=list(tokens["role"]),
            token_turns=[int(t) for t in tokens["turn"]],
            loss_mask=[int(m) for m in tokens["loss_mask"]],
            rollout_logprobs=[None if lp is None else float(lp) for lp in tokens["logprob"]],
            turns=[
                TurnRecord(
                    index=int(turn["index"]),
                    assistant=str(turn["assistant"]),
                    tool_calls=[
                        ToolCallRecord(
                            id=call["id"],
                            name=call["name"],
                            arguments=call["arguments"],
                            raw=call["raw"],
                            result=call.get("result"),
                            error=call.get("error"),
                            error_kind=call.get("error_kind"),
                            latency_ms=float(call.get("latency_ms", 0.0)),
                        )
                        for call in turn["tool_calls"]
                    ],
                    observation=turn.get("observation"),
                    process_reward=float(turn.get("process_reward", 0.0)),
                    done=bool(turn.get("done", False)),
                    finish_reason=turn.get("finish_reason", "stop"),
                    parse_error=turn.get("parse_error"),
                    state_key=turn.get("state_key"),
                    valid_actions=turn.get("valid_actions"),
                    agent=turn.get("agent"),
                )
                for turn in record["turns"]
            ],
            outcome_reward=float(record["outcome_reward"]),
            reward_breakdown={str(k): float(v) for k, v in record.get("reward_breakdown", {}).items()},
            status=record["status"],
            status_reason=record.get("status_reason"),
            final_answer=record.get("final_answer"),
            tool_servers=dict(record.get("tool_servers", {})),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        missing = f"no {err.args[0]!r}" if isinstance(err, KeyError) else str(err)
        raise ValueError(f"not a whole trajectory record: {missing}") from None
    try:
        episode.check_invariants()
    except AssertionError as err:
        raise ValueError(str(err)) from None
    ends: dict[int, int] = {}
    for position, (role, turn) in enumerate(zip(episode.token_roles, episode.token_turns)):
        if role == "assistant":
            ends[turn] = position  # the last sampled token of each turn
    episode.turn_end_positions = [ends[t.index] for t in episode.turns if t.index in ends]
    return episode


def learned_from_turn(episode: Episode, first: int) -> Episode:
    """The episode learned from turn `first` onward: every token before that turn (the prompt, the earlier turns'
    sampled tokens and what they were told back) becomes the prompt, as context that is never trained; the turns
    from `first` keep their tokens and records, numbered from 0. ValueError when the episode has no such turn."""
    if first == 0:
        return episode
    if not 0 < first < len(episode.turns):
        raise ValueError(
            f"from_turn {first}: the episode has {len(episode.turns)} turns (0 to {len(episode.turns) - 1})"
        )
    context = next(position for position, turn in enumerate(episode.token_turns) if turn >= first)
    return replace(
        episode,
        token_roles=["prompt"] * context + episode.token_roles[context:],
        token_turns=[-1] * context + [turn - first for turn in episode.token_turns[context:]],
        loss_mask=[0] * context + episode.loss_mask[context:],
        rollout_logprobs=[None] * context + episode.rollout_logprobs[context:],
        turns=[replace(turn, index=turn.index - first) for turn in episode.turns[first:]],
        turn_end_positions=episode.turn_end_positions[first:],
    )

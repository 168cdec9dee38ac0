"""The episode loop every rollout engine shares: start each episode from its ToolEnv, record each turn an engine
samples, run the turn's tool calls, let the ToolEnv say what they mean, append the observation, score the end.

An engine (hf_engine.py, vllm_engine.py, scripted.py) only samples: it subclasses `RolloutEngine` and writes
`_roll`, which plays a step's episodes to their end with the functions here. The training sequence is the prompt
ids, the sampled ids and each observation's ids, appended as produced (`RolloutEngine._append`).

Logprob convention, shared with the learner: log_softmax(logits / temperature) for temperature > 0;
log_softmax(logits) for greedy decoding.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from agentrl.contract.training_config import RolloutConfig
from agentrl.environment.env import EnvFull, ToolEnv, as_reward
from agentrl.environment.mcp import McpTool
from agentrl.environment.tool import Tool, ToolRunner, execute_calls, run_in_thread
from agentrl.environment.toolcall import ToolCallFormat, get_format, schemas_by_name
from agentrl.environment.toolprocess import ToolWorker
from agentrl.rollout.branch import BranchPoint, PrefixDiverged, turn_ends
from agentrl.rollout.chat import ChatFormat
from agentrl.rollout.episode import Episode, TokenRole, TurnRecord

# How a row's turn ended: the model's end-of-turn token, a closed tool call (rollout.stop_at_tool_call),
# or the token limit of the turn.
TurnEnd = Literal["eos", "call_end", "limit"]

# What an engine calls with (episodes ended, episodes in all) as a step's episodes end: the run's progress events
# (agentrl/run/progress.py). How often depends on the engine: after each turn of a batch, or as each episode ends.
EpisodeCounter = Callable[[int, int], None]


def count_nothing(done: int, total: int) -> None:
    """The EpisodeCounter of a rollout no one follows (an evaluation, a rollout worker's share)."""


def episode_seed(seed: int, group: int, sample: int) -> int:
    """The seed of one episode's sampling: a function of the step's seed and the episode's place in the step
    alone, so an episode samples the same tokens whichever batch, worker or engine call it lands in (a step
    split across rollout workers gives the single-process run's episodes)."""
    return (seed * 1_000_003 + group * 10_007 + sample) & 0x7FFF_FFFF_FFFF_FFFF


def rollout_seed(seed: int, step: int) -> int:
    """The seed of a run's rollout at `step` (its episodes' are `episode_seed` of it), from the run's `seed`: a training
    step's own; a Try run's and an evaluation's (step 0) the run's seed itself."""
    return seed * 1_000_003 + step if step > 0 else seed


def task_id_of(task: dict[str, Any]) -> str:
    for key in ("id", "_id", "task_id"):
        if key in task:
            return str(task[key])
    return hashlib.sha1(json.dumps(task, sort_keys=True, default=str).encode()).hexdigest()[:12]


@dataclass
class LiveEpisode:
    """One episode in flight."""

    episode: Episode
    env: ToolEnv
    tools: dict[str, Tool]
    tool_schemas: dict[str, dict[str, Any]] = field(default_factory=dict)  # by tool name, for the call format
    finished: bool = False
    pending_messages: list[dict[str, Any]] = field(default_factory=list)
    cut_tool_output: Callable[[str], str] | None = None  # token budget; scripted episodes have none
    run_tool: ToolRunner = run_in_thread  # or a ToolWorker's runner (rollout.tool_isolation: process)
    state_key: str = ""  # the state the next turn starts from (ToolEnv.state_key)
    valid_actions: list[str] | None = None  # the actions valid in that state (ToolEnv.valid_actions)
    task: dict[str, Any] | None = None  # what the env was reset with (a tool worker's env is reset with it too)


# The state key of a first turn whose env names none: every episode of a group starts from the same prompt.
START_STATE = "start"


def next_state_key(env: ToolEnv, observation: str | None) -> str:
    """The env's own key for the state the next turn starts from, or the observation that stands for it."""
    key = env.state_key()
    if key is not None:
        return str(key)
    return START_STATE if observation is None else observation


def start_episode(env: ToolEnv, task: dict[str, Any], group: int, sample: int, seed: int = 0) -> LiveEpisode:
    """`seed`: the episode's own (`episode_seed`), for the env's randomness."""
    episode = Episode(task_id=task_id_of(task), group=group, sample=sample, prompt_messages=[], tool_schemas=[])
    live = LiveEpisode(episode=episode, env=env, tools={}, task=task)
    try:
        env.episode_seed = seed
        episode.prompt_messages = list(env.reset(task))
        # After reset: an env may set its tools there (an adapter's `act`, an env object's methods).
        live.tools = env.tool_map()
        episode.tool_schemas = [t.schema() for t in env.tools]
        episode.tool_servers = {t.name: t.server for t in env.tools if isinstance(t, McpTool)}
        live.tool_schemas = schemas_by_name(episode.tool_schemas)
        live.state_key = next_state_key(env, None)
        live.valid_actions = env.valid_actions()
    except EnvFull:
        raise
    except Exception as err:  # noqa: BLE001 - a broken env ends this episode, not the run
        fail_episode(live, f"env_error: reset raised {type(err).__name__}: {err}")
    return live


def _contents(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages)


def fail_episode(live: LiveEpisode, reason: str) -> None:
    live.episode.status, live.episode.status_reason, live.finished = "error", reason, True


def truncate_episode(live: LiveEpisode, reason: str) -> None:
    live.episode.status, live.episode.status_reason, live.finished = "truncated", reason, True


async def interpret_turn(live: LiveEpisode, text: str, call_format: ToolCallFormat, rollout_cfg: RolloutConfig) -> None:
    """Parse the turn's calls, run them, and let the ToolEnv say what they mean."""
    turn = live.episode.turns[-1]
    turn.state_key, turn.valid_actions = live.state_key, live.valid_actions
    try:
        parsed = call_format.parse(text, f"call-{turn.index}", live.tool_schemas)
    except ValueError as err:  # the env's tools cannot be written in this format: the env's bug, not the model's
        fail_episode(live, f"env_error: {err}")
        return
    turn.parse_error = parsed.error
    turn.tool_calls = await execute_calls(parsed.calls, live.tools, rollout_cfg.tool_timeout_s, live.run_tool)
    try:
        result = live.env.step(text, turn.tool_calls)
    except Exception as err:  # noqa: BLE001
        fail_episode(live, f"env_error: step raised {type(err).__name__}: {err}")
        return
    try:  # a NaN or huge number is stored: the trainer screens it (Episode.unusable_rewards, train.non_finite_rewards)
        turn.process_reward = as_reward(result.reward, "step()'s reward")
    except ValueError as err:
        fail_episode(live, f"env_error: {err}")
        return
    turn.done = bool(result.done)
    messages = list(result.messages)
    if live.cut_tool_output is not None:
        messages = [
            {**m, "content": live.cut_tool_output(str(m["content"]))} if m.get("role") == "tool" else m
            for m in messages
        ]
    turn.observation = _contents(messages) if messages else None
    live.pending_messages = messages
    try:
        live.state_key = next_state_key(live.env, turn.observation or "")
        live.valid_actions = live.env.valid_actions()
    except Exception as err:  # noqa: BLE001
        fail_episode(live, f"env_error: state_key raised {type(err).__name__}: {err}")
        return
    if turn.done:
        live.finished = True


def score_episode(live: LiveEpisode) -> None:
    """Score the ended episode, then let its env go (ToolEnv.close), whatever the score did."""
    episode = live.episode
    final_text = episode.turns[-1].assistant if episode.turns else ""
    try:
        score = live.env.score(final_text)
    except Exception as err:  # noqa: BLE001
        if episode.status != "error":
            episode.status, episode.status_reason = "error", f"env_error: score raised {type(err).__name__}: {err}"
    else:
        try:  # as a step's reward: a NaN or huge number is stored, for the trainer to screen
            episode.outcome_reward = as_reward(score.reward, "score()'s reward")
            episode.reward_breakdown = {
                k: as_reward(v, f"score()'s breakdown {k!r}") for k, v in score.breakdown.items()
            }
        except ValueError as err:
            if episode.status != "error":
                episode.status, episode.status_reason = "error", f"env_error: {err}"
        episode.final_answer = score.final_answer
    try:
        live.env.close()
    except Exception as err:  # noqa: BLE001
        if episode.status != "error":
            episode.status, episode.status_reason = "error", f"env_error: close raised {type(err).__name__}: {err}"


def run_tools_in(worker: ToolWorker, lives: list[LiveEpisode]) -> list[int]:
    """These episodes' Tool calls go to the worker process; returns their ids there, to release at the end."""
    episodes = [worker.new_episode(live.task, live.env.episode_seed) for live in lives]
    for live, episode in zip(lives, episodes, strict=True):
        live.run_tool = worker.runner(episode)
    return episodes


class SamplingSettings:
    """An engine's sampling settings (`cfg`, the run's rollout section), which an evaluation switches to greedy."""

    cfg: RolloutConfig

    @contextmanager
    def greedy(self) -> Iterator[None]:
        """Sample at temperature 0 inside the block: a held-out evaluation during training (trainer.evaluate_heldout).
        The caller makes sure no other rollout runs meanwhile."""
        sampling = self.cfg
        self.cfg = sampling.model_copy(update={"temperature": 0.0})
        try:
            yield
        finally:
            self.cfg = sampling


class RolloutEngine(SamplingSettings, ABC):
    """What every rollout engine does around its sampling: a step's episodes started from their ToolEnvs, their
    prompts tokenised, each turn recorded, its tools run, its observation appended, each episode scored; the tool
    worker process (rollout.tool_isolation: process). An engine writes `_roll`."""

    description: str  # the engine's name in the run's metrics and messages (hf, vllm, scripted)
    shares_policy_weights: bool  # True: samples from the very model object the learner trains

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        env_factory: Callable[[], ToolEnv],
        rollout_cfg: RolloutConfig,
        device: torch.device,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.env_factory = env_factory
        self.cfg = rollout_cfg
        self.device = device
        self.call_format = get_format(rollout_cfg.tool_format)
        self.chat = ChatFormat(tokenizer, rollout_cfg.tool_output_tokens, self.call_format)
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id
        self.last_stats: dict[str, float] = {}
        self.tool_worker = ToolWorker(env_factory) if rollout_cfg.tool_isolation == "process" else None

    def run(
        self,
        tasks: list[dict[str, Any]],
        group_size: int,
        seed: int,
        first_group: int = 0,
        on_episode_end: EpisodeCounter = count_nothing,
    ) -> list[Episode]:
        """Group `first_group + i` is `group_size` episodes of `tasks[i]`; each samples from its own
        `episode_seed(seed, group, sample)`, so a step's episodes do not depend on how its groups are split. An env
        with no room for another episode now (EnvFull: a server whose sessions this process's episodes hold) has the
        episodes started so far played to their end first, in waves, which changes none of them."""
        wanted = [(task, first_group + g, s) for g, task in enumerate(tasks) for s in range(group_size)]
        total, episodes, waves_time_s = len(wanted), [], 0.0
        while wanted:
            lives = self._start_wave(wanted, seed)
            wanted = wanted[len(lives) :]
            done_before = len(episodes)
            episodes += self.play(
                lives,
                seed,
                self.isolate(lives),
                lambda done, _, before=done_before: on_episode_end(before + done, total),
            )
            waves_time_s += self.last_stats["perf/rollout_time_s"]
        if waves_time_s > self.last_stats.get("perf/rollout_time_s", 0.0):  # several waves: the step's figures
            generated = sum(episode.response_length for episode in episodes)
            self.last_stats.update(
                {"perf/rollout_time_s": waves_time_s, "perf/rollout_tokens_per_s": generated / waves_time_s}
            )
        return episodes

    def _start_wave(self, wanted: list[tuple[dict[str, Any], int, int]], seed: int) -> list[LiveEpisode]:
        """Start the wanted episodes in order until the env is full (at least one: an env full with none of this
        wave's started fails that episode, with the env's reason)."""
        lives: list[LiveEpisode] = []
        for task, group, sample in wanted:
            env = self.env_factory()
            try:
                live = start_episode(env, task, group, sample, episode_seed(seed, group, sample))
            except EnvFull as full:
                if lives:
                    break
                live = LiveEpisode(
                    episode=Episode(
                        task_id=task_id_of(task), group=group, sample=sample, prompt_messages=[], tool_schemas=[]
                    ),
                    env=env,
                    tools={},
                    task=task,
                )
                fail_episode(live, f"env_error: the env is full with no other episode running: {full}")
            lives.append(live)
        for live in lives:
            if not live.finished:
                self._append(
                    live, self.chat.prompt(live.episode.prompt_messages, live.episode.tool_schemas), "prompt", -1
                )
                if len(live.episode.token_ids) >= self.cfg.max_context:
                    truncate_episode(live, "prompt_over_max_context")  # no room left for a single generated token
            live.cut_tool_output = self.chat.cut_to_budget
        if lives and all(live.episode.status_reason == "prompt_over_max_context" for live in lives):
            # Training on this batch would update on nothing and still call the run complete.
            shortest = min(len(live.episode.token_ids) for live in lives)
            raise ValueError(
                f"every prompt is longer than rollout.max_context ({shortest} tokens or more, "
                f"the tool schemas included; max_context is {self.cfg.max_context}): "
                "raise rollout.max_context or shorten the prompts"
            )
        return lives

    def isolate(self, lives: list[LiveEpisode]) -> list[int]:
        """From here on these episodes' Tool calls run in the tool worker process (rollout.tool_isolation: process);
        returns their ids there, for `play` to release."""
        return run_tools_in(self.tool_worker, lives) if self.tool_worker is not None else []

    def play(
        self,
        lives: list[LiveEpisode],
        seed: int,
        isolated: list[int],
        on_episode_end: EpisodeCounter = count_nothing,
    ) -> list[Episode]:
        """Play started episodes to their end and score them: a step's from their prompts, a re-roll's from the turn
        it branches at (rollout/branch.py): each episode's next turn is the one after its recorded turns."""
        started, generated = time.perf_counter(), 0
        engine_stats = self._roll(lives, seed, on_episode_end)
        for live in lives:
            score_episode(live)
            generated += live.episode.response_length
        if self.tool_worker is not None:
            self.tool_worker.release(isolated)
        elapsed = time.perf_counter() - started
        self.last_stats = {
            "perf/rollout_tokens_per_s": generated / elapsed if elapsed > 0 else 0.0,
            "perf/rollout_time_s": elapsed,
            **engine_stats,
        }
        return [live.episode for live in lives]

    def restart(
        self, record: dict[str, Any], task: dict[str, Any], point: BranchPoint, text: str, samples: int, env_seed: int
    ) -> tuple[list[LiveEpisode], list[int], list[dict[str, Any]]]:
        """`samples` episodes started again at a branch of a recorded one (rollout/branch.py), ready for `play`: each
        keeps the record's tokens up to the branch, has a fresh env (reset with `task` and the recorded episode's
        `env_seed`) brought there by playing the recorded turns through it (`interpret_turn`: Tools run again, in the
        run's isolation), and the edit put in. Returns them, their ids in the tool worker, and where the env now
        answered otherwise than recorded ({turn, recorded, now}; turn None: the prompt): a stochastic or external Tool
        may, which changes the env's state but never the kept tokens (nor the turn's observation, which says what the
        model read)."""
        lives = [start_episode(self.env_factory(), task, record["group"], s, env_seed) for s in range(samples)]
        for live in lives:
            if live.finished:
                raise PrefixDiverged(f"the env cannot start the episode again: {live.episode.status_reason}")
        kept = point.kept(text)
        edited = kept == point.keep_edited
        # By turn (None: the prompt), what the first sample to get there found; samples replay concurrently.
        differences: dict[int | None, dict[str, Any]] = {}

        def differs(turn: int | None, recorded: str | None, now: str | None) -> None:
            differences.setdefault(turn, {"turn": turn, "recorded": recorded, "now": now})

        async def replay(live: LiveEpisode) -> None:
            episode, tokens = live.episode, record["tokens"]
            if episode.prompt_messages != record["prompt"]:
                differs(None, _contents(record["prompt"]), _contents(episode.prompt_messages))
            episode.prompt_messages, episode.tool_schemas = record["prompt"], record["tools"]
            episode.token_ids, episode.token_roles = tokens["ids"][:kept], tokens["role"][:kept]
            episode.token_turns, episode.loss_mask = tokens["turn"][:kept], tokens["loss_mask"][:kept]
            episode.rollout_logprobs, episode.turn_end_positions = tokens["logprob"][:kept], turn_ends(record, kept)
            live.cut_tool_output = self.chat.cut_to_budget
            for index, recorded in enumerate(record["turns"][: point.turn + 1]):
                text_now = recorded["assistant"]
                if index == point.turn and point.edit == "assistant":
                    text_now = text
                    if edited:  # the edited turn is context, never sampled: no logprobs
                        self._append(live, self.chat.encode(text), "assistant", index)
                        episode.turn_end_positions.append(len(episode.token_ids) - 1)
                finish = "stop" if text_now != recorded["assistant"] else recorded["finish_reason"]
                episode.turns.append(TurnRecord(index=index, assistant=text_now, finish_reason=finish))
                await interpret_turn(live, text_now, self.call_format, self.cfg)
                if index == point.turn and point.edit == "assistant":
                    break  # its observation is the env's answer to the edit, appended below
                if live.finished:
                    raise PrefixDiverged(
                        f"playing the recorded turn {index} again, the env ended the episode "
                        f"({episode.status_reason or 'done'}), which it had not when the episode was recorded"
                    )
                if episode.turns[index].observation != recorded["observation"]:
                    differs(index, recorded["observation"], episode.turns[index].observation)
                episode.turns[index].observation = recorded["observation"]
            ended_with_eos = episode.token_ids[episode.turn_end_positions[-1]] == self.eos_id
            if point.edit == "assistant":
                self._observe(live, point.turn, ended_with_eos)
            elif edited:  # the edit in place of the env's messages: one message, of the role its first one has
                live.pending_messages = [{**(live.pending_messages[:1] or [{"role": "tool"}])[0], "content": text}]
                self._observe(live, point.turn, ended_with_eos)
                episode.turns[point.turn].observation = text

        isolated = self.isolate(lives)

        async def replay_all() -> None:
            await asyncio.gather(*(replay(live) for live in lives))

        asyncio.run(replay_all())
        in_turn_order = sorted(differences.values(), key=lambda d: -1 if d["turn"] is None else d["turn"])
        return lives, isolated, in_turn_order

    def _append(
        self, live: LiveEpisode, ids: list[int], role: TokenRole, turn: int, logprobs: list[float] | None = None
    ) -> None:
        live.episode.append_tokens(ids, role, turn, logprobs)

    def weights_updated(self) -> None:  # noqa: B027 - a hook: an engine with its own weights writes it
        """The learner changed the policy's weights. This engine samples from the learner's own model object,
        so its next rollout already uses them; an engine with its own copy marks that copy stale."""

    def sync_weights(self) -> None:  # noqa: B027 - a hook, as weights_updated
        """Bring the engine's copy of the weights up to date now, if it has one and it is stale (else the next
        rollout does). Call it from the thread that trains, while no update runs."""

    def close(self) -> None:
        """Release what the engine holds beyond the policy: the tool worker process, the vLLM engine's processes."""
        if self.tool_worker is not None:
            self.tool_worker.close()

    @abstractmethod
    def _roll(self, lives: list[LiveEpisode], seed: int, on_episode_end: EpisodeCounter) -> dict[str, float]:
        """Play the episodes to their end, telling `on_episode_end` as they end; returns the engine's own figures for
        the step's metrics."""

    def _end_turn(
        self, live: LiveEpisode, turn_index: int, ids: list[int], logprobs: list[float], end: TurnEnd, limit: int
    ) -> str:
        """Record a turn's sampled tokens; returns its text, for the tool-call parser."""
        self._append(live, ids, "assistant", turn_index, logprobs)
        live.episode.turn_end_positions.append(len(live.episode.token_ids) - 1)
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        finish = "stop" if end != "limit" else ("length" if limit == self.cfg.max_new_tokens else "context")
        live.episode.turns.append(TurnRecord(index=turn_index, assistant=text, finish_reason=finish))
        return text

    def _observe(self, live: LiveEpisode, turn_index: int, turn_ended_with_eos: bool) -> None:
        """After the ToolEnv read the turn: append the observation, or end the episode if it has no room."""
        if live.finished:
            return
        if live.episode.turns[-1].finish_reason == "context":
            truncate_episode(live, "max_context")
            return
        observation = self.chat.observation(live.pending_messages, turn_ended_with_eos)
        if len(live.episode.token_ids) + len(observation) >= self.cfg.max_context:
            truncate_episode(live, "max_context")
            return
        self._append(live, observation, "tool", turn_index)

    def _turn_limit(self, live: LiveEpisode) -> int | None:
        """How many tokens the episode's next turn may sample; None (and the episode truncated) if none."""
        room = self.cfg.max_context - len(live.episode.token_ids)
        if room <= 0:
            truncate_episode(live, "max_context")
            return None
        return min(self.cfg.max_new_tokens, room)

    def _call_ends(self, live: LiveEpisode) -> list[str]:
        if not self.cfg.stop_at_tool_call or not live.tool_schemas:
            return []
        return self.call_format.call_end(live.tool_schemas)

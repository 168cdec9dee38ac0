"""The rollout engine: many multi-turn episodes at once, token-exact.

Per turn, every active episode is generated in one left-padded batch with a KV cache; then the
tool calls of all episodes run concurrently; then each ToolEnv reads its outcomes. The training
sequence is the prompt ids, the sampled ids and each observation's ids, appended as produced:
an observation is rendered by the chat template as a chunk and tokenized alone; generated text is
never decoded and encoded again (docs/token-pipeline.md, rule 1).

Logprob convention, shared with the learner: log_softmax(logits / temperature) for temperature > 0;
log_softmax(logits) for greedy decoding.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import torch

from agentrl.environment.env import ToolEnv
from agentrl.environment.mcp import McpTool
from agentrl.environment.tool import Tool, ToolRunner, execute_calls, run_in_thread
from agentrl.environment.toolcall import ToolCallFormat, get_format, schemas_by_name
from agentrl.environment.toolprocess import ToolWorker
from agentrl.rollout.episode import Episode, TurnRecord
from agentrl.rollout.prefix import MIN_SHARED_PREFIX, shared_prefix_cache
from agentrl.run.config import RolloutConfig

if TYPE_CHECKING:
    from agentrl.rollout.scripted import ScriptedPolicy

_PLACEHOLDER = "AGENTRL_ASSISTANT_TURN_PLACEHOLDER"
# How a row's turn ended: the model's end-of-turn token, a closed tool call (rollout.stop_at_tool_call),
# or the token limit of the turn.
TurnEnd = Literal["eos", "call_end", "limit"]


def episode_seed(seed: int, group: int, sample: int) -> int:
    """The seed of one episode's sampling: a function of the step's seed and the episode's place in the step
    alone, so an episode samples the same tokens whichever batch, worker or engine call it lands in (a step
    split across rollout workers gives the single-process run's episodes)."""
    return (seed * 1_000_003 + group * 10_007 + sample) & 0x7FFF_FFFF_FFFF_FFFF


def task_id_of(task: dict[str, Any]) -> str:
    for key in ("id", "_id", "task_id"):
        if key in task:
            return str(task[key])
    return hashlib.sha1(json.dumps(task, sort_keys=True, default=str).encode()).hexdigest()[:12]


# No tokenizer we know of has a vocabulary entry longer than this many characters.
MAX_CHARS_PER_TOKEN = 64


class ChatFormat:
    """Turns messages into token ids with the tokenizer's own chat template."""

    def __init__(self, tokenizer: Any, tool_output_tokens: int, call_format: ToolCallFormat) -> None:
        self.tokenizer = tokenizer
        self.call_format = call_format
        self.tool_output_tokens = tool_output_tokens
        self.eos_text = tokenizer.eos_token or ""

    def _render(self, messages: list[dict[str, Any]], *, tools: list[dict] | None = None, gen: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tools=tools or None, tokenize=False, add_generation_prompt=gen
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt(self, messages: list[dict[str, Any]], tool_schemas: list[dict[str, Any]]) -> list[int]:
        if not tool_schemas:
            return self.encode(self._render(messages, gen=True))
        if self.call_format.uses_template_tools:
            with_tools = self._render(messages, tools=tool_schemas, gen=True)
            if with_tools != self._render(messages, gen=True):
                return self.encode(with_tools)
        # The template ignores `tools`, or the format is not the template's: describe them in the system message.
        described = _with_system_text(messages, self.call_format.describe(schemas_by_name(tool_schemas)))
        return self.encode(self._render(described, gen=True))

    def cut_to_budget(self, content: str) -> str:
        """Tool output budgets are counted in tokens (docs/token-pipeline.md, rule 7). Only a prefix that surely holds
        the budget is tokenized, so a tool that returns megabytes costs no more than one that fits."""
        prefix = content[: self.tool_output_tokens * MAX_CHARS_PER_TOKEN]
        ids = self.encode(prefix)
        if len(ids) <= self.tool_output_tokens and len(prefix) == len(content):
            return content
        kept = self.tokenizer.decode(ids[: self.tool_output_tokens])
        return (
            f"{kept}\n[... cut: {len(content) - len(kept):,} more characters over the tool output budget "
            f"of {self.tool_output_tokens} tokens]"
        )

    def observation(self, new_messages: list[dict[str, Any]], turn_ended_with_eos: bool) -> list[int]:
        """Ids to append after an assistant turn: the rest of the template's end-of-turn text, the new
        messages, and the next generation prompt — exactly what the template would render there."""
        prefix = [{"role": "user", "content": "u"}, {"role": "assistant", "content": _PLACEHOLDER}]
        try:
            base = self._render(prefix, gen=False)
            full = self._render(prefix + new_messages, gen=True)
        except Exception:  # noqa: BLE001 - templates without a "tool" role raise; Hermes-wrap as user
            new_messages = [_as_user_tool_response(m) for m in new_messages]
            base = self._render(prefix, gen=False)
            full = self._render(prefix + new_messages, gen=True)
        if not full.startswith(base):
            raise RuntimeError("chat template renders earlier turns differently once more messages follow")
        end_of_turn = base[base.index(_PLACEHOLDER) + len(_PLACEHOLDER) :]
        if turn_ended_with_eos and self.eos_text and end_of_turn.startswith(self.eos_text):
            end_of_turn = end_of_turn[len(self.eos_text) :]  # the sampled EOS already closed the turn
        return self.encode(end_of_turn + full[len(base) :])


def _with_system_text(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    if messages and messages[0]["role"] == "system":
        return [{**messages[0], "content": f"{messages[0]['content']}\n\n{text}"}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def _as_user_tool_response(message: dict[str, Any]) -> dict[str, Any]:
    if message["role"] != "tool":
        return message
    return {"role": "user", "content": f"<tool_response>\n{message['content']}\n</tool_response>"}


@dataclass
class _Live:
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
    task: dict[str, Any] | None = None  # what the env was reset with (a tool worker's env is reset with it too)


# The state key of a first turn whose env names none: every episode of a group starts from the same prompt.
START_STATE = "start"


def _state_key(env: ToolEnv, observation: str | None) -> str:
    """The env's own key for the state the next turn starts from, or the observation that stands for it."""
    key = env.state_key()
    if key is not None:
        return str(key)
    return START_STATE if observation is None else observation


def _start(env: ToolEnv, task: dict[str, Any], group: int, sample: int, seed: int = 0) -> _Live:
    """`seed`: the episode's own (`episode_seed`), for the env's randomness."""
    episode = Episode(task_id=task_id_of(task), group=group, sample=sample, prompt_messages=[], tool_schemas=[])
    live = _Live(episode=episode, env=env, tools={}, task=task)
    try:
        live.tools = env.tool_map()
        episode.tool_schemas = [t.schema() for t in env.tools]
        episode.tool_servers = {t.name: t.server for t in env.tools if isinstance(t, McpTool)}
        live.tool_schemas = schemas_by_name(episode.tool_schemas)
        env.episode_seed = seed
        episode.prompt_messages = list(env.reset(task))
        live.state_key = _state_key(env, None)
    except Exception as err:  # noqa: BLE001 - a broken env ends this episode, not the run
        _fail(live, f"env_error: reset raised {type(err).__name__}: {err}")
    return live


def _fail(live: _Live, reason: str) -> None:
    live.episode.status, live.episode.status_reason, live.finished = "error", reason, True


def _truncate(live: _Live, reason: str) -> None:
    live.episode.status, live.episode.status_reason, live.finished = "truncated", reason, True


async def _interpret_turn(live: _Live, text: str, call_format: ToolCallFormat, rollout_cfg: RolloutConfig) -> None:
    """Parse the turn's calls, run them, and let the ToolEnv say what they mean."""
    turn = live.episode.turns[-1]
    turn.state_key = live.state_key
    try:
        parsed = call_format.parse(text, f"call-{turn.index}", live.tool_schemas)
    except ValueError as err:  # the env's tools cannot be written in this format: the env's bug, not the model's
        _fail(live, f"env_error: {err}")
        return
    turn.parse_error = parsed.error
    turn.tool_calls = await execute_calls(parsed.calls, live.tools, rollout_cfg.tool_timeout_s, live.run_tool)
    try:
        result = live.env.step(text, turn.tool_calls)
    except Exception as err:  # noqa: BLE001
        _fail(live, f"env_error: step raised {type(err).__name__}: {err}")
        return
    turn.process_reward = float(result.reward)
    turn.done = bool(result.done)
    messages = list(result.messages)
    if live.cut_tool_output is not None:
        messages = [
            {**m, "content": live.cut_tool_output(str(m["content"]))} if m.get("role") == "tool" else m
            for m in messages
        ]
    turn.observation = "\n".join(str(m.get("content", "")) for m in messages) if messages else None
    live.pending_messages = messages
    try:
        live.state_key = _state_key(live.env, turn.observation or "")
    except Exception as err:  # noqa: BLE001
        _fail(live, f"env_error: state_key raised {type(err).__name__}: {err}")
        return
    if turn.done:
        live.finished = True


def _score(live: _Live) -> None:
    episode = live.episode
    final_text = episode.turns[-1].assistant if episode.turns else ""
    try:
        score = live.env.score(final_text)
    except Exception as err:  # noqa: BLE001
        if episode.status != "error":
            episode.status, episode.status_reason = "error", f"env_error: score raised {type(err).__name__}: {err}"
        return
    episode.outcome_reward = float(score.reward)
    episode.reward_breakdown = {k: float(v) for k, v in score.breakdown.items()}
    episode.final_answer = score.final_answer


def _run_tools_in(worker: ToolWorker, lives: list[_Live]) -> list[int]:
    """These episodes' Tool calls go to the worker process; returns their ids there, to release at the end."""
    episodes = [worker.new_episode(live.task, live.env.episode_seed) for live in lives]
    for live, episode in zip(lives, episodes, strict=True):
        live.run_tool = worker.runner(episode)
    return episodes


def run_scripted_episode(
    env: ToolEnv,
    task: dict[str, Any],
    assistant_turns: list[str],
    rollout_cfg: RolloutConfig,
    tool_worker: ToolWorker | None = None,
) -> Episode:
    """A model-free episode: the given assistant texts go through the same parse/execute/interpret
    path as a real rollout (no tokens). Used by `agentrl env check` (Tools in `tool_worker`) and generated
    env tests."""
    live = _start(env, task, 0, 0)
    isolated = _run_tools_in(tool_worker, [live]) if tool_worker is not None else []
    call_format = get_format(rollout_cfg.tool_format)

    async def play() -> None:
        for index, text in enumerate(assistant_turns[: rollout_cfg.max_turns]):
            if live.finished:
                break
            live.episode.turns.append(TurnRecord(index=index, assistant=text))
            await _interpret_turn(live, text, call_format, rollout_cfg)

    asyncio.run(play())
    if not live.finished:
        _truncate(live, "max_turns")
    _score(live)
    if tool_worker is not None:
        tool_worker.release(isolated)
    return live.episode


def vllm_unavailable_reason(model: Any, device: torch.device) -> str:
    from agentrl.rollout import vllm_engine

    return vllm_engine.unsupported_reason(model, device) or "vLLM can serve this model"


def make_rollout_engine(
    model: Any,
    tokenizer: Any,
    env_factory: Callable[[], ToolEnv],
    rollout_cfg: RolloutConfig,
    device: torch.device,
    concurrent_episodes: int,
    policy: ScriptedPolicy | None = None,
) -> RolloutEngine:
    """The engine `rollout.engine` asks for: hf, vllm, or auto (vllm when it is installed and can serve the
    model, else hf); with a scripted `policy`, the hf engine writing its turns. `engine.description` says which."""
    if policy is not None:
        from agentrl.rollout.scripted import ScriptedRolloutEngine

        return ScriptedRolloutEngine(model, tokenizer, env_factory, rollout_cfg, device, policy=policy)
    if rollout_cfg.engine != "hf":
        from agentrl.rollout import vllm_engine

        reason = vllm_engine.unsupported_reason(model, device)
        if reason is None:
            return vllm_engine.VllmRolloutEngine(
                model, tokenizer, env_factory, rollout_cfg, device, concurrent_episodes
            )
        if rollout_cfg.engine == "vllm":
            raise ValueError(f"rollout.engine is 'vllm' but {reason}; or set rollout.engine: hf")
    return RolloutEngine(model, tokenizer, env_factory, rollout_cfg, device)


class RolloutEngine:
    """`rollout.engine: hf`: batched sampling over the transformers model that the learner trains. Per turn,
    every active episode is one row of a batch (the prefix all rows share computed once); a row stops at
    its end of turn, its tool calls start while the others still generate, and the next turn starts when
    every episode's tools have answered."""

    description = "hf"
    shares_policy_weights = True  # samples from the very model object the learner trains

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

    def run(self, tasks: list[dict[str, Any]], group_size: int, seed: int, first_group: int = 0) -> list[Episode]:
        """Group `first_group + i` is `group_size` episodes of `tasks[i]`; each samples from its own
        `episode_seed(seed, group, sample)`, so a step's episodes do not depend on how its groups are split."""
        lives = [
            _start(self.env_factory(), task, first_group + g, s, episode_seed(seed, first_group + g, s))
            for g, task in enumerate(tasks)
            for s in range(group_size)
        ]
        for live in lives:
            if not live.finished:
                self._append(
                    live, self.chat.prompt(live.episode.prompt_messages, live.episode.tool_schemas), "prompt", -1
                )
                if len(live.episode.token_ids) >= self.cfg.max_context:
                    _truncate(live, "prompt_over_max_context")  # no room left for a single generated token
            live.cut_tool_output = self.chat.cut_to_budget
        if lives and all(live.episode.status_reason == "prompt_over_max_context" for live in lives):
            # Training on this batch would update on nothing and still call the run complete.
            shortest = min(len(live.episode.token_ids) for live in lives)
            raise ValueError(
                f"every prompt is longer than rollout.max_context ({shortest} tokens or more, "
                f"the tool schemas included; max_context is {self.cfg.max_context}): "
                "raise rollout.max_context or shorten the prompts"
            )
        isolated = _run_tools_in(self.tool_worker, lives) if self.tool_worker is not None else []
        started, generated = time.perf_counter(), 0
        engine_stats = self._roll(lives, seed)
        for live in lives:
            _score(live)
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

    def _append(self, live: _Live, ids: list[int], role: str, turn: int, logprobs: list[float] | None = None) -> None:
        ep = live.episode
        ep.token_ids.extend(ids)
        ep.token_roles.extend([role] * len(ids))  # type: ignore[list-item]
        ep.token_turns.extend([turn] * len(ids))
        sampled = role == "assistant"
        ep.loss_mask.extend([1 if sampled else 0] * len(ids))
        ep.rollout_logprobs.extend(logprobs if logprobs is not None else [None] * len(ids))

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

    def weights_updated(self) -> None:
        """The learner changed the policy's weights. This engine samples from the learner's own model object,
        so its next rollout already uses them; an engine with its own copy marks that copy stale."""

    def sync_weights(self) -> None:
        """Bring the engine's copy of the weights up to date now, if it has one and it is stale (else the next
        rollout does). Call it from the thread that trains, while no update runs."""

    def close(self) -> None:
        """Release what the engine holds beyond the policy: the tool worker process, the vLLM engine's processes."""
        if self.tool_worker is not None:
            self.tool_worker.close()

    def _roll(self, lives: list[_Live], seed: int) -> dict[str, float]:
        """Play the episodes to their end; returns the engine's own figures for the step's metrics."""
        generators = [
            torch.Generator(device=self.device).manual_seed(episode_seed(seed, live.episode.group, live.episode.sample))
            for live in lives
        ]
        asyncio.run(self._play(lives, generators))
        return {}

    def _end_turn(
        self, live: _Live, turn_index: int, ids: list[int], logprobs: list[float], end: TurnEnd, limit: int
    ) -> str:
        """Record a turn's sampled tokens; returns its text, for the tool-call parser."""
        self._append(live, ids, "assistant", turn_index, logprobs)
        live.episode.turn_end_positions.append(len(live.episode.token_ids) - 1)
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        finish = "stop" if end != "limit" else ("length" if limit == self.cfg.max_new_tokens else "context")
        live.episode.turns.append(TurnRecord(index=turn_index, assistant=text, finish_reason=finish))
        return text

    def _observe(self, live: _Live, turn_index: int, turn_ended_with_eos: bool) -> None:
        """After the ToolEnv read the turn: append the observation, or end the episode if it has no room."""
        if live.finished:
            return
        if live.episode.turns[-1].finish_reason == "context":
            _truncate(live, "max_context")
            return
        observation = self.chat.observation(live.pending_messages, turn_ended_with_eos)
        if len(live.episode.token_ids) + len(observation) >= self.cfg.max_context:
            _truncate(live, "max_context")
            return
        self._append(live, observation, "tool", turn_index)

    def _turn_limit(self, live: _Live) -> int | None:
        """How many tokens the episode's next turn may sample; None (and the episode truncated) if none."""
        room = self.cfg.max_context - len(live.episode.token_ids)
        if room <= 0:
            _truncate(live, "max_context")
            return None
        return min(self.cfg.max_new_tokens, room)

    async def _play(self, lives: list[_Live], generators: list[torch.Generator]) -> None:
        """`generators[i]` samples every token of `lives[i]`."""
        loop = asyncio.get_running_loop()
        for turn_index in range(self.cfg.max_turns):
            active = []
            active_generators = []
            for live, generator in zip(lives, generators, strict=True):
                if not live.finished and (limit := self._turn_limit(live)) is not None:
                    active.append((live, limit))
                    active_generators.append(generator)
            if not active:
                return
            interpretations: list[asyncio.Task[None]] = []
            ended_with_eos: dict[int, bool] = {}

            def start_turn(row: int, ids: list[int], logprobs: list[float], end: TurnEnd) -> None:
                live, limit = active[row]
                ended_with_eos[row] = end == "eos"
                text = self._end_turn(live, turn_index, ids, logprobs, end, limit)
                interpretations.append(loop.create_task(_interpret_turn(live, text, self.call_format, self.cfg)))

            def row_done(row: int, ids: list[int], logprobs: list[float], end: TurnEnd) -> None:
                loop.call_soon_threadsafe(start_turn, row, ids, logprobs, end)  # from the generation thread

            # Generation runs in a worker thread, so the tool calls of episodes whose turn already ended run
            # while the others are still generating (torch releases the GIL inside its kernels). Every
            # row_done callback is queued before the thread's own completion, so all turns have started here.
            await asyncio.to_thread(
                self._generate,
                [lv.episode.token_ids for lv, _ in active],
                [n for _, n in active],
                [self._call_ends(lv) for lv, _ in active],
                active_generators,
                row_done,
            )
            await asyncio.gather(*interpretations)
            for row, (live, _) in enumerate(active):
                self._observe(live, turn_index, ended_with_eos[row])
        for live in lives:
            if not live.finished:
                _truncate(live, "max_turns")

    def _call_ends(self, live: _Live) -> list[str]:
        if not self.cfg.stop_at_tool_call or not live.tool_schemas:
            return []
        return self.call_format.call_end(live.tool_schemas)

    @torch.no_grad()
    def _generate(
        self,
        contexts: list[list[int]],
        limits: list[int],
        call_ends: list[list[str]],
        generators: list[torch.Generator],
        row_done: Callable[[int, list[int], list[float], TurnEnd], None],
    ) -> None:
        """Sample up to `limits[i]` tokens after each context, ending a row early at EOS or once its text
        closes a tool call (holds one of `call_ends[i]`); `row_done(row, ids, logprobs, end)` is called as soon as a row
        stops, while the others go on."""
        was_training = self.model.training
        self.model.eval()
        try:
            self._sample(contexts, limits, call_ends, generators, row_done)
        finally:
            self.model.train(was_training)

    def _prefill(self, contexts: list[list[int]]) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Run the contexts through the model: (cache, logits at each row's last token, attention mask,
        each row's last position). The prefix every context shares (the system prompt, its examples, a
        group's prompt) is computed once and its cache repeated for every row; only the rest of each
        context is padded and computed per row. Rows are left padded after the shared prefix, so every
        row's next token is at the same column; masked padding in the middle is invisible to attention."""
        batch = len(contexts)
        shared = len(os.path.commonprefix(contexts)) if batch > 1 else 0
        shared = min(shared, min(len(c) for c in contexts) - 1)  # every row keeps a token to read logits from
        past = None
        if shared >= MIN_SHARED_PREFIX:
            past = shared_prefix_cache(self.model, contexts[0][:shared], batch, self.device)
        else:
            shared = 0
        rests = [c[shared:] for c in contexts]
        width = max(len(r) for r in rests)
        input_ids = torch.full((batch, width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((batch, shared + width), dtype=torch.long)
        attention[:, :shared] = 1
        for row, ids in enumerate(rests):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention[row, shared + width - len(ids) :] = 1
        input_ids, attention = input_ids.to(self.device), attention.to(self.device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)[:, shared:]
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention,
            position_ids=positions,
            past_key_values=past,
            use_cache=True,
            logits_to_keep=1,
        )  # the vocabulary projection of the last token only
        return out.past_key_values, out.logits[:, -1, :].float(), attention, positions[:, -1:]

    def _sample(
        self,
        contexts: list[list[int]],
        limits: list[int],
        call_ends: list[list[str]],
        generators: list[torch.Generator],
        row_done: Callable[[int, list[int], list[float], TurnEnd], None],
    ) -> None:
        batch = len(contexts)
        past, logits, attention, last_position = self._prefill(contexts)
        next_position = last_position + 1
        sampled: list[list[int]] = [[] for _ in range(batch)]
        sampled_logprobs: list[list[float]] = [[] for _ in range(batch)]
        open_rows = set(range(batch))
        for step in range(max(limits)):
            token, logprob = self._pick(logits, [generators[row] if row in open_rows else None for row in range(batch)])
            for row, (token_id, token_logprob) in enumerate(zip(token.tolist(), logprob.tolist())):
                if row not in open_rows:
                    continue  # a finished row keeps a slot in the batch; what it samples is dropped
                sampled[row].append(token_id)
                sampled_logprobs[row].append(token_logprob)
                end: TurnEnd | None = None
                if token_id == self.eos_id:
                    end = "eos"
                elif call_ends[row] and self._closes_a_call(sampled[row], call_ends[row]):
                    end = "call_end"
                elif step + 1 >= limits[row]:
                    end = "limit"
                if end is not None:
                    open_rows.discard(row)
                    row_done(row, sampled[row], sampled_logprobs[row], end)
            if not open_rows:
                return
            attention = torch.cat([attention, torch.ones((batch, 1), dtype=attention.dtype, device=self.device)], 1)
            out = self.model(
                input_ids=token[:, None],
                attention_mask=attention,
                position_ids=next_position,
                past_key_values=past,
                use_cache=True,
                logits_to_keep=1,
            )
            past, logits = out.past_key_values, out.logits[:, -1, :].float()
            next_position = next_position + 1

    def _closes_a_call(self, ids: list[int], endings: list[str]) -> bool:
        """Whether the text of `ids` now holds one of `endings`. Checked after every token, so only the last
        few tokens need decoding (enough for the longest ending: a token is at least one character); the
        ending may share its last token with a character or two after it."""
        tail = self.tokenizer.decode(ids[-max(len(e) for e in endings) :], skip_special_tokens=True)
        return any(e in tail for e in endings)

    def _pick(
        self, logits: torch.Tensor, generators: list[torch.Generator | None]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One token per row, row i drawn with `generators[i]`. A finished row (None) draws nothing: its token is
        dropped anyway, and a draw would move its generator by however long the other rows of its batch run."""
        if self.cfg.temperature == 0:
            logprobs = torch.log_softmax(logits, -1)
            token = logits.argmax(-1)
        else:
            logprobs = torch.log_softmax(logits / self.cfg.temperature, -1)
            probs = logprobs.exp()
            if self.cfg.top_p < 1.0:
                sorted_probs, order = probs.sort(-1, descending=True)
                outside = sorted_probs.cumsum(-1) - sorted_probs > self.cfg.top_p  # keep the first token always
                sorted_probs = sorted_probs.masked_fill(outside, 0.0)
                probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
            token = _draw(probs, generators)
        return token, logprobs.gather(-1, token[:, None]).squeeze(-1)


def _draw(probs: torch.Tensor, generators: list[torch.Generator | None]) -> torch.Tensor:
    """One token per row of `probs` [rows, vocabulary], where the row's cumulative probability first passes a uniform
    number drawn from the row's own generator (inverting the row's CDF). One random number a row: torch.multinomial
    draws one per vocabulary entry, 45 ms a decode step of 32 rows of SmolLM2's 49,152 entries on 2 CPU cores,
    beside 300-340 ms of the model's forward (the CDF takes 1 ms). A row without a generator (finished) draws
    nothing and gets its first token of nonzero probability."""
    cdf = probs.cumsum(-1)
    total = cdf[:, -1:]
    uniform = torch.cat(
        [
            torch.rand(1, generator=generator, device=probs.device) if generator is not None else probs.new_zeros(1)
            for generator in generators
        ]
    )
    # Strictly below the total, so the first entry past it has nonzero probability however the product rounds.
    points = torch.minimum(uniform[:, None] * total, torch.nextafter(total, torch.zeros_like(total)))
    return torch.searchsorted(cdf, points, right=True).squeeze(1)

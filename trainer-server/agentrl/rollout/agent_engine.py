"""The agent rollout engine (run config `agent:`): the user's own agent plays each episode against the endpoint.

Per step, every episode (a group of n = n runs of the agent on one task) gets its own base URL and its agent runs in a
daemon thread (environment/agent.py). Each request is sampled from the episode's own seed (`episode_seed`) by one of
the two engines a run may use (rollout.engine):
- hf: the requests of concurrent episodes wait in one queue; this engine's thread samples them as a batch with the hf
  engine's sampler (`BatchSampler`, from the very model the learner trains), as soon as every running agent is waiting
  on a request or BATCH_WAIT_S after the first one came. A row's reply goes back as soon as the row ends, so that
  agent runs its tools while the others still generate.
- vllm: each request goes to vLLM as it comes (`VllmSampler`, its own copy of the weights, pushed before each step's
  rollout) and joins its running batch: continuous batching, as the vLLM engine does for ToolEnv episodes.

An episode ends when its agent returns, raises or runs past agent.timeout_s; its later requests are refused. Its
requests become one training sequence, or several where the agent rewrote its history (agent_capture.py): each
sequence is a row of the episode's group with the episode's reward; the first keeps the agent run's sample index,
the others are numbered after the group's runs (group_size, group_size + 1, ...).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import itertools
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from agentrl.contract.training_config import RolloutConfig
from agentrl.environment.agent import AgentFailure, AgentProgram
from agentrl.environment.env import EpisodeScore
from agentrl.environment.tool import in_daemon_thread
from agentrl.environment.toolcall import get_format, schemas_by_name
from agentrl.rollout.agent_capture import ContextFull, EpisodeCapture, PlannedTurn, ServedReply
from agentrl.rollout.chat import ChatFormat
from agentrl.rollout.endpoint import AgentEndpoint
from agentrl.rollout.episode import Episode
from agentrl.rollout.hf_engine import BatchSampler
from agentrl.rollout.loop import (
    EpisodeCounter,
    SamplingSettings,
    TurnEnd,
    count_nothing,
    episode_seed,
    task_id_of,
)
from agentrl.rollout.openai_chat import ChatRequest, EndpointError

if TYPE_CHECKING:
    from agentrl.rollout.vllm_engine import VllmSampler

# How long a request waits for other episodes' requests to share its batch, when some agents are still busy.
BATCH_WAIT_S = 0.05
# A request whose messages and tools run past this many characters per token of rollout.max_context cannot fit
# (a token is rarely over 8 characters): it is refused before tokenizing, which would take minutes for 30 MB.
MAX_CHARS_PER_TOKEN = 32


@dataclass
class _Generation:
    """One request waiting to be sampled."""

    session: _Session
    context: list[int]
    limit: int
    stops: list[str]
    seed: int  # vLLM's seed for this request (the hf sampler draws from the session's generator instead)
    future: concurrent.futures.Future[tuple[list[int], list[float], TurnEnd]] = field(
        default_factory=concurrent.futures.Future
    )


class _Queue:
    """Requests from the endpoint's thread, batches for the engine's."""

    def __init__(self) -> None:
        self._ready = threading.Condition()
        self._waiting: list[_Generation] = []
        self._first_arrival = 0.0
        self._woken = False

    def put(self, generation: _Generation) -> None:
        with self._ready:
            if not self._waiting:
                self._first_arrival = time.monotonic()
            self._waiting.append(generation)
            self._ready.notify_all()

    def wake(self) -> None:
        """An agent ended: the engine looks again at which episodes are running."""
        with self._ready:
            self._woken = True
            self._ready.notify_all()

    def take(self, running: int, timeout: float) -> list[_Generation]:
        """The waiting requests, once all `running` episodes have one or BATCH_WAIT_S after the first came; empty
        after `timeout` or a wake."""
        deadline = time.monotonic() + timeout
        with self._ready:
            while not self._woken and len(self._waiting) < running:
                until = deadline if not self._waiting else min(deadline, self._first_arrival + BATCH_WAIT_S)
                if until <= time.monotonic():
                    break
                self._ready.wait(until - time.monotonic())
            batch, self._waiting, self._woken = self._waiting, [], False
            return batch

    def drop(self, session: _Session) -> None:
        """The session ended: its waiting request is refused."""
        with self._ready:
            mine = [g for g in self._waiting if g.session is session]
            self._waiting = [g for g in self._waiting if g.session is not session]
        for generation in mine:
            generation.future.set_exception(session.ended_error())


class _Session:
    """One episode at the endpoint: its requests answered one at a time, in order, into its capture."""

    def __init__(self, engine: AgentRolloutEngine, episode_id: str, capture: EpisodeCapture, seed: int) -> None:
        self.engine, self.episode_id, self.capture, self.seed = engine, episode_id, capture, seed
        self.generator = torch.Generator(device=engine.device).manual_seed(seed)
        self.ended = False
        self._state = threading.Lock()  # the capture, between the endpoint's thread and the engine's
        self._in_order: asyncio.Lock | None = None  # one request at a time: each extends what the previous answered

    def ended_error(self) -> EndpointError:
        return EndpointError(
            410, f"episode {self.episode_id} has ended: its agent returned or ran out of time", "episode_ended"
        )

    def end(self) -> None:
        with self._state:
            self.ended = True

    async def complete(self, request: ChatRequest) -> tuple[ServedReply, dict[str, Any]]:
        if self._in_order is None:
            self._in_order = asyncio.Lock()
        async with self._in_order:
            started = time.perf_counter()
            cfg = self.engine.cfg
            if request.text_length > cfg.max_context * MAX_CHARS_PER_TOKEN:
                raise EndpointError(
                    400,
                    f"this conversation is {request.text_length} characters, the tools included: it cannot fit in "
                    f"rollout.max_context ({cfg.max_context} tokens)",
                    "context_length_exceeded",
                    "messages",
                )
            tools = request.tools if request.tool_choice != "none" else []
            # Tokenizing a long conversation takes a while: off the endpoint's loop, so other episodes' requests go on.
            planned = await asyncio.to_thread(self._plan, request, tools)
            forced = self.engine.forced_opening(request, tools)
            context = [*planned.context, *forced]
            turn_cap = min(cfg.max_new_tokens, request.max_tokens or cfg.max_new_tokens)
            room = cfg.max_context - len(context)
            limit = min(turn_cap, room)
            if limit < 1:
                raise EndpointError(400, "the forced tool call fills rollout.max_context", "context_length_exceeded")
            stops = list(request.stop)
            if (cfg.stop_at_tool_call or not request.parallel_tool_calls) and tools:
                stops += self.engine.call_format.call_end(schemas_by_name(tools))
            seed = hash((self.seed, self.capture.answered)) & 0x7FFFFFFF
            generation = _Generation(self, context, limit, stops, seed)
            submitted = time.perf_counter()
            self.engine.submit(generation)
            ids, logprobs, end = await asyncio.wrap_future(generation.future)
            sampled = time.perf_counter()
            with self._state:
                if self.ended:
                    raise self.ended_error()
                reply = self.capture.record(
                    planned, ids, logprobs, end, room < turn_cap, list(request.stop), forced, request.agent
                )
            if request.logprobs:
                decode = self.engine.tokenizer.decode
                reply.token_logprobs = [(decode([token]), logprob) for token, logprob in zip(ids, logprobs)]
            self.engine.overheads_s.append((submitted - started) + (time.perf_counter() - sampled))
            return reply, _bounded(request, cfg, limit)

    def _plan(self, request: ChatRequest, tools: list[dict[str, Any]]) -> PlannedTurn:
        """What answering the request adds (agent_capture.py), its process reward given to the turn before it."""
        with self._state:
            if self.ended:
                raise self.ended_error()
            if request.process_reward is not None:
                try:
                    self.capture.reward_last_turn(request.process_reward)
                except ValueError as err:
                    raise EndpointError(400, str(err), "invalid_value", "agentrl.process_reward") from None
            try:
                return self.capture.plan(request.messages, tools)
            except ContextFull as err:
                raise EndpointError(400, str(err), "context_length_exceeded", "messages") from None
            except ValueError as err:
                raise EndpointError(400, str(err), "invalid_value", "messages") from None


def _bounded(request: ChatRequest, cfg: RolloutConfig, limit: int) -> dict[str, Any]:
    """Where the run's sampling settings overrode what the request asked: the learner's logprobs assume the run's
    temperature and top_p, and a turn has at most rollout.max_new_tokens within rollout.max_context."""
    bounded: dict[str, Any] = {}
    if request.temperature is not None and request.temperature != cfg.temperature:
        bounded["temperature"] = {"requested": request.temperature, "used": cfg.temperature}
    if request.top_p is not None and request.top_p != cfg.top_p:
        bounded["top_p"] = {"requested": request.top_p, "used": cfg.top_p}
    if request.max_tokens is not None and request.max_tokens > limit:
        bounded["max_tokens"] = {"requested": request.max_tokens, "used": limit}
    return bounded


def _as_text(returned: Any) -> str | None:
    """What an agent returned, as the replay shows it: a string as it is, anything else as JSON where it can be."""
    if returned is None or isinstance(returned, str):
        return returned
    try:
        return json.dumps(returned, ensure_ascii=False, default=str)
    except ValueError:  # a value that refers to itself
        return repr(returned)


@dataclass
class _AgentRun:
    """One run of the agent: one episode of a group."""

    task: dict[str, Any]
    group: int
    sample: int
    session: _Session
    future: concurrent.futures.Future[Any]
    deadline: float
    failure: str | None = None


class AgentRolloutEngine(SamplingSettings):
    """Plays a step's episodes with the user's agent; the same surface as a RolloutEngine (loop.py)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        agent: AgentProgram,
        rollout_cfg: RolloutConfig,
        device: torch.device,
        vllm: VllmSampler | None = None,
    ) -> None:
        """`vllm`: sample with it (rollout.engine vllm or auto, where vLLM serves the model); else with the hf
        engine's sampler, from the model object the learner trains."""
        self.model, self.tokenizer, self.agent, self.cfg, self.device = model, tokenizer, agent, rollout_cfg, device
        self.call_format = get_format(rollout_cfg.tool_format)
        self.chat = ChatFormat(tokenizer, rollout_cfg.tool_output_tokens, self.call_format)
        self.vllm = vllm
        self.sampler = BatchSampler(model, tokenizer, device) if vllm is None else None
        self.shares_policy_weights = vllm is None
        self.description = f"agent endpoint ({'hf' if vllm is None else vllm.description})"
        self.sampler_error: BaseException | None = None  # vLLM's failure, raised by the step that saw it
        self.queue = _Queue()
        self.endpoint = AgentEndpoint(getattr(model, "name_or_path", "") or "agentrl-policy")
        self.overheads_s: list[float] = []
        self.last_stats: dict[str, float] = {}

    def run(
        self,
        tasks: list[dict[str, Any]],
        group_size: int,
        seed: int,
        first_group: int = 0,
        on_episode_end: EpisodeCounter = count_nothing,
    ) -> list[Episode]:
        """Group `first_group + i` is `group_size` runs of the agent on `tasks[i]`, each sampling from its own
        `episode_seed(seed, group, sample)`; returns every run's training sequences. `on_episode_end` counts the runs
        of the agent that ended."""
        started = time.perf_counter()
        self.sync_weights()
        synced = time.perf_counter() - started
        self.overheads_s = []
        runs = [
            self._start(task, first_group + g, s, episode_seed(seed, first_group + g, s))
            for g, task in enumerate(tasks)
            for s in range(group_size)
        ]
        batch_rows = self._serve(runs, on_episode_end)
        continuation_samples = {run.group: itertools.count(group_size) for run in runs}
        episodes = []
        for run in runs:
            first, *continuations = self._finish(run)
            first.sample = run.sample
            for sequence in continuations:
                sequence.sample = next(continuation_samples[run.group])
            episodes += [first, *continuations]
        elapsed = time.perf_counter() - started
        captures = [run.session.capture for run in runs]
        self.last_stats = {
            "perf/rollout_tokens_per_s": sum(e.response_length for e in episodes) / elapsed if elapsed > 0 else 0.0,
            "perf/rollout_time_s": elapsed,
            "agent/requests": float(sum(c.answered for c in captures)),
            "agent/prefix_breaks": float(sum(len(c.breaks) for c in captures)),
            "agent/edited_messages": float(sum(c.breaks.count("edited") for c in captures)),
            "agent/broken_episode_share": sum(bool(c.breaks) for c in captures) / len(captures),
            "agent/failed_episode_share": sum(run.failure is not None for run in runs) / len(runs),
            "agent/batch_rows_mean": sum(batch_rows) / len(batch_rows) if batch_rows else 0.0,
            "perf/weight_sync_s": synced,
        }
        if self.overheads_s:
            self.last_stats["perf/endpoint_overhead_ms"] = 1000 * sum(self.overheads_s) / len(self.overheads_s)
        return episodes

    def _start(self, task: dict[str, Any], group: int, sample: int, seed: int) -> _AgentRun:
        episode_id = f"g{group}s{sample}-{secrets.token_hex(6)}"  # unguessable: a stale id from another step is unknown
        capture = EpisodeCapture(self.chat, self.call_format, task_id_of(task), self.cfg.max_context)
        session = _Session(self, episode_id, capture, seed)
        base_url, key = self.endpoint.open(episode_id, session)
        future = self.agent.start(copy.deepcopy(task), base_url, key, episode_id)  # the reward reads the task as it was
        future.add_done_callback(lambda _: self.queue.wake())
        return _AgentRun(task, group, sample, session, future, time.monotonic() + self.agent.timeout_s)

    def forced_opening(self, request: ChatRequest, tools: list[dict[str, Any]]) -> list[int]:
        """The ids tool_choice writes before the model samples: for "required", a tool call's opening up to the
        tool's name (the model names the tool); for a named function, up to its arguments. As the run's tool-call
        format writes a call, so the model continues its own syntax."""
        if not tools or (request.tool_choice != "required" and request.forced_tool is None):
            return []
        return self.chat.encode(self.call_format.opening(request.forced_tool))

    def submit(self, generation: _Generation) -> None:
        """A request to sample: queued for the next hf batch, or sent to vLLM at once."""
        if self.vllm is None:
            self.queue.put(generation)
            return
        cfg = self.cfg
        sampling = self.vllm.sample(
            generation.context, generation.limit, generation.stops, generation.seed, cfg.temperature, cfg.top_p
        )
        asyncio.run_coroutine_threadsafe(sampling, self.vllm.loop).add_done_callback(
            lambda done: self._sampled(generation, done)
        )

    def _sampled(self, generation: _Generation, done: concurrent.futures.Future[Any]) -> None:
        if done.exception() is None:
            generation.future.set_result(done.result())
            return
        self.sampler_error = self.sampler_error or done.exception()
        generation.future.set_exception(
            EndpointError(500, "the trainer's sampler failed; the run stops", "internal_error")
        )
        self.queue.wake()

    def _serve(self, runs: list[_AgentRun], on_episode_end: EpisodeCounter) -> list[int]:
        """Sample the agents' requests until every agent has ended; returns the rows of each hf batch (vLLM batches
        on its own)."""
        batch_rows: list[int] = []
        running = list(runs)
        while running:
            now = time.monotonic()
            ended = [r for r in running if r.future.done() or now >= r.deadline]
            for run in ended:
                self._end(run)
                running.remove(run)
            if ended:
                on_episode_end(len(runs) - len(running), len(runs))
            if not running:
                break
            batch = self.queue.take(len(running), timeout=min(r.deadline for r in running) - now)
            if self.sampler_error is not None:
                for run in running:
                    self._end(run)
                raise self.sampler_error
            if batch:
                assert self.sampler is not None  # only the hf engine's requests are queued
                batch_rows.append(len(batch))
                try:
                    self.sampler.generate(
                        [g.context for g in batch],
                        [g.limit for g in batch],
                        [g.stops for g in batch],
                        [g.session.generator for g in batch],
                        lambda row, ids, logprobs, end: batch[row].future.set_result((ids, logprobs, end)),
                        self.cfg.temperature,
                        self.cfg.top_p,
                    )
                except BaseException:
                    # The run fails with the sampler's error; no agent is left waiting for a reply that never comes.
                    failed = EndpointError(500, "the trainer's sampler failed; the run stops", "internal_error")
                    for generation in batch:
                        if not generation.future.done():
                            generation.future.set_exception(failed)
                    for run in running:
                        self._end(run)
                    raise
        return batch_rows

    def _end(self, run: _AgentRun) -> None:
        run.session.end()
        self.endpoint.close_episode(run.session.episode_id)
        self.queue.drop(run.session)
        if not run.future.done():
            run.failure = (
                f"agent_timeout: {self.agent.name} did not return within agent.timeout_s ({self.agent.timeout_s:g} s)"
            )
        elif run.future.exception() is not None:  # an AgentFailure: what the agent's code raised, described
            run.failure = f"agent_error: {run.future.exception()}"

    def _finish(self, run: _AgentRun) -> list[Episode]:
        """The run's sequences as rows of its group (samples set by the caller), scored with the episode's reward."""
        sequences = run.session.capture.sequences
        if not sequences:
            sequences = [Episode(task_id_of(run.task), 0, 0, prompt_messages=[], tool_schemas=[])]
            run.failure = run.failure or f"agent_error: {self.agent.name} returned without a request to the endpoint"
        score, returned = EpisodeScore(reward=0.0), None
        if run.failure is None:
            returned = run.future.result()
            scoring = in_daemon_thread(
                f"reward-{run.session.episode_id}",
                lambda: self.agent.reward(run.task, run.future.result(), self.cfg.max_abs_reward),
            )
            try:
                score = scoring.result(timeout=self.agent.timeout_s)
            except concurrent.futures.TimeoutError:
                run.failure = f"agent_error: the reward function did not return within {self.agent.timeout_s:g} s"
            except AgentFailure as err:
                run.failure = f"agent_error: {err}"
        for sequence in sequences:
            sequence.group = run.group
            sequence.outcome_reward = score.reward
            sequence.reward_breakdown = {k: float(v) for k, v in score.breakdown.items()}
            # The replay's final answer: the reward function's, else what the agent returned, as text.
            sequence.final_answer = score.final_answer or _as_text(returned)
            if run.failure is not None:
                sequence.status, sequence.status_reason = "error", run.failure
        return sequences

    def weights_updated(self) -> None:
        """vLLM's copy of the weights is stale; the hf sampler reads the learner's own model object."""
        if self.vllm is not None:
            self.vllm.weights_updated()

    def sync_weights(self) -> None:
        if self.vllm is not None:
            self.vllm.sync_weights()

    def close(self) -> None:
        self.endpoint.close()
        if self.vllm is not None:
            self.vllm.close()

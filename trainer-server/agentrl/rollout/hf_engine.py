"""`rollout.engine: hf`: batched sampling over the transformers model that the learner trains.

Per turn, every active episode is one row of a left-padded batch with a KV cache (the prefix all rows share computed
once); a row stops at its end of turn, its tool calls start while the others still generate, and the next turn starts
when every episode's tools have answered.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import torch

from agentrl.models.prefix import MIN_SHARED_PREFIX, shared_prefix_cache
from agentrl.rollout.loop import (
    EpisodeCounter,
    LiveEpisode,
    RolloutEngine,
    TurnEnd,
    episode_seed,
    interpret_turn,
    truncate_episode,
)


class HfRolloutEngine(RolloutEngine):
    """Each row samples from its own generator (`episode_seed`), so a step's episodes do not depend on how its groups
    are batched."""

    description = "hf"
    shares_policy_weights = True  # samples from the very model object the learner trains

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sampler = BatchSampler(self.model, self.tokenizer, self.device)

    def _roll(self, lives: list[LiveEpisode], seed: int, on_episode_end: EpisodeCounter) -> dict[str, float]:
        generators = [
            torch.Generator(device=self.device).manual_seed(episode_seed(seed, live.episode.group, live.episode.sample))
            for live in lives
        ]
        asyncio.run(self._play(lives, generators, on_episode_end))
        return {}

    async def _play(
        self, lives: list[LiveEpisode], generators: list[torch.Generator], on_episode_end: EpisodeCounter
    ) -> None:
        """`generators[i]` samples every token of `lives[i]`; the episodes that ended are counted after each turn."""
        loop = asyncio.get_running_loop()
        # Every episode of a call stands at the same turn: 0, or a re-roll's first sampled turn (RolloutEngine.restart).
        first_turn = len(lives[0].episode.turns) if lives else 0
        for turn_index in range(first_turn, self.cfg.max_turns):
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
                interpretations.append(loop.create_task(interpret_turn(live, text, self.call_format, self.cfg)))

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
            on_episode_end(sum(live.finished for live in lives), len(lives))
        for live in lives:
            if not live.finished:
                truncate_episode(live, "max_turns")

    def _generate(
        self,
        contexts: list[list[int]],
        limits: list[int],
        call_ends: list[list[str]],
        generators: list[torch.Generator],
        row_done: Callable[[int, list[int], list[float], TurnEnd], None],
    ) -> None:
        """Each turn's sampling (the scripted engine writes the turns instead)."""
        self.sampler.generate(contexts, limits, call_ends, generators, row_done, self.cfg.temperature, self.cfg.top_p)


class BatchSampler:
    """Sampling over a batch of token contexts with a transformers model, each row from its own generator: the hf
    engine's turns, and the requests of concurrent episodes at the agent endpoint (agent_engine.py)."""

    def __init__(self, model: Any, tokenizer: Any, device: torch.device) -> None:
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id

    @torch.no_grad()
    def generate(
        self,
        contexts: list[list[int]],
        limits: list[int],
        stop_texts: list[list[str]],
        generators: list[torch.Generator],
        row_done: Callable[[int, list[int], list[float], TurnEnd], None],
        temperature: float,
        top_p: float,
    ) -> None:
        """Sample up to `limits[i]` tokens after each context, ending a row early at EOS or once its text
        holds one of `stop_texts[i]` (a closed tool call, a request's stop sequence); `row_done(row, ids, logprobs,
        end)` is called as soon as a row stops, while the others go on."""
        was_training = self.model.training
        self.model.eval()
        try:
            self._sample(contexts, limits, stop_texts, generators, row_done, temperature, top_p)
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
        stop_texts: list[list[str]],
        generators: list[torch.Generator],
        row_done: Callable[[int, list[int], list[float], TurnEnd], None],
        temperature: float,
        top_p: float,
    ) -> None:
        batch = len(contexts)
        past, logits, attention, last_position = self._prefill(contexts)
        next_position = last_position + 1
        sampled: list[list[int]] = [[] for _ in range(batch)]
        sampled_logprobs: list[list[float]] = [[] for _ in range(batch)]
        open_rows = set(range(batch))
        for step in range(max(limits)):
            token, logprob = self._pick(
                logits, [generators[row] if row in open_rows else None for row in range(batch)], temperature, top_p
            )
            for row, (token_id, token_logprob) in enumerate(zip(token.tolist(), logprob.tolist())):
                if row not in open_rows:
                    continue  # a finished row keeps a slot in the batch; what it samples is dropped
                sampled[row].append(token_id)
                sampled_logprobs[row].append(token_logprob)
                end: TurnEnd | None = None
                if token_id == self.eos_id:
                    end = "eos"
                elif stop_texts[row] and self._holds_a_stop(sampled[row], stop_texts[row]):
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

    def _holds_a_stop(self, ids: list[int], endings: list[str]) -> bool:
        """Whether the text of `ids` now holds one of `endings`. Checked after every token, so only the last
        few tokens need decoding (enough for the longest ending: a token is at least one character); the
        ending may share its last token with a character or two after it."""
        tail = self.tokenizer.decode(ids[-max(len(e) for e in endings) :], skip_special_tokens=True)
        return any(e in tail for e in endings)

    def _pick(
        self, logits: torch.Tensor, generators: list[torch.Generator | None], temperature: float, top_p: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One token per row, row i drawn with `generators[i]`. A finished row (None) draws nothing: its token is
        dropped anyway, and a draw would move its generator by however long the other rows of its batch run."""
        if temperature == 0:
            logprobs = torch.log_softmax(logits, -1)
            token = logits.argmax(-1)
        else:
            logprobs = torch.log_softmax(logits / temperature, -1)
            probs = logprobs.exp()
            if top_p < 1.0:
                sorted_probs, order = probs.sort(-1, descending=True)
                outside = sorted_probs.cumsum(-1) - sorted_probs > top_p  # keep the first token always
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

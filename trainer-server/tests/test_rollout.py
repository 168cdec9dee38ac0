import pytest
import torch
from agentrl.contract.training_config import RolloutConfig
from agentrl.environment.toolcall import get_format
from agentrl.examples.lookup.env import LookupEnv
from agentrl.learning.batch import collate
from agentrl.rollout.chat import MAX_CHARS_PER_TOKEN, ChatFormat
from agentrl.rollout.hf_engine import HfRolloutEngine, _draw
from agentrl.rollout.scripted_episode import run_scripted_episode
from hypothesis import given, settings
from hypothesis import strategies as st

TEXT = st.text(alphabet='abcdefghijklmnopqrstuvwxyz0123456789 .,:{}"<>/_\n', max_size=40)


@settings(max_examples=60, deadline=None)
@given(turns=st.lists(st.tuples(TEXT, st.lists(TEXT, max_size=2)), min_size=1, max_size=3))
def test_appended_chunks_equal_the_template_rendering(tiny, turns):
    """Prompt + each turn's ids + each observation chunk decodes to exactly what the template renders
    for the whole conversation: no drift from re-tokenising (docs/token-pipeline.md, rule 1)."""
    _, tokenizer = tiny
    chat = ChatFormat(tokenizer, tool_output_tokens=10_000, call_format=get_format("hermes"))
    messages = [{"role": "user", "content": "key 3"}]
    ids = chat.prompt(messages, [])
    for assistant, tool_outputs in turns:
        ids += chat.encode(assistant) + [tokenizer.eos_token_id]
        new = [{"role": "tool", "content": out} for out in tool_outputs] or [{"role": "user", "content": "go on"}]
        ids += chat.observation(new, turn_ended_with_eos=True)
        messages += [{"role": "assistant", "content": assistant}, *new]
    expected = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert tokenizer.decode(ids) == expected


def test_observation_after_a_length_cut_closes_the_turn(tiny):
    _, tokenizer = tiny
    chat = ChatFormat(tokenizer, tool_output_tokens=100, call_format=get_format("hermes"))
    chunk = tokenizer.decode(chat.observation([{"role": "tool", "content": "x"}], turn_ended_with_eos=False))
    assert chunk == "<|im_end|>\n<|im_start|>tool\nx<|im_end|>\n<|im_start|>assistant\n"


def test_tool_output_budget_is_counted_in_tokens(tiny):
    _, tokenizer = tiny
    chat = ChatFormat(tokenizer, tool_output_tokens=5, call_format=get_format("hermes"))
    cut = chat.cut_to_budget("abcdefghij")
    assert cut.startswith("abcde\n[... cut: 5 more characters over the tool output budget of 5 tokens]")
    assert chat.cut_to_budget("abcde") == "abcde"


def test_a_huge_tool_output_is_cut_before_it_is_tokenized(tiny, monkeypatch):
    """A Tool that returns megabytes must not make the rollout tokenize megabytes."""
    _, tokenizer = tiny
    chat = ChatFormat(tokenizer, tool_output_tokens=5, call_format=get_format("hermes"))
    encoded: list[int] = []
    monkeypatch.setattr(chat, "encode", lambda text: encoded.append(len(text)) or ChatFormat.encode(chat, text))
    cut = chat.cut_to_budget("x" * 20_000_000)
    assert max(encoded) <= 5 * MAX_CHARS_PER_TOKEN
    assert cut.startswith("xxxxx\n[... cut: 19,999,995 more characters")


def _engine(tiny, **overrides):
    model, tokenizer = tiny
    cfg = RolloutConfig(**{"max_turns": 2, "max_new_tokens": 12, "max_context": 400, **overrides})
    return HfRolloutEngine(model, tokenizer, LookupEnv, cfg, torch.device("cpu")), cfg


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), max_new=st.integers(1, 16))
def test_masks_logprobs_and_batch_match_the_rollout(tiny, seed, max_new):
    engine, _ = _engine(tiny, max_new_tokens=max_new)
    episodes = engine.run([{"key": "1"}, {"key": "2"}], group_size=2, seed=seed)
    for ep in episodes:
        ep.check_invariants()  # loss_mask == 1 exactly where role == assistant
        assert all((lp is None) == (m == 0) for lp, m in zip(ep.rollout_logprobs, ep.loss_mask))
        assert all(lp <= 0 for lp in ep.rollout_logprobs if lp is not None)
        prompt = engine.chat.prompt(ep.prompt_messages, ep.tool_schemas)
        assert ep.token_ids[: len(prompt)] == prompt
        for turn, end in zip(ep.turns, ep.turn_end_positions):
            assert ep.token_roles[end] == "assistant" and ep.token_turns[end] == turn.index
    batch = collate(episodes, pad_id=0)
    for row, ep in enumerate(episodes):  # the training batch is the rollout's token ids, unchanged
        assert batch.input_ids[row, : len(ep.token_ids)].tolist() == ep.token_ids
        assert batch.sampled_mask[row, : len(ep.token_ids)].tolist() == [float(m) for m in ep.loss_mask]


def test_same_seed_same_episodes(tiny):
    engine, _ = _engine(tiny)
    a = engine.run([{"key": "4"}], group_size=3, seed=7)
    b = engine.run([{"key": "4"}], group_size=3, seed=7)
    assert [e.token_ids for e in a] == [e.token_ids for e in b]
    assert [e.rollout_logprobs for e in a] == [e.rollout_logprobs for e in b]


def test_context_overflow_truncates(tiny):
    engine, _ = _engine(tiny, max_context=300, max_turns=5)
    episodes = engine.run([{"key": "1"}], group_size=4, seed=0)
    assert all(len(e.token_ids) <= 300 for e in episodes)
    prompt_len = len(engine.chat.prompt(episodes[0].prompt_messages, episodes[0].tool_schemas))
    assert prompt_len < 300


class PaddedLookupEnv(LookupEnv):
    """A prompt as long as the task says: long prompts beside short ones in one batch."""

    def reset(self, task):
        [message] = super().reset(task)
        return [{**message, "content": message["content"] + " " * task.get("pad", 0)}]


def test_a_prompt_longer_than_the_context_is_truncated_before_generating(tiny):
    model, tokenizer = tiny
    chat = ChatFormat(tokenizer, tool_output_tokens=32, call_format=get_format("hermes"))
    short_prompt = len(chat.prompt([{"role": "user", "content": "key 1"}], [t.schema() for t in LookupEnv().tools]))
    cfg = RolloutConfig(max_turns=1, max_new_tokens=4, max_context=short_prompt + 20)
    engine = HfRolloutEngine(model, tokenizer, PaddedLookupEnv, cfg, torch.device("cpu"))
    long, short = engine.run([{"key": "1", "pad": 40}, {"key": "1"}], group_size=1, seed=0)
    assert long.status == "truncated" and long.status_reason == "prompt_over_max_context" and long.turns == []
    assert long.response_length == 0 and short.turns


def test_every_prompt_longer_than_the_context_is_an_error_not_an_empty_run(tiny):
    engine, _ = _engine(tiny, max_context=50)
    with pytest.raises(
        ValueError, match=r"every prompt is longer than rollout.max_context \(\d+ tokens or more.*max_context is 50"
    ):
        engine.run([{"key": "1"}], group_size=2, seed=0)


def test_scripted_episode_runs_tools_and_scores():
    cfg = RolloutConfig()
    env = LookupEnv()
    ep = run_scripted_episode(env, {"key": "3"}, env.scripted_turns({"key": "3"}), cfg)
    assert ep.status == "finished"
    assert ep.turns[0].tool_calls[0].result == "gold"
    assert ep.reward_breakdown == {"looked_up": 1.0, "answered": 1.0}
    assert ep.total_reward == 2.0


def test_env_errors_end_the_episode_not_the_run():
    class Broken(LookupEnv):
        def reset(self, task):
            raise KeyError("key")

    ep = run_scripted_episode(Broken(), {}, ["hi"], RolloutConfig())
    assert ep.status == "error" and "reset raised KeyError" in ep.status_reason


def test_tool_calls_run_while_other_episodes_still_generate(tiny, monkeypatch):
    import threading
    import time

    from agentrl.examples.lookup.env import Lookup

    tool_ran = threading.Event()
    original = Lookup.execute

    def watched(self, key):
        tool_ran.set()
        return original(self, key)

    monkeypatch.setattr(Lookup, "execute", watched)
    engine, _ = _engine(tiny, max_turns=1)
    call = engine.chat.encode('<tool_call>{"name": "lookup", "arguments": {"key": "1"}}</tool_call>')
    eos = engine.eos_id

    def sample(contexts, limits, call_ends, generator, row_done, temperature, top_p):
        row_done(0, call + [eos], [-1.0] * (len(call) + 1), "eos")
        waited = tool_ran.wait(timeout=10)  # row 1 is "still generating" until episode 0's tool has run
        row_done(1, [eos], [-1.0], "eos" if waited else "limit")

    monkeypatch.setattr(engine.sampler, "_sample", sample)
    started = time.perf_counter()
    first, second = engine.run([{"key": "1"}], group_size=2, seed=0)
    assert time.perf_counter() - started < 5
    assert first.turns[0].tool_calls[0].result == "blue"
    assert second.turns[0].finish_reason == "stop"  # row 1 saw the tool finish before it stopped


def test_a_turn_ends_at_its_closed_tag_call_and_the_tool_result_follows(tiny, monkeypatch):
    """tool_format tags + stop_at_tool_call: generation stops right after </calculator>, the call runs,
    and the next turn sees its result (the model cannot run past the call and guess the result)."""
    from agentrl.recipes.arithmetic.env import ArithmeticEnv

    model, tokenizer = tiny
    cfg = RolloutConfig(
        max_turns=2, max_new_tokens=40, max_context=2000, tool_format="tags", stop_at_tool_call=True, temperature=0.0
    )
    engine = HfRolloutEngine(model, tokenizer, lambda: ArithmeticEnv(examples=1), cfg, torch.device("cpu"))
    scripts = [engine.chat.encode("<calculator>6 * 7</calculator> = 40"), engine.chat.encode("Answer: 42")]
    position = {"turn": 0, "token": 0}

    def scripted_pick(logits, generators, temperature, top_p):
        script = scripts[position["turn"]]
        token = script[min(position["token"], len(script) - 1)] if position["token"] < len(script) else engine.eos_id
        position["token"] += 1
        return torch.tensor([token]), torch.tensor([-0.5])

    original_generate = engine._generate

    def next_turn(*args, **kwargs):
        position["token"] = 0
        original_generate(*args, **kwargs)
        position["turn"] += 1

    monkeypatch.setattr(engine.sampler, "_pick", scripted_pick)
    monkeypatch.setattr(engine, "_generate", next_turn)
    (episode,) = engine.run([{"question": "What is 6 times 7?", "answer": 42}], group_size=1, seed=0)
    assert [t.assistant for t in episode.turns] == ["<calculator>6 * 7</calculator>", "Answer: 42"]
    assert episode.turns[0].finish_reason == "stop"
    assert episode.turns[0].tool_calls[0].result == 42
    assert episode.reward_breakdown == {"accuracy": 1.0, "tool_use": 1.0, "answered": 1.0}
    text = tokenizer.decode(episode.token_ids)
    assert (
        "<calculator>6 * 7</calculator><|im_end|>\n<|im_start|>tool\n42<|im_end|>\n<|im_start|>assistant\nAnswer: 42"
        in text
    )
    episode.check_invariants()


def test_each_row_draws_its_tokens_with_their_probabilities_from_its_own_generator():
    """The hf engine's sampler inverts each row's CDF at one uniform number from the row's generator: tokens come
    with their probabilities (a chi-square test at 20,000 draws a row), a token of probability 0 never comes (the
    top-p cut leaves zeros, at the ends too), a row's draws depend on its generator alone, and a finished row
    (no generator) draws nothing."""
    probs = torch.tensor([[0.0, 0.1, 0.0, 0.6, 0.3, 0.0], [0.5, 0.0, 0.25, 0.0, 0.0, 0.25]])
    draws = 20_000
    generators = [torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)]
    tokens = torch.stack([_draw(probs, generators) for _ in range(draws)])  # [draws, rows]
    for row in range(len(probs)):
        counts = torch.bincount(tokens[:, row], minlength=probs.shape[1]).double()
        assert counts[probs[row] == 0].sum() == 0
        expected = probs[row].double() * draws
        kept = expected > 0
        chi_square = float((((counts - expected) ** 2)[kept] / expected[kept]).sum())
        assert chi_square < 16.3  # p = 0.001 with 3 degrees of freedom (at most 4 tokens with probability > 0)
    alone = torch.Generator().manual_seed(2)
    assert [int(_draw(probs[1:], [alone])) for _ in range(50)] == tokens[:50, 1].tolist()
    assert int(_draw(probs, [None, alone])[0]) == 1  # row 0 has no generator: its first token of nonzero probability

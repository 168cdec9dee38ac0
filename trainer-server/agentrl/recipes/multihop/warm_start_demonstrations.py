"""Demonstrations of the two-hop behaviour for the warm start of `multihop_warm_grpo.agentrl.yaml` (data.sft).

`python -m agentrl.recipes.multihop.warm_start_demonstrations` writes `data/demonstrations.jsonl`: for each question
of the config's data.train (never a held-out one), three turns played through the rollout's own parse, execute and
interpret path (`run_scripted_episode`) with the config's env, so every tool message is what the env's search tool
returns over the run's corpus:

1. `<search>QUESTION</search>`;
2. `<search>BRIDGE</search>`, BRIDGE the title of the first supporting paragraph the first search did not return
   (supporting facts' order; MuSiQue's decomposition order), or of the second one when it returned them all;
3. `Answer: ANSWER`, the record's answer, as the env's `score` reads it.

A demonstration is kept only when each turn fits rollout.max_new_tokens (a question too long to be written as a
query within it is left out) and the passages as the model reads them (each tool message cut to
rollout.tool_output_tokens, as the rollout cuts it) hold the answer (the env's `holds_the_answer`, never true of
yes/no answers): the model is taught to answer from what it was shown, never to guess. Each line is one OpenAI chat
transcript (rollout/demonstrations.py): the prompt exactly as the env's reset gives it (its `prompt_length` messages:
the worked example's turns are prompt, never learned), then the three turns and the two tool messages.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from agentrl.contract.config import RunConfig, load_config, resolve_paths
from agentrl.environment.toolcall import get_format
from agentrl.models.loading import load_policy
from agentrl.recipes.demonstrations import transcript, write_demonstrations
from agentrl.recipes.multihop.search import record_paragraphs
from agentrl.rollout.chat import ChatFormat
from agentrl.rollout.scripted_episode import run_scripted_episode

RECIPE = Path(__file__).parent
CONFIG = RECIPE / "multihop_warm_grpo.agentrl.yaml"
DEMONSTRATIONS = RECIPE / "data" / "demonstrations.jsonl"


def supporting_paragraphs(task: dict[str, Any]) -> list[tuple[str, str]]:
    """The task's supporting paragraphs as (title, the `title: text` paragraph the corpus holds), in hop order."""
    if task.get("paragraphs"):  # MuSiQue: the decomposition's paragraphs, hop by hop
        paragraphs = task["paragraphs"]
        hops = [d["paragraph_support_idx"] for d in task.get("question_decomposition", [])]
        chosen = [paragraphs[i] for i in hops if i is not None] or [p for p in paragraphs if p.get("is_supporting")]
        return [(p["title"], f"{p['title']}: {p['paragraph_text'].strip()}") for p in chosen]
    by_title = dict(zip((title for title, _ in task["context"]), record_paragraphs(task, "task"), strict=True))
    titles = dict.fromkeys(title for title, _ in task["supporting_facts"])
    return [(title, by_title[title]) for title in titles if title in by_title]


def bridge_title(task: dict[str, Any], first_passages: list[str]) -> str | None:
    """What the second search looks up: the first supporting paragraph's title the first search did not return, or
    the second one's when it returned them all; None for a task with fewer than two supporting paragraphs."""
    supporting = supporting_paragraphs(task)
    if len(supporting) < 2:
        return None
    missed = [title for title, paragraph in supporting if paragraph not in first_passages]
    return missed[0] if missed else supporting[1][0]


def demonstration(task: dict[str, Any], config: RunConfig, make_env: Any, chat: ChatFormat) -> dict[str, Any] | None:
    """The task's two-hop demonstration, or None when the passages it reads do not hold the answer."""
    question, answer = task["question"], str(task["answer"])
    first_passages = make_env().tools[0].execute(question)
    bridge = bridge_title(task, first_passages)
    if bridge is None:
        return None
    turns = [f"<search>{question}</search>", f"<search>{bridge}</search>", f"Answer: {answer}"]
    # A turn the rollout would cut (its tokens and the end-of-sequence one over rollout.max_new_tokens) teaches a
    # query no rollout can finish: such a question is left out (the warm start's first run learned to begin them).
    if any(len(chat.tokenizer(turn)["input_ids"]) + 1 > config.rollout.max_new_tokens for turn in turns):
        return None
    env = make_env()
    episode = run_scripted_episode(env, task, turns, config.rollout)
    observations = [turn.observation for turn in episode.turns[:2]]
    if episode.status != "finished" or None in observations:
        return None
    if not env.holds_the_answer([chat.cut_to_budget(text) for text in observations]):
        return None
    return transcript(str(task["_id"] if "_id" in task else task["id"]), episode)


def write_multihop_demonstrations(config_path: Path = CONFIG, out: Path = DEMONSTRATIONS) -> tuple[int, int]:
    """Writes the demonstrations of the config's data.train; (written, training questions)."""
    config = resolve_paths(load_config(config_path), config_path.parent)
    _, tokenizer, _ = load_policy(config.model, config.seed)
    chat = ChatFormat(tokenizer, config.rollout.tool_output_tokens, get_format(config.rollout.tool_format))
    return write_demonstrations(config_path, out, None, functools.partial(demonstration, chat=chat))


if __name__ == "__main__":
    written, questions = write_multihop_demonstrations()
    print(f"{DEMONSTRATIONS}: {written} demonstrations of {questions} training questions")

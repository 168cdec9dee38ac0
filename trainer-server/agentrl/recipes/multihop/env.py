"""Multi-hop QA with a search tool: the Agent-R1 setting (HotpotQA, 2WikiMultihopQA, MuSiQue).

The agent searches, reads, searches again, and answers with `Answer: ...`. The score is that stated
answer's exact match, F1 and substring match against the gold answer (HotpotQA's official normalisation);
an episode without an `Answer:` line answered nothing and scores 0, as an answer-tag extractor does in
Search-R1 and Agent-R1. A MuSiQue record's `answer_aliases` are golds too for exact match and F1, each the
maximum over the answer and its aliases (MuSiQue's official evaluation); substring match and the retrieval
check use the `answer` alone, since aliases include codes such as "in", "no" or "it" that occur inside
almost any text. The breakdown also says whether an answer was given (`answered`) and whether a
search, or naive RAG's one retrieval, brought back a passage holding the answer (`retrieved_answer`).

Reward: the answer's F1 (`answer_reward: em`: its exact match), plus a process reward of RETRIEVAL_REWARD for the first search whose passages
contain the gold answer (a good intermediate action, earned only by searching well). No format bonus,
and no penalty for a failed call: measured on this recipe, F1 over free text taught the 135M model to stop
searching and write long sentences that overlap the answer by chance, and a -0.1 per failed call drove it
away from the tool sooner still.

The prompt shows the search-and-answer pattern once (`examples: 1`), as a worked two-hop example in real
chat turns, in the call format the recipe's configs use (`rollout.tool_format: tags`,
`<search>query</search>`, which a 135M model writes far more reliably than JSON). The example's question
and paragraphs are in no data file.

The search corpus is the union of the paragraphs of every data file the run or evaluation reads (`context`
in HotpotQA's and 2WikiMultihopQA's layout, `paragraphs` in MuSiQue's): agentrl passes the env their paths as
`data_files` (data.train, data.eval, and eval's --data), so a run evaluated on another HotpotQA,
2WikiMultihopQA or MuSiQue file searches that file's paragraphs too. A data file with a record in no known
layout is an error naming the file and line (see search.py for the layouts read).

`first_search: question` (opt-in; default none) makes the agent's first retrieval FOR it, as Naive RAG does:
before the agent's first turn the env searches with the whole question (top_k passages, the same index) and the
prompt ends with that search as if the agent had made it, an assistant turn `<search>QUESTION</search>` and a
tool turn with the passages, so the agent's first sampled turn reads them and can search again (the second hop)
or answer. The agent never wrote that search: it is prompt, not trained on (docs/token-pipeline.md, rule 2), it
is not counted in the episode's tool calls (searches per question counts the agent's own), and it is not cut to
`rollout.tool_output_tokens` (the prompt is not; Naive RAG's passages are not either), while the agent's own
searches are. It does count for `retrieved_answer` (as Naive RAG's one retrieval does), so the retrieval reward
goes to a later search only when the question's own retrieval missed the answer. With `examples: 1` the worked
example's first hop is then a search with the example question too, and the system prompt says that the first
search is made for the agent.

`first_search: question-in-prompt` makes the same retrieval but shows its passages as Naive RAG does, in the user
message (`Passages: ... Question: ...`), with the search tool given all the same: the agent may answer from them or
search for what they lack. Its worked example shows the example question with the paragraph its first hop finds,
then a search for the second hop and the answer. As with `question`, the retrieval counts for `retrieved_answer`
and is not the agent's: no tool call of the episode.

Baselines (`agentrl eval --baseline`): `naive-rag` retrieves once with the question from the same corpus,
puts the passages in the prompt and gives no tools (with `examples: 1`, the worked example's question
and paragraphs are shown the same way first; `first_search` does not change it); `base-tool-call` is this env
with the untrained model, with whatever prompt the config's env.args give (`first_search` included).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentrl import EpisodeScore, StepResult, ToolCallOutcome, ToolEnv
from agentrl.recipes.answers import exact_match, f1_score, final_answer_text, normalize_answer, substring_match
from agentrl.recipes.multihop.search import Search, index_of

RETRIEVAL_REWARD = 0.1
# What the stated answer earns: its F1 (the default), or its exact match, which a hedged answer ("X or Y" to "which
# came first, X or Y?") cannot earn: trained on the 2,195-question split with F1, the agent learned to name both.
ANSWER_REWARDS = ("f1", "em")
TOOL_PROMPT = (
    "Answer the question. Use the search tool to find the facts you need; you may search several times. "
    "When you know the answer, end with a line 'Answer: <short answer>'."
)
# first_search: question: the system prompt says what the env did.
SEEDED_TOOL_PROMPT = (
    "Answer the question. The first search, with the whole question, is made for you; search again for the "
    "facts its passages do not give. When you know the answer, end with a line 'Answer: <short answer>'."
)
# first_search: question-in-prompt: the passages are in the user message, as Naive RAG's are; the tool is given too.
PASSAGES_TOOL_PROMPT = (
    "Answer the question using the passages. If they do not give the answer, use the search tool to find the facts "
    "you need. When you know the answer, end with a line 'Answer: <short answer>'."
)
FIRST_SEARCHES = (None, "question", "question-in-prompt")
NAIVE_RAG_PROMPT = "Answer the question using the passages. End with a line 'Answer: <short answer>'."
# The worked example: (query, the paragraph it finds) per hop, then the answer.
EXAMPLE_QUESTION = "In which city was the designer of the Eiffel Tower born?"
EXAMPLE_HOPS = [
    (
        "Eiffel Tower designer",
        "Eiffel Tower: The Eiffel Tower is a wrought-iron lattice tower in Paris. It is named "
        "after the engineer Gustave Eiffel, whose company designed and built the tower.",
    ),
    (
        "Gustave Eiffel birthplace",
        "Gustave Eiffel: Alexandre Gustave Eiffel (born 15 December 1832 in Dijon) was a French civil engineer.",
    ),
]
EXAMPLE_ANSWER = "Dijon"


def golds_of(task: dict[str, Any]) -> list[str]:
    """The task's gold answers: `answer`, then MuSiQue's `answer_aliases` when the record has them, each once; an
    alias that normalises to nothing (MuSiQue has "$") is left out, as an empty answer would match it exactly."""
    aliases = task.get("answer_aliases") or []
    if not (isinstance(aliases, list) and all(isinstance(a, str) for a in aliases)):
        raise ValueError(f"answer_aliases is not a list of strings: {aliases!r}")
    return list(dict.fromkeys([str(task["answer"]), *(a for a in aliases if normalize_answer(a))]))


class MultiHopQAEnv(ToolEnv):
    def __init__(
        self,
        top_k: int = 3,
        baseline: str | None = None,
        examples: int = 0,
        answer_reward: str = "f1",
        first_search: str | None = None,
        *,
        data_files: Sequence[str],
        **args: Any,
    ) -> None:
        if answer_reward not in ANSWER_REWARDS:
            raise ValueError(f"answer_reward must be one of {sorted(ANSWER_REWARDS)}, got {answer_reward!r}")
        if baseline not in (None, "naive-rag"):
            raise ValueError(f"unknown baseline {baseline!r} for multi-hop QA; known: naive-rag")
        if first_search not in FIRST_SEARCHES:
            raise ValueError(f"first_search must be one of {list(FIRST_SEARCHES)}, got {first_search!r}")
        if examples not in (0, 1):
            raise ValueError(f"examples must be 0 or 1 (there is one worked example), got {examples!r}")
        super().__init__(
            top_k=top_k,
            baseline=baseline,
            examples=examples,
            answer_reward=answer_reward,
            first_search=first_search,
            data_files=data_files,
            **args,
        )
        self.answer_reward = answer_reward
        self.top_k = top_k
        self.examples = examples
        self.first_search = first_search
        self.index = index_of(data_files)
        self.naive_rag = baseline == "naive-rag"
        self.tools = [] if self.naive_rag else [Search(self.index, top_k)]
        self.gold = ""  # the record's answer
        self.golds: list[str] = []  # the answer and its aliases
        self.retrieved_gold = False

    def reset(self, task: dict[str, Any]) -> list[dict[str, Any]]:
        self.golds = golds_of(task)
        self.gold = self.golds[0]
        self.retrieved_gold = False
        question = task["question"]
        if self.naive_rag:
            passages = self.index.search(question, self.top_k)
            self.retrieved_gold = self.holds_the_answer(passages)
            example = (
                []
                if not self.examples
                else [
                    {
                        "role": "user",
                        "content": self.naive_rag_question(EXAMPLE_QUESTION, [p for _, p in EXAMPLE_HOPS]),
                    },
                    {"role": "assistant", "content": f"Answer: {EXAMPLE_ANSWER}"},
                ]
            )
            return [
                {"role": "system", "content": NAIVE_RAG_PROMPT},
                *example,
                {"role": "user", "content": self.naive_rag_question(question, passages)},
            ]
        if self.first_search == "question":  # the first search is made for the agent, with the whole question
            passages = self.index.search(question, self.top_k)
            self.retrieved_gold = self.holds_the_answer(passages)
            return [
                {"role": "system", "content": SEEDED_TOOL_PROMPT},
                *self.worked_example(),
                {"role": "user", "content": question},
                {"role": "assistant", "content": f"<search>{question}</search>"},
                {"role": "tool", "content": "\n".join(passages)},
            ]
        if self.first_search == "question-in-prompt":  # the same retrieval, its passages shown as Naive RAG's are
            passages = self.index.search(question, self.top_k)
            self.retrieved_gold = self.holds_the_answer(passages)
            return [
                {"role": "system", "content": PASSAGES_TOOL_PROMPT},
                *self.worked_example(),
                {"role": "user", "content": self.naive_rag_question(question, passages)},
            ]
        return [
            {"role": "system", "content": TOOL_PROMPT},
            *self.worked_example(),
            {"role": "user", "content": question},
        ]

    @staticmethod
    def naive_rag_question(question: str, passages: list[str]) -> str:
        listed = "\n".join(f"- {p}" for p in passages)
        return f"Passages:\n{listed}\n\nQuestion: {question}"

    def worked_example(self) -> list[dict[str, Any]]:
        """The example as the chat turns an episode would produce (with `first_search: question`, its first search
        is the one the env makes: the whole question)."""
        if not self.examples:
            return []
        if self.first_search == "question-in-prompt":  # the first hop's paragraph in the prompt, then one search
            (_, found), (query, paragraph) = EXAMPLE_HOPS
            return [
                {"role": "user", "content": self.naive_rag_question(EXAMPLE_QUESTION, [found])},
                {"role": "assistant", "content": f"<search>{query}</search>"},
                {"role": "tool", "content": paragraph},
                {"role": "assistant", "content": f"Answer: {EXAMPLE_ANSWER}"},
            ]
        messages: list[dict[str, Any]] = [{"role": "user", "content": EXAMPLE_QUESTION}]
        hops = EXAMPLE_HOPS
        if self.first_search == "question":
            hops = [(EXAMPLE_QUESTION, EXAMPLE_HOPS[0][1]), *EXAMPLE_HOPS[1:]]
        for query, paragraph in hops:
            messages += [
                {"role": "assistant", "content": f"<search>{query}</search>"},
                {"role": "tool", "content": paragraph},
            ]
        return [*messages, {"role": "assistant", "content": f"Answer: {EXAMPLE_ANSWER}"}]

    def step(self, assistant_text: str, calls: list[ToolCallOutcome]) -> StepResult:
        if not calls:
            return StepResult(messages=[], done=True)
        messages = [{"role": "tool", "content": "Error: " + c.error if c.error else "\n".join(c.result)} for c in calls]
        found = self.holds_the_answer([p for c in calls if not c.error for p in c.result])
        reward = RETRIEVAL_REWARD if found and not self.retrieved_gold else 0.0
        self.retrieved_gold |= found
        return StepResult(messages=messages, reward=reward)

    def holds_the_answer(self, passages: list[str]) -> bool:
        """The record's answer (not its aliases) occurs in these passages; never for yes/no answers, which occur
        anywhere."""
        return normalize_answer(self.gold) not in ("yes", "no") and any(substring_match(p, self.gold) for p in passages)

    def score(self, final_text: str) -> EpisodeScore:
        answer = final_answer_text(final_text)
        if answer is None:
            em = f1 = sub = 0.0
        else:
            em = max(exact_match(answer, gold) for gold in self.golds)
            f1 = max(f1_score(answer, gold) for gold in self.golds)
            sub = substring_match(answer, self.gold)
        return EpisodeScore(
            reward=em if self.answer_reward == "em" else f1,
            breakdown={
                "em": em,
                "f1": f1,
                "substring": sub,
                "answered": float(answer is not None),
                "retrieved_answer": float(self.retrieved_gold),
            },
            final_answer=answer,
        )

    def scripted_turns(self, task: dict[str, Any]) -> list[str]:
        return [f"<search>{task['question']}</search>", f"Answer: {task['answer']}"]

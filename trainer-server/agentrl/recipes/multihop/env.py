"""Multi-hop QA with a search tool: the Agent-R1 setting (HotpotQA, 2WikiMultihopQA).

The agent searches, reads, searches again, and answers with `Answer: ...`. Outcome reward: the answer's
F1 against the gold answer, the task's real success, and nothing for the format alone (a format bonus
is earned without searching and takes over a small model's training). The breakdown reports exact
match, F1 and substring match separately (HotpotQA's official normalisation) and whether an `Answer:`
line was given. Process reward: -0.1 for a turn with a malformed or failing call, and nothing for a
search that ran: a bonus per search is earned by searching until the turn limit without ever answering.

The prompt shows the search-and-answer pattern once (`examples: 1`), as a worked two-hop example in real
chat turns, in the call format the recipe's configs use (`rollout.tool_format: tags`, `<search>query</search>`,
which a 135M model writes far more reliably than JSON). The example's question and paragraphs are in no
data file.

The search corpus is the union of the `context` paragraphs of every data file the run or evaluation reads:
agentrl passes the env their paths as `data_files` (data.train, data.eval, and eval's --data), so a run
evaluated on another HotpotQA or 2WikiMultihopQA file searches that file's paragraphs too. A data file
without context paragraphs is an error naming the file (see search.py for the layouts read).

Baselines (`agentrl eval --baseline`): `naive-rag` retrieves once with the question from the same corpus,
puts the passages in the prompt and gives no tools (with `examples: 1`, the worked example's question
and paragraphs are shown the same way first); `base-tool-call` is this env with the untrained model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentrl import EpisodeScore, StepResult, ToolCallOutcome, ToolEnv
from agentrl.recipes.answers import exact_match, f1_score, final_answer_text, substring_match
from agentrl.recipes.multihop.search import Search, index_of

TOOL_PROMPT = (
    "Answer the question. Use the search tool to find the facts you need; you may search several times. "
    "When you know the answer, end with a line 'Answer: <short answer>'."
)
NAIVE_RAG_PROMPT = "Answer the question using the passages. End with a line 'Answer: <short answer>'."
# The worked example: (query, the paragraph it finds) per hop, then the answer.
EXAMPLE_QUESTION = "In which city was the designer of the Eiffel Tower born?"
EXAMPLE_HOPS = [
    ("Eiffel Tower designer", "Eiffel Tower: The Eiffel Tower is a wrought-iron lattice tower in Paris. It is named "
     "after the engineer Gustave Eiffel, whose company designed and built the tower."),
    ("Gustave Eiffel birthplace", "Gustave Eiffel: Alexandre Gustave Eiffel (born 15 December 1832 in Dijon) was a "
     "French civil engineer."),
]
EXAMPLE_ANSWER = "Dijon"


class MultiHopQAEnv(ToolEnv):
    def __init__(self, top_k: int = 3, baseline: str | None = None, examples: int = 0, *,
                 data_files: Sequence[str], **args: Any) -> None:
        if baseline not in (None, "naive-rag"):
            raise ValueError(f"unknown baseline {baseline!r} for multi-hop QA; known: naive-rag")
        if examples not in (0, 1):
            raise ValueError(f"examples must be 0 or 1 (there is one worked example), got {examples!r}")
        super().__init__(top_k=top_k, baseline=baseline, examples=examples, data_files=data_files, **args)
        self.top_k = top_k
        self.examples = examples
        self.index = index_of(data_files)
        self.naive_rag = baseline == "naive-rag"
        self.tools = [] if self.naive_rag else [Search(self.index, top_k)]
        self.gold = ""

    def reset(self, task: dict[str, Any]) -> list[dict[str, Any]]:
        self.gold = str(task["answer"])
        question = task["question"]
        if self.naive_rag:
            example = [] if not self.examples else [
                {"role": "user", "content": self.naive_rag_question(EXAMPLE_QUESTION, [p for _, p in EXAMPLE_HOPS])},
                {"role": "assistant", "content": f"Answer: {EXAMPLE_ANSWER}"}]
            return [{"role": "system", "content": NAIVE_RAG_PROMPT}, *example,
                    {"role": "user", "content": self.naive_rag_question(question, self.index.search(question, self.top_k))}]
        return [{"role": "system", "content": TOOL_PROMPT}, *self.worked_example(),
                {"role": "user", "content": question}]

    @staticmethod
    def naive_rag_question(question: str, passages: list[str]) -> str:
        listed = "\n".join(f"- {p}" for p in passages)
        return f"Passages:\n{listed}\n\nQuestion: {question}"

    def worked_example(self) -> list[dict[str, Any]]:
        """The example as the chat turns an episode would produce."""
        if not self.examples:
            return []
        messages: list[dict[str, Any]] = [{"role": "user", "content": EXAMPLE_QUESTION}]
        for query, paragraph in EXAMPLE_HOPS:
            messages += [{"role": "assistant", "content": f"<search>{query}</search>"},
                         {"role": "tool", "content": paragraph}]
        return [*messages, {"role": "assistant", "content": f"Answer: {EXAMPLE_ANSWER}"}]

    def step(self, assistant_text: str, calls: list[ToolCallOutcome]) -> StepResult:
        if not calls:
            return StepResult(messages=[], done=True)
        messages = [{"role": "tool", "content": "Error: " + c.error if c.error else "\n".join(c.result)}
                    for c in calls]
        return StepResult(messages=messages, reward=-0.1 if any(c.error for c in calls) else 0.0)

    def score(self, final_text: str) -> EpisodeScore:
        answer = final_answer_text(final_text)
        prediction = answer if answer is not None else final_text
        em, f1, sub = (exact_match(prediction, self.gold), f1_score(prediction, self.gold),
                       substring_match(prediction, self.gold))
        return EpisodeScore(
            reward=f1,
            breakdown={"em": em, "f1": f1, "substring": sub, "format": float(answer is not None)},
            final_answer=prediction.strip() or None,
        )

    def scripted_turns(self, task: dict[str, Any]) -> list[str]:
        return [f"<search>{task['question']}</search>", f"Answer: {task['answer']}"]

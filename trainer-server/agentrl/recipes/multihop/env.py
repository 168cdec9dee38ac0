"""Multi-hop QA with a search tool: the Agent-R1 setting (HotpotQA, 2WikiMultihopQA).

The agent searches, reads, searches again, and answers with `Answer: ...`. Outcome reward: the answer's
F1 against the gold answer plus 0.2 for giving an `Answer:` line; the breakdown reports exact match,
F1 and substring match separately (HotpotQA's official normalisation). Process reward: +0.05 for each
turn whose searches ran, -0.1 for a turn with a malformed or failing call.

The search corpus is the union of the `context` paragraphs of every data file the run or evaluation reads:
agentrl passes the env their paths as `data_files` (data.train, data.eval, and eval's --data), so a run
evaluated on another HotpotQA or 2WikiMultihopQA file searches that file's paragraphs too. A data file
without context paragraphs is an error naming the file (see search.py for the layouts read).

Baselines (`agentrl eval --baseline`): `naive-rag` retrieves once with the question from the same corpus,
puts the passages in the prompt and gives no tools; `base-tool-call` is this env with the untrained model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentrl import EpisodeScore, StepResult, ToolCallOutcome, ToolEnv
from agentrl.recipes.answers import exact_match, f1_score, final_answer_text, substring_match
from agentrl.recipes.multihop.search import Search, index_of

FORMAT_REWARD = 0.2
TOOL_PROMPT = (
    "Answer the question. Use the search tool to find the facts you need; you may search several times. "
    "When you know the answer, end with a line 'Answer: <short answer>'."
)
NAIVE_RAG_PROMPT = "Answer the question using the passages. End with a line 'Answer: <short answer>'."


class MultiHopQAEnv(ToolEnv):
    def __init__(self, top_k: int = 3, baseline: str | None = None, *, data_files: Sequence[str],
                 **args: Any) -> None:
        if baseline not in (None, "naive-rag"):
            raise ValueError(f"unknown baseline {baseline!r} for multi-hop QA; known: naive-rag")
        super().__init__(top_k=top_k, baseline=baseline, data_files=data_files, **args)
        self.top_k = top_k
        self.index = index_of(data_files)
        self.naive_rag = baseline == "naive-rag"
        self.tools = [] if self.naive_rag else [Search(self.index, top_k)]
        self.gold = ""

    def reset(self, task: dict[str, Any]) -> list[dict[str, Any]]:
        self.gold = str(task["answer"])
        question = task["question"]
        if self.naive_rag:
            passages = "\n".join(f"- {p}" for p in self.index.search(question, self.top_k))
            return [{"role": "system", "content": NAIVE_RAG_PROMPT},
                    {"role": "user", "content": f"Passages:\n{passages}\n\nQuestion: {question}"}]
        return [{"role": "system", "content": TOOL_PROMPT}, {"role": "user", "content": question}]

    def step(self, assistant_text: str, calls: list[ToolCallOutcome]) -> StepResult:
        if not calls:
            return StepResult(messages=[], done=True)
        messages = [{"role": "tool", "content": "Error: " + c.error if c.error else "\n".join(c.result)}
                    for c in calls]
        return StepResult(messages=messages, reward=-0.1 if any(c.error for c in calls) else 0.05)

    def score(self, final_text: str) -> EpisodeScore:
        answer = final_answer_text(final_text)
        prediction = answer if answer is not None else final_text
        em, f1, sub = (exact_match(prediction, self.gold), f1_score(prediction, self.gold),
                       substring_match(prediction, self.gold))
        return EpisodeScore(
            reward=f1 + FORMAT_REWARD * float(answer is not None),
            breakdown={"em": em, "f1": f1, "substring": sub, "format": float(answer is not None)},
            final_answer=prediction.strip() or None,
        )

    def scripted_turns(self, task: dict[str, Any]) -> list[str]:
        call = json.dumps({"name": "search", "arguments": {"query": task["question"]}})
        return [f"<tool_call>{call}</tool_call>", f"Answer: {task['answer']}"]

"""A search Tool: BM25 (the `bm25s` library) over the union of the multi-hop files' own paragraphs."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from agentrl import Tool

DATA = Path(__file__).parent / "data"
CORPUS_FILES = ("hotpotqa_dev_distractor.jsonl", "2wikimultihopqa_dev.jsonl")


class SearchIndex:
    def __init__(self, paragraphs: list[str]) -> None:
        import bm25s

        self.paragraphs = paragraphs
        self.retriever = bm25s.BM25()
        self.retriever.index(bm25s.tokenize(paragraphs, stopwords="en", show_progress=False), show_progress=False)

    def search(self, query: str, k: int) -> list[str]:
        import bm25s

        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        results, _ = self.retriever.retrieve(tokens, k=min(k, len(self.paragraphs)), show_progress=False)
        return [self.paragraphs[i] for i in results[0]]


def paragraphs_of(paths: list[Path]) -> list[str]:
    seen: dict[str, None] = {}
    for path in paths:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                for title, sentences in json.loads(line)["context"]:
                    seen[f"{title}: {''.join(sentences).strip()}"] = None
    return list(seen)


@cache
def default_index() -> SearchIndex:
    """Built once per process (about 0.2 s for 2,300 paragraphs)."""
    return SearchIndex(paragraphs_of([DATA / name for name in CORPUS_FILES]))


class Search(Tool):
    name = "search"
    description = "Search a Wikipedia paragraph collection. Returns the most relevant paragraphs for a query."
    parameters = {
        "type": "object",
        "properties": {"query": {"type": "string", "minLength": 1, "description": "what to look up"}},
        "required": ["query"],
        "additionalProperties": False,
    }
    timeout_s = 10.0

    def __init__(self, top_k: int = 3) -> None:
        self.top_k = top_k

    def execute(self, query: str) -> Any:
        return default_index().search(query, self.top_k)

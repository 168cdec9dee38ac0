"""A search Tool: BM25 (the `bm25s` library) over the paragraphs of the data files a run reads.

The corpus is the union of every data file's paragraphs (the env receives them as `data_files`: the run's
data.train and data.eval, and eval's --data), so whatever file a run is evaluated on, its paragraphs can be
found. Records use the HotpotQA / 2WikiMultihopQA layout `"context": [[title, [sentence, ...]], ...]`, the
Hugging Face `datasets` export of it, `"context": {"title": [...], "sentences": [[...], ...]}`, or MuSiQue's
`"paragraphs": [{"idx": 0, "title": ..., "paragraph_text": ..., "is_supporting": ...}, ...]`; a file may mix
them, record by record. Each paragraph is the string `title: text`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from agentrl import Tool

CONTEXT_LAYOUT = 'HotpotQA / 2WikiMultihopQA layout: "context": [[title, [sentence, ...]], ...]'
MUSIQUE_LAYOUT = 'MuSiQue layout: "paragraphs": [{"title": ..., "paragraph_text": ...}, ...]'


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


def _context_of(record: dict[str, Any], where: str) -> list[list[Any]]:
    context = record.get("context")
    if isinstance(context, dict):
        titles, sentences = context.get("title"), context.get("sentences")
        if not (isinstance(titles, list) and isinstance(sentences, list) and len(titles) == len(sentences)):
            raise ValueError(f"{where}: context.title and context.sentences are not lists of the same length")
        context = [list(pair) for pair in zip(titles, sentences, strict=True)]
    if not context:
        raise _no_paragraphs(where)
    if not isinstance(context, list):
        raise ValueError(f"{where}: context is not a list ({CONTEXT_LAYOUT})")
    for entry in context:
        if not (
            isinstance(entry, list)
            and len(entry) == 2
            and isinstance(entry[0], str)
            and isinstance(entry[1], list)
            and all(isinstance(s, str) for s in entry[1])
        ):
            raise ValueError(f"{where}: a context entry is not [title, [sentence, ...]] ({CONTEXT_LAYOUT})")
    return context


def record_paragraphs(record: Any, where: str) -> list[str]:
    """One record's `title: text` paragraphs, from `context` (HotpotQA, 2WikiMultihopQA, Hugging Face) or
    `paragraphs` (MuSiQue); `where` (file:line) names it in the error raised for a record in no known layout."""
    if isinstance(record, dict) and record.get("context"):
        # HotpotQA sentences carry their leading space, 2WikiMultihopQA's do not: join them evenly
        return [f"{title}: {' '.join(s.strip() for s in sentences)}" for title, sentences in _context_of(record, where)]
    if isinstance(record, dict) and record.get("paragraphs"):
        paragraphs = record["paragraphs"]
        if not isinstance(paragraphs, list) or not all(
            isinstance(p, dict) and isinstance(p.get("title"), str) and isinstance(p.get("paragraph_text"), str)
            for p in paragraphs
        ):
            raise ValueError(f"{where}: a paragraphs entry is not {{title, paragraph_text}} ({MUSIQUE_LAYOUT})")
        return [f"{p['title']}: {p['paragraph_text'].strip()}" for p in paragraphs]
    raise _no_paragraphs(where)


def _no_paragraphs(where: str) -> ValueError:
    return ValueError(
        f'{where}: the record has no "context" paragraphs and no "paragraphs"; the search corpus is built from '
        f"the paragraphs of every data file the run reads ({CONTEXT_LAYOUT}; or the {MUSIQUE_LAYOUT})"
    )


def paragraphs_of(paths: Iterable[Path]) -> list[str]:
    """The distinct `title: text` paragraphs of the files' records, in first-seen order."""
    seen: dict[str, None] = {}
    for path in paths:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                where = f"{path}:{number}"
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ValueError(f"{where}: not JSON ({err.msg})") from None
                for paragraph in record_paragraphs(record, where):
                    seen[paragraph] = None
    return list(seen)


def index_of(data_files: Sequence[str | Path]) -> SearchIndex:
    """The index over these files' paragraphs, built once per process for each set of files."""
    if not data_files:
        raise ValueError("the search corpus needs at least one data file")
    return _index_of_files(tuple(sorted({Path(path).resolve() for path in data_files})))


@cache
def _index_of_files(files: tuple[Path, ...]) -> SearchIndex:
    # about 0.2 s for the recipe's 2,315 paragraphs; 3.5 s for the 22,074 of train_full.jsonl, heldout.jsonl and the
    # dev files (measured once, on 2 CPU cores busy with other jobs)
    return SearchIndex(paragraphs_of(files))


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

    def __init__(self, index: SearchIndex, top_k: int = 3) -> None:
        self.index = index
        self.top_k = top_k

    def execute(self, query: str) -> Any:
        return self.index.search(query, self.top_k)

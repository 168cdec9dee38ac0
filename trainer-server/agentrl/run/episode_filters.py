"""A config's episode filters (Search Episodes' own: data.sft's `where`, algorithm.rft_where) as the search index
answers them. `filters_of` turns the config section into the index's Filters. `mark_passing` answers them for a
step's own rollouts, before the step is recorded: the episodes are indexed alone, in a temporary folder, by the same
code that indexes a run's step files (episode_search.py), so what passes is exactly what a search of that step in the
run would list once it is recorded, the words of `text` matched by the same full-text rules.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentrl.contract.training_config import Bounds, EpisodeFilter
from agentrl.rollout.episode import Episode
from agentrl.run.episode_search import EpisodeSearch, Filters, Range
from agentrl.run.runstore import TRAJECTORIES_DIR, trajectory_file_name


def filters_of(where: EpisodeFilter) -> Filters:
    def bounds(b: Bounds) -> Range:
        return Range(b.min, b.max)

    return Filters(
        text=where.text,
        text_in=where.text_in,
        tool=where.tool,
        error_kind=where.error_kind,
        status=where.status,
        reward=bounds(where.reward),
        step=bounds(where.step),
        turns=bounds(where.turns),
        health_code=where.health_code,
    )


def mark_passing(
    episodes: list[Episode], where: EpisodeFilter, step: int, tokenizer: Any, run_id: str
) -> tuple[list[Episode], dict[str, float]]:
    """The step's episodes with `passes_filter` set by `where`, and the share that passed (rft/passed_filter)."""
    if not episodes:
        return episodes, {}
    records = [
        episode.to_record(run_id=run_id, step=step, decode_token=lambda i: tokenizer.decode([i]))
        for episode in episodes
    ]
    with tempfile.TemporaryDirectory(prefix="agentrl-filter-") as folder:
        step_file = Path(folder) / TRAJECTORIES_DIR / trajectory_file_name(step)
        step_file.parent.mkdir()
        step_file.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))
        search = EpisodeSearch(Path(folder))
        search.index_step(step, records, step_file)
        matches, _ = search.search(filters_of(where), "step", 0, len(records))
    passed = {match.summary["id"] for match in matches}
    marked = [replace(episode, passes_filter=record["id"] in passed) for episode, record in zip(episodes, records)]
    return marked, {"rft/passed_filter": len(passed) / len(episodes)}

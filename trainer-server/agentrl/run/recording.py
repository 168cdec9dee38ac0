"""What a step's episodes leave in the run folder: the step's trajectory file, their rows in the search index
(episode_search.py), and one `trajectory` summary event each, in that order (an event names a file that exists)."""

from __future__ import annotations

import logging
import sqlite3
from typing import TYPE_CHECKING, Any

from agentrl.run.episode_records import trajectory_summary
from agentrl.run.episode_search import EpisodeSearch, IndexDamaged, SearchUnavailable
from agentrl.run.runstore import RunStore

if TYPE_CHECKING:
    from agentrl.learning.update import Update
    from agentrl.rollout.episode import Episode

log = logging.getLogger(__name__)


def record_episodes(
    store: RunStore,
    step: int,
    episodes: list[Episode],
    tokenizer: Any,
    update: Update | None = None,
) -> list[dict[str, Any]]:
    """The step's trajectory file, its search rows, and one `trajectory` summary event per episode. `update`: the
    learner's for these episodes (their advantages and what it read of each token); None for episodes no update
    used (a Try run, an evaluation)."""
    records = [
        ep.to_record(
            run_id=store.run_id,
            step=step,
            decode_token=lambda i: tokenizer.decode([i]),
            advantages=update.advantages[i] if update else None,
            token_figures=update.token_figures[i] if update else None,
        )
        for i, ep in enumerate(episodes)
    ]
    path = store.write_trajectories(step, records)
    try:
        EpisodeSearch(store.run_dir).index_step(step, records, path)
    except (sqlite3.Error, SearchUnavailable, IndexDamaged, OSError) as err:
        # The run goes on: a reader's sync indexes the step file later.
        log.warning("step %d's episodes are not in the search index yet: %s", step, err)
    for record in records:
        store.append_event("trajectory", trajectory_summary(record, f"trajectories/{path.name}"))
    return records

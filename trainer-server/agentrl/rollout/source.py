"""What the trainer asks of whatever plays a step's episodes: one protocol that every engine answers, whether it
samples with agentrl's own loop over transformers (hf_engine.py) or vLLM (vllm_engine.py), serves a user's agent
through the endpoint (agent_engine.py), or splits a step among Ray rollout workers (cluster/rollout_workers.py).
The trainer, the evaluation and the factory speak to an `EpisodeSource`, never to a union of engine classes; a test
checks that each engine class has every member (tests/test_episode_sources.py).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from agentrl.rollout.episode import Episode
from agentrl.rollout.loop import EpisodeCounter


@runtime_checkable
class EpisodeSource(Protocol):
    description: str  # its name in the run's log and metrics (hf, vllm, scripted, agent endpoint (...), ray: ...)
    shares_policy_weights: bool  # True: it samples from the very model object the learner trains
    last_stats: dict[str, float]  # its own figures for the step it last ran (perf/rollout_*, and its own)

    def run(
        self,
        tasks: list[dict[str, Any]],
        group_size: int,
        seed: int,
        first_group: int = 0,
        on_episode_end: EpisodeCounter = ...,
    ) -> list[Episode]:
        """`group_size` episodes of each task, group `first_group + i` for `tasks[i]`, each sampled from its own seed
        of `seed`; `on_episode_end(done, total)` as they end."""
        ...

    def greedy(self) -> AbstractContextManager[None]:
        """Temperature 0 inside the block (a held-out evaluation)."""
        ...

    def weights_updated(self) -> None:
        """The learner changed the policy's weights: a copy of its own is stale from now."""
        ...

    def sync_weights(self) -> None:
        """Bring a copy of its own up to date now (from the thread that trains, while no update runs)."""
        ...

    def close(self) -> None:
        """Release its processes (tool workers, vLLM's, Ray actors' share) and servers."""
        ...

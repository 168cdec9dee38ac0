"""algorithm.rft_where: rounds of sample, filter by a query, fine-tune. What rft imitates at a step is exactly what a
search of that step with the same filters lists (and is, of those, each group's best), its share in the metrics."""

import json
from pathlib import Path

from agentrl.contract.config import load_config
from agentrl.contract.training_config import EpisodeFilter
from agentrl.run.episode_filters import filters_of
from agentrl.run.episode_search import EpisodeSearch
from agentrl.run.runstore import read_events
from agentrl.run.trainer import train
from conftest import EXAMPLE_CONFIG

STEPS = 3
# Episodes whose calls were told back "Error: ...", the word matched as a search matches words (in any case), that
# earned at most 0.1: the tiny model's best calls earn more, so the filter leaves some group's best out
WHERE = {"text": "ERROR", "text_in": "observation", "reward": {"max": 0.1}}
OVERRIDES = [
    "algorithm.rft_where.text=ERROR",
    "algorithm.rft_where.text_in=observation",
    "algorithm.rft_where.reward.max=0.1",
]


def test_rft_imitates_only_what_a_search_of_its_step_lists(tmp_path):
    config = load_config(
        EXAMPLE_CONFIG,
        ["algorithm.name=rft", f"train.steps={STEPS}", f"train.checkpoint_every={STEPS}", *OVERRIDES],
    )
    assert config.algorithm.rft_where == EpisodeFilter(**WHERE)
    run_dir = train(config, runs_dir=tmp_path, config_base_dir=EXAMPLE_CONFIG.parent)
    metrics = {e["data"]["step"]: e["data"]["metrics"] for e in read_events(run_dir) if e["type"] == "metrics"}
    records = [
        json.loads(line)
        for path in sorted((Path(run_dir) / "trajectories").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    search = EpisodeSearch(run_dir)
    search.sync()
    passed_somewhere = best_but_failed = 0
    for step in range(1, STEPS + 1):
        where = EpisodeFilter(**WHERE, step={"min": step, "max": step})
        matches, count = search.search(filters_of(where), "step", 0, 100)
        passed = {match.summary["id"] for match in matches}
        at_step = [record for record in records if record["step"] == step]
        assert metrics[step]["rft/passed_filter"] == count / len(at_step)
        groups: dict[int, list[float]] = {}
        for record in at_step:
            groups.setdefault(record["group"], []).append(record["reward"])
        for record in at_step:
            rewards = groups[record["group"]]
            best = record["reward"] == max(rewards) > min(rewards)
            assert bool(record["advantage"]) == (best and record["id"] in passed), record["id"]
            best_but_failed += best and record["id"] not in passed
        passed_somewhere += bool(passed)
    # the filter decided something: some episodes passed it, and some group's best was left out by it alone
    assert passed_somewhere and best_but_failed

"""The CoinCollector games: TextWorldExpress's own seed folds, one task per seed.

`python -m agentrl.recipes.textworld.tasks` writes `data/train.jsonl` (train-fold seeds 0-999) and
`data/test.jsonl` (test-fold seeds 20000-20999). TextWorldExpress's `reset` does not check that a seed belongs to
the fold it is told, so the folds are checked here, from the package's own lists when it is installed, and by a test:
no test-fold game is ever trained on.
"""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).parent / "data"
# TextWorldExpress's folds (getValidSeedsTrain/Test): train 0-999, dev 10000-10999, test 20000-20999.
FOLDS = {"train": range(0, 1000), "dev": range(10000, 11000), "test": range(20000, 21000)}
FILES = {"train": "train.jsonl", "test": "test.jsonl"}


def fold_of(seed: int) -> str:
    for fold, seeds in FOLDS.items():
        if seed in seeds:
            return fold
    raise ValueError(f"seed {seed} is in no TextWorldExpress fold")


def task(seed: int, fold: str) -> dict[str, object]:
    if fold_of(seed) != fold:
        raise ValueError(f"seed {seed} is a {fold_of(seed)}-fold game, not a {fold}-fold one")
    return {"id": f"coin-{fold}-{seed}", "seed": seed, "reset_args": {"gameFold": fold}}


def write() -> None:
    DATA.mkdir(exist_ok=True)
    for fold, name in FILES.items():
        lines = [json.dumps(task(seed, fold)) for seed in FOLDS[fold]]
        (DATA / name).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    write()

"""The parcel tasks: a recipient, the building's directory (who has which locker) and phrasings of the request.

`python -m agentrl.recipes.lockers.tasks` writes `data/train.jsonl` and `data/heldout.jsonl`. The two come from
different seeds, and no held-out task's (request, directory) occurs in the training file, so the held-out score
measures deliveries the agent never trained on. The request names only the person: the locker number is in the
directory, which only the `find` Tool reads.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from agentrl.recipes import splits
from agentrl.recipes.splits import generate

DATA = Path(__file__).parent / "data"
TRAIN_SIZE, HELDOUT_SIZE = 2000, 200
TRAIN_SEED, HELDOUT_SEED = 11, 12
RESIDENTS = 6  # people in one task's directory: the recipient and five others

NAMES = (
    "Alice Amir Anna Ben Carla Chen Dara David Elena Emil Farah Felix Grace Hugo Ines Ivan Jana Jonas Kara Leo "
    "Lina Luca Maya Mateo Nadia Noah Olga Omar Paula Pedro Rosa Ravi Sara Samuel Tara Theo Uma Victor Wendy Yusuf"
).split()
EXAMPLE_NAME = "Bob"  # the worked example's recipient (env.py); never a task's

TEMPLATES = [
    "Deliver the parcel to {name}.",
    "A parcel came for {name}. Put it in {name}'s locker.",
    "Please leave this parcel in the locker of {name}.",
    "{name} is expecting a parcel. Deliver it to their locker.",
    "Drop off the parcel for {name}.",
    "This parcel is addressed to {name}. Put it where {name} will find it.",
]


def make_task(rng: random.Random) -> dict[str, object]:
    residents = rng.sample(NAMES, RESIDENTS)
    lockers = rng.sample(range(10, 100), RESIDENTS)
    recipient = residents[0]
    return {
        "question": rng.choice(TEMPLATES).format(name=recipient),
        "recipient": recipient,
        "directory": dict(zip(sorted(residents), [lockers[residents.index(n)] for n in sorted(residents)])),
    }


def task_key(task: dict[str, object]) -> str:
    return json.dumps([task["question"], task["directory"]], sort_keys=True)


def write_splits(folder: Path = DATA) -> None:
    train = generate(make_task, task_key, TRAIN_SIZE, TRAIN_SEED)
    heldout = generate(make_task, task_key, HELDOUT_SIZE, HELDOUT_SEED, exclude={task_key(t) for t in train})
    splits.write_splits(folder, train, heldout)


if __name__ == "__main__":
    write_splits()

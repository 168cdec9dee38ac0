"""The arithmetic word problems: generated from templates, each needing one operation on numbers too
large for a 135M model to work out in its head.

`python -m agentrl.recipes.arithmetic.tasks` writes `data/train.jsonl` and `data/heldout.jsonl`. The two
come from different seeds, and every held-out question is checked not to occur in the training file, so
the held-out score measures problems the agent never trained on.
"""

from __future__ import annotations

import random
from pathlib import Path

from agentrl.recipes import splits
from agentrl.recipes.splits import generate

DATA = Path(__file__).parent / "data"
TRAIN_SIZE, HELDOUT_SIZE = 2000, 200
TRAIN_SEED, HELDOUT_SEED = 1, 2

# Several phrasings per operation: the agent must read which operation the story asks for.
TEMPLATES = {
    "*": [
        "A crate holds {a} bottles. How many bottles are in {b} crates?",
        "Each ticket costs {a} dollars. How much do {b} tickets cost?",
        "A machine makes {a} bolts per hour. How many bolts does it make in {b} hours?",
        "A train carries {a} passengers on each trip. How many passengers does it carry in {b} trips?",
        "Each page of a book has {a} words. How many words are on {b} pages?",
        "A farm packs {a} eggs a day. How many eggs does it pack in {b} days?",
    ],
    "+": [
        "A library has {a} books and buys {b} more. How many books does it have now?",
        "Tom has {a} stamps. His sister gives him {b} stamps. How many stamps does Tom have?",
        "A town had {a} people and {b} people moved in. How many people live there now?",
        "A school has {a} boys and {b} girls. How many children are there in all?",
        "A shop sold {a} shirts in May and {b} shirts in June. How many shirts did it sell in both months?",
        "A truck carries {a} kilograms of sand and then loads {b} kilograms more. How many kilograms does it carry?",
    ],
    "-": [
        "A farm had {a} sheep and sold {b} of them. How many sheep are left?",
        "A tank holds {a} liters. {b} liters leak out. How many liters remain?",
        "Anna had {a} dollars and spent {b} dollars. How many dollars does she have left?",
        "A stadium has {a} seats and {b} of them are taken. How many seats are free?",
        "A road is {a} meters long. Workers have paved {b} meters. How many meters are still unpaved?",
        "A baker made {a} cookies and {b} were eaten. How many cookies remain?",
    ],
    "/": [
        "{a} candies are shared equally among {b} children. How many candies does each child get?",
        "A rope of {a} meters is cut into {b} equal pieces. How long is each piece in meters?",
        "{a} apples are packed into boxes of {b}. How many boxes are filled?",
        "A company pays {a} dollars equally to {b} workers. How many dollars does each worker get?",
        "A car drives {a} kilometers in {b} hours at a steady speed. How many kilometers does it drive per hour?",
        "{a} students sit in rows of {b}. How many rows are there?",
    ],
}


def make_task(rng: random.Random) -> dict[str, object]:
    op = rng.choice(list(TEMPLATES))
    template = rng.choice(TEMPLATES[op])
    if op == "*":
        a, b = rng.randint(100, 999), rng.randint(12, 99)
        answer = a * b
    elif op == "+":
        a, b = rng.randint(1000, 9999), rng.randint(1000, 9999)
        answer = a + b
    elif op == "-":
        a = rng.randint(5000, 9999)
        b = rng.randint(1000, a - 1000)
        answer = a - b
    else:  # whole-number division: the quotient is the answer
        b, answer = rng.randint(12, 99), rng.randint(100, 999)
        a = b * answer
    return {"question": template.format(a=a, b=b), "answer": answer, "op": op}


def question_of(task: dict[str, object]) -> str:
    return str(task["question"])


def write_splits(folder: Path = DATA) -> None:
    train = generate(make_task, question_of, TRAIN_SIZE, TRAIN_SEED)
    heldout = generate(make_task, question_of, HELDOUT_SIZE, HELDOUT_SEED, exclude={question_of(t) for t in train})
    splits.write_splits(folder, train, heldout)


if __name__ == "__main__":
    write_splits()

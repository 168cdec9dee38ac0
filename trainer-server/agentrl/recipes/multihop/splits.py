"""The warm-start experiment's splits: a held-out file of over 500 questions and a training file that never holds one.

`python -m agentrl.recipes.multihop.splits` writes, into data/:

- `heldout_500.jsonl`: the 267 dev questions (`hotpotqa_dev_distractor.jsonl`, then `2wikimultihopqa_dev.jsonl`),
  then every HELDOUT_EVERY-th line of `train_full.jsonl` (lines 8, 16, ...: HotpotQA, 2WikiMultihopQA and MuSiQue
  train questions, so MuSiQue, which has no dev file here, is held out too), each record verbatim;
- `heldout_500_provenance.tsv`: each held-out line's dataset, split (dev or train), id and the file and line it
  was copied from, for per-dataset reporting (results/multihop_full.py);
- `train_warm.jsonl`: the other lines of `train_full.jsonl`, verbatim, in their order.

The dev questions are in no line of `train_full.jsonl` (tests/test_recipes.py checks it), so the two files share no
question; tests/test_multihop_warm.py checks that too, by id and normalised question, and that re-running this
reproduces the committed files byte for byte.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

DATA = Path(__file__).parent / "data"
TRAIN_FULL = "train_full.jsonl"
DEV_FILES = (("hotpotqa_dev_distractor.jsonl", "hotpotqa"), ("2wikimultihopqa_dev.jsonl", "2wikimultihopqa"))
HELDOUT_EVERY = 8
HELDOUT, HELDOUT_PROVENANCE, TRAIN = "heldout_500.jsonl", "heldout_500_provenance.tsv", "train_warm.jsonl"
PROVENANCE_COLUMNS = ("line", "dataset", "split", "id", "copied_from")


def record_id(line: str) -> str:
    """A record's id: `_id` (HotpotQA, 2WikiMultihopQA) or `id` (MuSiQue)."""
    record = json.loads(line)
    return str(record["_id"] if "_id" in record else record["id"])


def lines_of(path: Path) -> list[str]:
    """The file's non-empty lines, each with its newline, exactly as stored."""
    with path.open(encoding="utf-8", newline="") as handle:
        return [line if line.endswith("\n") else line + "\n" for line in handle if line.strip()]


def train_full_datasets(data: Path) -> list[str]:
    """Each train_full.jsonl line's dataset, from train_full_provenance.tsv."""
    with (data / "train_full_provenance.tsv").open(encoding="utf-8", newline="") as handle:
        return [row["dataset"] for row in csv.DictReader(handle, delimiter="\t")]


def write_splits(out: Path, data: Path = DATA) -> None:
    heldout: list[str] = []
    provenance: list[tuple[str, str, str]] = []  # dataset, split, copied_from
    for name, dataset in DEV_FILES:
        for number, line in enumerate(lines_of(data / name), 1):
            heldout.append(line)
            provenance.append((dataset, "dev", f"{name}:{number}"))
    train_lines, datasets = lines_of(data / TRAIN_FULL), train_full_datasets(data)
    if len(train_lines) != len(datasets):
        raise ValueError(f"{TRAIN_FULL} has {len(train_lines)} records, its provenance {len(datasets)} rows")
    train = []
    for number, (line, dataset) in enumerate(zip(train_lines, datasets, strict=True), 1):
        if number % HELDOUT_EVERY == 0:
            heldout.append(line)
            provenance.append((dataset, "train", f"{TRAIN_FULL}:{number}"))
        else:
            train.append(line)
    out.mkdir(parents=True, exist_ok=True)
    (out / HELDOUT).write_text("".join(heldout), encoding="utf-8", newline="")
    (out / TRAIN).write_text("".join(train), encoding="utf-8", newline="")
    rows = [
        "\t".join((str(number), dataset, split, record_id(line), source))
        for number, (line, (dataset, split, source)) in enumerate(zip(heldout, provenance, strict=True), 1)
    ]
    (out / HELDOUT_PROVENANCE).write_text("\n".join(["\t".join(PROVENANCE_COLUMNS), *rows]) + "\n", encoding="utf-8")


def heldout_groups(data: Path = DATA) -> list[str]:
    """Each held-out line's reporting group, in file order: `DATASET dev` or `DATASET train`."""
    with (data / HELDOUT_PROVENANCE).open(encoding="utf-8", newline="") as handle:
        return [f"{row['dataset']} {row['split']}" for row in csv.DictReader(handle, delimiter="\t")]


if __name__ == "__main__":
    write_splits(DATA)

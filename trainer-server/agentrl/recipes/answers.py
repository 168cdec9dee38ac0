"""Answer scoring shared by the recipes: the official HotpotQA normalisation, exact match, F1 and
substring match, and GSM8K's numeric answers."""

from __future__ import annotations

import re
import string
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """HotpotQA's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    """HotpotQA's token F1; yes/no/noanswer only match themselves."""
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if pred in ("yes", "no", "noanswer") or ref in ("yes", "no", "noanswer"):
        if pred != ref:
            return 0.0
    pred_tokens, ref_tokens = pred.split(), ref.split()
    common = Counter(pred_tokens) & Counter(ref_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def substring_match(prediction: str, gold: str) -> float:
    """The normalised gold answer occurs in the normalised prediction (Agent-R1 reports it as well)."""
    gold_norm = normalize_answer(gold)
    return float(bool(gold_norm) and gold_norm in normalize_answer(prediction))


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def gsm8k_gold(answer_field: str) -> str:
    """The number after GSM8K's `#### `, commas removed."""
    return answer_field.rsplit("####", 1)[-1].strip().replace(",", "")


def parse_number(text: str) -> float | None:
    found = _NUMBER.findall(text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def final_answer_text(text: str, marker: str = "Answer:") -> str | None:
    """The text after the last `Answer:` marker, or None when the model gave none."""
    if marker not in text:
        return None
    tail = text.rsplit(marker, 1)[1].strip()
    return tail.splitlines()[0].strip() if tail else ""


def numeric_answer(text: str, gold: float) -> tuple[str | None, bool]:
    """The text after the last `Answer:` (None when there is none), and whether its number equals `gold`."""
    answer = final_answer_text(text)
    predicted = parse_number(answer) if answer is not None else None
    return answer, predicted is not None and abs(predicted - gold) < 1e-6

"""The frozen evaluation sets stay as they were written, and every line is well formed."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from grading_lab.evaluation import bank_items
from tests.conftest import ROOT

EVAL_DIR = ROOT / "data" / "eval"
BANK_SETS = ("blind.jsonl", "roles.jsonl", "evasive.jsonl", "swaps.jsonl", "swaps_more.jsonl", "near_copies.jsonl",
             "weak_kinds.jsonl")
INLINE_SETS = ("inline.jsonl",)  # rows that carry their own question and accepted answers
FROZEN = BANK_SETS + INLINE_SETS
LABELS = {"correct", "partial", "incorrect"}


def _recorded() -> set[str]:
    """Every sha256 that data/eval/README.md records."""
    return set(re.findall(r"\b[0-9a-f]{64}\b", (EVAL_DIR / "README.md").read_text()))


@pytest.mark.parametrize("name", FROZEN)
def test_frozen_set_matches_its_recorded_hash(name: str) -> None:
    digest = hashlib.sha256((EVAL_DIR / name).read_bytes()).hexdigest()
    assert digest in _recorded(), f"{name} changed after it was frozen (sha256 {digest})"


def _rows(name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (EVAL_DIR / name).read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("name", BANK_SETS)
def test_frozen_set_rows_refer_to_bank_questions(name: str) -> None:
    items = bank_items()
    rows = [json.loads(line) for line in (EVAL_DIR / name).read_text().splitlines() if line.strip()]
    assert rows
    for row in rows:
        assert (row["file"], int(row["number"])) in items, row
        assert row["label"] in LABELS, row
        assert row["answer"].strip() and row["kind"], row


@pytest.mark.parametrize("name", INLINE_SETS)
def test_an_inline_set_asks_questions_the_bank_does_not_and_keeps_its_training_questions_apart(name: str) -> None:
    rows = _rows(name)
    bank = {item.question.strip().lower() for item in bank_items().values()}
    training = {str(r["qid"]) for r in map(json.loads, (ROOT / "data" / "train" / "inline_answers.jsonl").open())}
    for row in rows:
        assert str(row["question"]).strip().lower() not in bank, row
        assert row["reference_answers"] and all(str(a).strip() for a in row["reference_answers"]), row  # type: ignore[attr-defined]
        assert row["label"] in LABELS and str(row["answer"]).strip() and row["kind"], row
        assert row["qid"] not in training, row  # split by question from the training answers
    questions = {str(r["qid"]): (r["question"], tuple(r["reference_answers"])) for r in rows}  # type: ignore[arg-type]
    assert all(questions[str(r["qid"])] == (r["question"], tuple(r["reference_answers"])) for r in rows)  # type: ignore[arg-type]

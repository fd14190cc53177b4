"""The frozen evaluation sets stay as they were written, and every line is well formed."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from grading_lab.evaluation import bank_items
from tests.conftest import ROOT

EVAL_DIR = ROOT / "data" / "eval"
FROZEN = ("blind.jsonl", "roles.jsonl", "evasive.jsonl", "swaps.jsonl", "swaps_more.jsonl", "near_copies.jsonl",
          "weak_kinds.jsonl")
LABELS = {"correct", "partial", "incorrect"}


def _recorded() -> set[str]:
    """Every sha256 that data/eval/README.md records."""
    return set(re.findall(r"\b[0-9a-f]{64}\b", (EVAL_DIR / "README.md").read_text()))


@pytest.mark.parametrize("name", FROZEN)
def test_frozen_set_matches_its_recorded_hash(name: str) -> None:
    digest = hashlib.sha256((EVAL_DIR / name).read_bytes()).hexdigest()
    assert digest in _recorded(), f"{name} changed after it was frozen (sha256 {digest})"


@pytest.mark.parametrize("name", FROZEN)
def test_frozen_set_rows_refer_to_bank_questions(name: str) -> None:
    items = bank_items()
    rows = [json.loads(line) for line in (EVAL_DIR / name).read_text().splitlines() if line.strip()]
    assert rows
    for row in rows:
        assert (row["file"], int(row["number"])) in items, row
        assert row["label"] in LABELS, row
        assert row["answer"].strip() and row["kind"], row

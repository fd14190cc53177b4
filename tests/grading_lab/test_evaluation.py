"""The evaluation reads bank rows and inline rows, each question prepared as production prepares it."""

from __future__ import annotations

from grading_lab.evaluation import _key, bank_items, baseline_cosines, rubrics_of
from tests.fakes import FakeEncoder

BANK_ROW = {"file": "003_28df717c268ee6dd.txt", "number": 5, "answer": "it splits the indices by rank",
            "label": "partial", "kind": "partial"}
INLINE_ROW = {"qid": "X01", "question": "What does reduce do, as against all-reduce?",
              "reference_answers": ["reduce leaves the result on one root rank; all-reduce on every rank"],
              "answer": "only the root gets the sum", "label": "correct", "kind": "terse"}


def test_an_inline_row_is_graded_against_its_own_question_with_nothing_of_the_bank() -> None:
    encoder = FakeEncoder()
    items = bank_items()
    bank, inline, again = rubrics_of([BANK_ROW, INLINE_ROW, {**INLINE_ROW, "answer": "every rank"}], items, encoder)
    assert bank.neighbours is not None and bank.item.key is not None
    assert inline.neighbours is None and inline.item.question == INLINE_ROW["question"]
    assert inline.item.reference_answers == INLINE_ROW["reference_answers"] and not inline.item.wrong_answers
    assert again is inline  # one rubric per inline question, prepared once
    cos = baseline_cosines([BANK_ROW, INLINE_ROW], items, encoder)
    ref = encoder.encode(INLINE_ROW["reference_answers"])
    assert cos[1] == float((ref @ encoder.encode([INLINE_ROW["answer"]])[0]).max())
    assert (_key(BANK_ROW), _key(INLINE_ROW)) == ("003#5", "X01")

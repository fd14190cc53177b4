"""The feedback probe's counting."""

from __future__ import annotations

from app.grading import GradeResult, GradingItem, prepare_many
from app.grading.judge import ANSWERS_OTHER
from grading_lab.feedback_probe import nearest_questions, told
from tests.fakes import FakeEncoder


def test_what_each_answer_is_told_is_counted_by_verdict_and_label() -> None:
    rows = [{"label": "partial"}, {"label": "correct"}, {"label": "incorrect"}, {"label": "correct"},
            {"label": "incorrect", "kind": "negation"}, {"label": "incorrect", "kind": "evasive"}]
    results = [
        GradeResult("incorrect", 0.0, 0.9, matched_misconception="it sums onto rank 0",
                    feedback='This matches a common misconception: "it sums onto rank 0".'),
        GradeResult("partial", 0.5, 0.6, flags=["other_question"],
                    feedback=f'This {ANSWERS_OTHER} ("What is reduce-scatter?") than to this one\'s.'),
        GradeResult("correct", 1.0, 0.8, flags=["roles_swapped", "unsure"], feedback="Correct."),
        GradeResult("correct", 1.0, 0.8, flags=["unsure"], feedback="Correct."),
        GradeResult("incorrect", 0.0, 0.9, feedback='This says the opposite of the accepted answer ("x"): see "not".'),
        GradeResult("incorrect", 0.0, 0.9, feedback='This says the opposite of the accepted answer ("x"): see "no".'),
    ]
    assert told(rows, results) == {"misconception": {"incorrect/partial": 1},
                                   "other_question": {"partial/correct": 1},
                                   "wrong_flags_on_correct": {"correct/incorrect": 1},
                                   "opposite": {"incorrect/incorrect/negation": 1,
                                                "incorrect/incorrect/other kind": 1}}


def test_the_nearest_questions_are_listed_nearest_first() -> None:
    items = [GradingItem(question=q, reference_answers=["a"]) for q in
             ("What does all-gather do?", "What exactly does all-gather do?", "Why use NCCL over Gloo?")]
    pairs = nearest_questions(prepare_many(items, FakeEncoder()), at_least=0.5)
    assert [(one, other) for _, one, other in pairs] == [(items[0].question, items[1].question)]

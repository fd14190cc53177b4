"""The full-stop probe's counting and scoring."""

from __future__ import annotations

from grading_lab.stop_probe import FORMS, scores, stop_counts


def test_the_three_forms_differ_only_in_the_final_stop() -> None:
    forms = dict(FORMS)
    assert forms["as written"]("It splits it.") == "It splits it."
    assert forms["no final stop"]("It splits it. Then sums...") == "It splits it. Then sums"
    assert forms["every one with a final stop"]("It splits it") == "It splits it."
    assert forms["every one with a final stop"]("It splits it.") == "It splits it."


def test_stops_are_counted_per_label() -> None:
    rows = [{"answer": "a.", "label": "correct"}, {"answer": "b", "label": "correct"},
            {"answer": "c. ", "label": "incorrect"}]
    assert stop_counts(rows) == {"correct": "1 of 2", "incorrect": "1 of 1"}


def test_scores_count_both_kinds_of_error() -> None:
    truth = ["correct", "correct", "incorrect", "partial"]
    pred = ["correct", "partial", "correct", "partial"]
    got = scores(truth, pred)
    assert (got["wrong_called_correct"], got["right_not_called_correct"]) == (1, 1)
    assert 0 < got["3-way"] < 1 and 0 < got["2-way"] < 1

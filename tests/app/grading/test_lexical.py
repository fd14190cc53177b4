"""The classifier of a question's labelled examples' words (app/grading/lexical.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app.grading import GradingItem, prepare
from app.grading.lexical import MAX_LOG_ODDS, NEGATED, WordModel, fit_wide_logistic, model_for, words
from grading_lab.logreg import fit_logistic
from tests.fakes import FakeEncoder

QUESTION = GradingItem(
    question="Why does a bulb stop lighting when the switch is opened?",
    reference_answers=["Opening the switch breaks the closed path, so no current flows through the bulb."],
    key="test#lexical",
)
RIGHT = [
    "the switch breaks the circuit so there is no closed path",
    "opening it makes a gap in the path",
    "the path is not closed any more",
    "no closed path for the current",
    "the gap stops the current",
]
WRONG = [
    "the battery is flat",
    "the bulb is broken",
    "the battery runs out when the switch opens",
    "the bulb burns out",
    "the switch uses up the battery",
]


def test_the_wide_fit_agrees_with_the_plain_newton_fit() -> None:
    rng = np.random.default_rng(0)
    x = (rng.random((60, 40)) < 0.2).astype(float)
    y = (x[:, 0] + rng.random(60) > 0.8).astype(float)
    wide_w, wide_b = fit_wide_logistic(x, y, l2=1.0, bias_l2=1e-9)
    w, b = fit_logistic(x, y, l2=1.0)
    assert np.allclose(wide_w, w, atol=1e-5) and wide_b == pytest.approx(b, abs=1e-5)


def test_the_wide_fit_handles_far_more_features_than_examples() -> None:
    rng = np.random.default_rng(1)
    x = (rng.random((40, 3000)) < 0.02).astype(float)
    y = np.arange(40) % 2 == 0
    w, b = fit_wide_logistic(x, y.astype(float))
    z = x @ w + b
    assert w.shape == (3000,) and np.isfinite(z).all()
    assert ((z > 0) == y).mean() > 0.9  # it learns its own examples


def test_features_are_stems_a_negation_mark_and_character_grams() -> None:
    f = words("The path isn't closed")
    assert {"path", "clos"} & f and NEGATED in f and "#path" in f
    assert NEGATED not in words("the path is closed")


def test_the_examples_words_tell_right_from_wrong() -> None:
    model = WordModel.fit([(a, "correct") for a in RIGHT] + [(a, "incorrect") for a in WRONG])
    assert model is not None
    assert model.log_odds("there is a gap so the path is not closed") > 0
    assert model.log_odds("the battery died") < 0
    assert model.log_odds("the pth is brokn, no closd path") > 0  # typos keep most of their character grams
    assert abs(model.log_odds("the path " * 500)) <= MAX_LOG_ODDS


def test_no_model_without_examples_of_both_kinds() -> None:
    assert WordModel.fit([(a, "correct") for a in RIGHT]) is None
    assert WordModel.fit([]) is None
    partial_only = WordModel.fit([(a, "partial") for a in RIGHT] + [(a, "incorrect") for a in WRONG])
    assert partial_only is None  # partial is not correct: one kind


def test_the_rubric_reads_each_answer_with_its_examples_model(fake: FakeEncoder) -> None:
    from app.grading.judge import evidence
    from app.grading.scoring import load_model

    taught = prepare(replace(QUESTION, examples=[(a, "correct") for a in RIGHT] + [(a, "incorrect") for a in WRONG]),
                     fake)
    bare = prepare(QUESTION, fake)
    answer = "the path is not closed"
    assert taught.example_words is not None and bare.example_words is None
    vec = fake.encode([answer])[0]
    read = evidence(taught, answer, vec, [], load_model()).sig.example_words
    assert read == pytest.approx(taught.example_words.log_odds(answer)) and read > 0
    assert evidence(bare, answer, vec, [], load_model()).sig.example_words == 0.0


def test_the_model_of_the_same_examples_is_fitted_once() -> None:
    examples = [(a, "correct") for a in RIGHT] + [(a, "incorrect") for a in WRONG]
    first = model_for(examples)
    assert first is not None and model_for(list(examples)) is first
    other = model_for([*examples, ("the lamp has no power", "incorrect")])
    assert other is not None and other is not first

"""The example head: a question's labelled examples weighed with the decision, by the real model and judge."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest

from app.grading import Graders, GradingItem, grade, prepare
from app.grading.decision import load_decision
from app.grading.examples import (
    EXAMPLES_PATH,
    FEATURES,
    INPUTS,
    MIN_EXAMPLES,
    ExampleHead,
    example_features,
    load_head,
    usable,
)
from app.grading.heads import StyledLines
from app.grading.text import content_stems
from grading_lab.asag import ASAG_DIR, CORPORA
from grading_lab.examples_cv import DEV_PATH, INLINE_PATH, TEACHER, Simulated, simulate, split_rows
from grading_lab.examples_fit import HEAD_VERSION, decision_of, fit_head, grouped_cv
from ingest.identity import file_sha256
from tests.fakes import FakeEncoder

QUESTION = GradingItem(
    question="Why does a bulb in a circuit stop lighting when the switch is opened?",
    reference_answers=["Opening the switch breaks the closed path, so no current flows through the bulb."],
    key="test#circuit",
)
NEAR = [  # answers near the one graded below, in the words learners use
    "the circuit is not closed any more so electricity can't get to the bulb",
    "the gap in the circuit stops the electricity getting round to the bulb",
    "there is a gap so the electric current cannot go around the circuit",
    "the switch opens a gap in the circuit and current can't pass",
    "no complete loop for the electricity once the switch is open",
    "an open switch leaves the circuit incomplete so no current",
    "the path for the current is broken at the switch",
]
FAR = [  # wrong answers like one another, as a class's wrong answers often are
    "the battery is flat",
    "the battery has run out",
    "the battery is dead",
    "the bulb is broken",
    "the bulb has blown",
    "the bulb is burnt out",
    "the battery ran out of power",
]
NEGATED = [  # each right answer above, negated: contrasts, labelled incorrect
    "the circuit is still closed so electricity can still get to the bulb",
    "there is no gap in the circuit, so the electricity still gets round to the bulb",
    "there is no gap so the electric current can still go around the circuit",
    "the switch does not open a gap in the circuit and current still passes",
    "the loop for the electricity stays complete when the switch is open",
    "an open switch leaves the circuit complete so current still flows",
    "the path for the current is not broken at the switch",
]
ANSWER = "the electricity can't get round because the switch makes a gap in the circuit"


def _taught(near_label: str) -> GradingItem:
    far_label = "incorrect" if near_label == "correct" else "correct"
    return replace(QUESTION, examples=[(a, near_label) for a in NEAR] + [(a, far_label) for a in FAR])


def test_the_head_needs_enough_examples_of_both_kinds(fake: FakeEncoder) -> None:
    few = prepare(replace(QUESTION, examples=[(a, "correct") for a in NEAR[:3]] + [(FAR[0], "incorrect")]), fake)
    one_kind = prepare(replace(QUESTION, examples=[(a, "correct") for a in NEAR + FAR]), fake)
    assert len(NEAR + FAR) >= MIN_EXAMPLES
    assert not usable(few) and not usable(one_kind) and usable(prepare(_taught("correct"), fake))


def test_example_features_read_the_nearest_examples_by_label(fake: FakeEncoder) -> None:
    rubric = prepare(_taught("correct"), fake)
    sims = [0.9, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4, 0.3, 0.1, 0.1, 0.1, 0.1, 0.1]  # NEAR, then FAR
    max_c, max_o, margin, vote, prior, lift, lift_vote, *_ = example_features(rubric, sims, set())
    assert (max_c, max_o) == (0.9, 0.4) and margin == pytest.approx(0.5)
    assert vote > 3.0  # the nearest is correct and far nearer than the rest
    assert prior == pytest.approx(0.0)  # as many correct examples as not
    assert lift == rubric.example_lift and lift_vote == pytest.approx(lift * vote)
    assert not example_features(prepare(QUESTION, fake), [], set()).any()


def _named(feats: np.ndarray) -> dict[str, float]:
    return dict(zip(FEATURES, (float(v) for v in feats), strict=True))


def test_example_features_read_the_word_overlap_with_the_examples_by_label(fake: FakeEncoder) -> None:
    """Jaccard of content stems with the nearest correct example in words, and with the nearest other one."""
    rubric = prepare(_taught("correct"), fake)
    sims = [0.1] * len(rubric.item.examples)
    stems = set(content_stems("the battery is flat"))  # an incorrect example's very words
    f = _named(example_features(rubric, sims, stems))
    assert f["words_other"] == pytest.approx(1.0) and f["covers_other"] == pytest.approx(1.0)
    assert 0.0 <= f["words_correct"] < 0.5
    assert f["words_margin"] == pytest.approx(f["words_correct"] - f["words_other"])
    assert 0.0 <= f["covers_correct"] < 0.5
    assert f["covers_margin"] == pytest.approx(f["covers_correct"] - f["covers_other"])
    f = _named(example_features(rubric, sims, set(content_stems(NEAR[6]))))
    assert f["words_correct"] == pytest.approx(1.0) and f["words_other"] < 0.5
    assert f["covers_correct"] == pytest.approx(1.0)
    # an answer that holds all of a correct example and says more: the whole example covered, not all its words
    f = _named(example_features(rubric, sims, set(content_stems(f"{NEAR[6]} and the bulb goes dark"))))
    assert f["covers_correct"] == pytest.approx(1.0) and f["words_correct"] < 1.0
    overlap = ("words_correct", "words_other", "words_margin", "covers_correct", "covers_other", "covers_margin")
    assert not any(_named(example_features(rubric, sims, set()))[k] for k in overlap)


def test_example_features_carry_the_examples_word_classifier_reading(fake: FakeEncoder) -> None:
    rubric = prepare(_taught("correct"), fake)
    sims = [0.1] * len(rubric.item.examples)
    assert _named(example_features(rubric, sims, set(), words=2.5))["words"] == 2.5
    assert _named(example_features(rubric, sims, set()))["words"] == 0.0


def test_lift_says_whether_the_examples_labels_follow_closeness() -> None:
    item = replace(QUESTION, examples=[(f"a{i}", "correct" if i < 5 else "incorrect") for i in range(10)])
    rubric = prepare(item, FakeEncoder())
    # Two tight clusters, one per label: every example's neighbours share its label.
    clustered = np.zeros((10, 4), dtype=np.float32)
    clustered[:5, 0], clustered[5:, 1] = 1.0, 1.0
    rubric.example_vecs = clustered + np.random.default_rng(0).normal(0, 0.01, (10, 4)).astype(np.float32)
    assert rubric.example_lift == pytest.approx(0.5)  # all right against a majority of one half
    # Contrasts: each wrong answer sits beside the right answer it negates.
    contrasts = prepare(item, FakeEncoder())
    pairs = np.zeros((10, 4), dtype=np.float32)
    for i in range(5):
        pairs[i, i % 4] = pairs[i + 5, i % 4] = 1.0
    contrasts.example_vecs = pairs + np.random.default_rng(1).normal(0, 0.01, (10, 4)).astype(np.float32)
    assert contrasts.example_lift < 0.1


@pytest.mark.slow
def test_an_answer_is_graded_by_what_its_labelled_neighbours_were(real_encoder) -> None:  # type: ignore[no-untyped-def]
    liked = grade(prepare(_taught("correct"), real_encoder), ANSWER, real_encoder)
    disliked = grade(prepare(_taught("incorrect"), real_encoder), ANSWER, real_encoder)
    bare = grade(prepare(_taught("correct"), real_encoder), ANSWER, real_encoder, graders=Graders(no_examples=True))
    assert liked.verdict == "correct" and disliked.verdict != "correct"
    assert liked.score > disliked.score
    assert liked.grader_version.endswith(f"+{HEAD_VERSION}") and HEAD_VERSION not in bare.grader_version
    unlabelled = grade(prepare(QUESTION, real_encoder), ANSWER, real_encoder)
    assert HEAD_VERSION not in unlabelled.grader_version  # no examples, no head


@pytest.mark.slow
def test_contrasting_examples_do_not_make_a_negation_correct(real_encoder) -> None:  # type: ignore[no-untyped-def]
    item = replace(QUESTION, examples=[(a, "correct") for a in NEAR] + [(a, "incorrect") for a in NEGATED])
    rubric = prepare(item, real_encoder)
    assert rubric.example_lift < 0  # each negation's nearest neighbour is the right answer it negates
    negation = "opening the switch doesn't break anything, the circuit stays complete and current keeps flowing"
    result = grade(rubric, negation, real_encoder)
    assert result.verdict == "incorrect" and result.grader_version.endswith(f"+{HEAD_VERSION}")


PARTIAL = [  # the switch named, the broken path not: a teacher's partial answers
    "because the switch is open",
    "the switch was turned off",
    "it's because of the switch being opened",
    "opening the switch turns the bulb off",
    "the switch is in the off position now",
    "someone flipped the switch open",
]


def _with_partial_examples(label: str) -> GradingItem:
    return replace(QUESTION, examples=[(a, "correct") for a in NEAR] + [(a, label) for a in PARTIAL]
                   + [(a, "incorrect") for a in FAR])


@pytest.mark.slow
def test_answers_like_a_teachers_partial_ones_get_partial_credit(real_encoder) -> None:  # type: ignore[no-untyped-def]
    """Examples labelled partial beside correct and incorrect ones: an answer like the partial ones gets partial
    credit, an answer like the correct ones full credit, and one like the wrong ones none; the head's own
    P(correct or partial) decides between partial and incorrect."""
    rubric = prepare(_with_partial_examples("partial"), real_encoder)
    answers = {"the switch is off so the bulb goes off": "partial", ANSWER: "correct",
               "the battery must be empty": "incorrect"}
    for answer, verdict in answers.items():
        result = grade(rubric, answer, real_encoder)
        assert result.verdict == verdict, (answer, result.verdict, result.score)
        assert result.grader_version.endswith(f"+{HEAD_VERSION}")
    relabelled = grade(prepare(_with_partial_examples("incorrect"), real_encoder),
                       "the switch is off so the bulb goes off", real_encoder)
    assert relabelled.score < grade(rubric, "the switch is off so the bulb goes off", real_encoder).score


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="known weak spot (docs/GRADING.md): the example head reads a teacher's labels "
                   "as correct or not; partial labels move the score, not the verdict")
def test_answers_like_examples_a_teacher_calls_incorrect_get_no_credit(real_encoder) -> None:  # type: ignore[no-untyped-def]
    result = grade(prepare(_with_partial_examples("incorrect"), real_encoder), "the switch is off so the bulb goes off",
                   real_encoder)
    assert result.verdict == "incorrect"


def test_the_committed_head_matches_the_data_it_was_fitted_on() -> None:
    manifest = json.loads(EXAMPLES_PATH.read_text(encoding="utf-8"))
    assert manifest["features"] == list(INPUTS) and manifest["version"] == HEAD_VERSION
    # The head reads the served decision's probabilities again: a refitted decision calls for a refitted head.
    assert manifest["decision"] == load_decision().version
    for corpus in CORPORA:
        assert manifest["data"][f"{corpus}_train.jsonl"] == file_sha256(ASAG_DIR / f"{corpus}_train.jsonl")
    assert manifest["data"]["inline_answers.jsonl"] == file_sha256(INLINE_PATH)
    assert manifest["data"]["dev.jsonl (graded, not fitted)"] == file_sha256(DEV_PATH)
    head = load_head()
    for line in (*(style.line for style in head.correct.styles), head.correct.pooled):
        assert line.weights.shape == (len(INPUTS),)
    # Beetle's answers weigh in the pooled line only
    assert [style.name for style in head.correct.styles] == ["scientsbank", "inline_answers"]
    # P(correct or partial): one line over the sets whose examples carry partial labels
    assert manifest["recipe"]["credit_from"] == ["inline_answers"]
    assert head.credit.styles == () and head.credit.pooled.weights.shape == (len(INPUTS),)
    assert set(manifest["figures"]["grouped_cv"]) == {"scientsbank", "beetle_heldout", "inline_answers"}
    # The dev set, whose answers the decision was fitted on, is graded by the head, not fitted on.
    assert set(manifest["figures"]["unfitted"]) == {"dev", "dev_3way", "dev_without_head"}


def test_a_head_file_of_another_layout_or_other_inputs_is_refused() -> None:
    """A file with one line for every style (examples-9 and before), or fitted on other inputs, asks for the fit
    again rather than grading with weights read the wrong way."""
    manifest = json.loads(EXAMPLES_PATH.read_text(encoding="utf-8"))
    assert ExampleHead.from_dict(manifest).version == HEAD_VERSION
    single_line = {**manifest["correct"]["pooled"], "decision": manifest["decision"]}
    other_inputs = {**manifest, "features": manifest["features"][:-1]}
    no_credit = {k: v for k, v in manifest.items() if k != "credit"}  # up to examples-13
    for damaged in (single_line, other_inputs, no_credit):
        with pytest.raises(ValueError, match=r"fitted on other inputs; run `python -m grading_lab\.examples_fit`"):
            ExampleHead.from_dict(damaged)


@pytest.mark.slow
def test_a_question_takes_the_line_of_the_course_it_is_near(real_encoder) -> None:  # type: ignore[no-untyped-def]
    """A science question weighs its examples by SciEntsBank's line, a question on parallelism by the inline
    answers', and the same evidence reads differently by the two."""
    lines = load_head().correct
    science = real_encoder.encode(["How did you separate the salt from the water in the mock rocks?"])[0]
    bank = real_encoder.encode(["What does the term 'pipeline bubble' refer to in pipeline parallelism?"])[0]
    assert int(np.argmax(lines.weights(science))) == 0 and int(np.argmax(lines.weights(bank))) == 1
    typical = lines.pooled.mean  # the mean input the lines were fitted on
    assert abs(lines.p(typical, science) - lines.p(typical, bank)) > 0.05


@pytest.mark.slow
def test_the_simulation_never_shows_an_answer_to_its_own_rubric(real_encoder) -> None:  # type: ignore[no-untyped-def]
    rows = split_rows("scientsbank")
    questions = sorted({r["question_id"] for r in rows})[:2]
    rows = [r for r in rows if r["question_id"] in questions]
    sim = simulate("scientsbank", real_encoder, rows=rows)
    for i, (rubric, _text, _) in sim.cases.items():
        assert rubric.item.key.split("#")[0] == rows[i]["question_id"]
        assert rows[i]["student_answer"] not in [a for a, _ in rubric.item.examples] or \
            sum(r["student_answer"] == rows[i]["student_answer"] for r in rows) > 1  # only a duplicate answer
    assert len(sim.verdicts(None)) == len(rows) and all(sim.verdicts(None))
    # The fit and its grouped CV run end to end on the slice (two questions: one per fold at most), and grade
    # the same answers again with a teacher's count of examples, drawn from the same others.
    head = fit_head([sim])
    assert np.isfinite(head.correct.pooled.weights).all()
    # no set whose examples carry partial labels: P(correct or partial) is fitted as P(correct), on its own inputs
    assert head.credit.styles == () and np.isfinite(head.credit.pooled.weights).all()
    assert [style.name for style in head.correct.styles] == ["scientsbank"]
    # with no style of its own, every question takes the pooled line
    pooled = StyledLines((), head.correct.pooled, head.correct.sharpness, head.correct.floor)
    x = head.correct.pooled.mean
    assert pooled.weights(np.ones(384)).tolist() == [1.0] and pooled.p(x, np.ones(384)) == head.correct.pooled.p(x)
    few = simulate("scientsbank", real_encoder, rows=rows, teacher=TEACHER)
    for i, (rubric, _text, _) in few.cases.items():
        full = [a for a, _ in sim.cases[i][0].item.examples]
        drawn = [a for a, _ in rubric.item.examples]
        assert min(TEACHER[0], len(full)) <= len(drawn) <= TEACHER[1] and set(drawn) <= set(full)
    assert any(len(r.item.examples) < len(sim.cases[i][0].item.examples) for i, (r, _, _) in few.cases.items())
    figures = grouped_cv([sim], folds=2, teacher=[few])
    assert set(figures.grouped_cv) == {"scientsbank"} and sum(figures.confusion["scientsbank"].values()) == len(rows)
    assert set(figures.teacher) == {"scientsbank"}


def test_a_head_is_fitted_over_one_decision() -> None:
    """The manifest names the decision whose probabilities the head reads again; sets graded with different
    decisions cannot make one head."""
    one, other = (cast(Simulated, SimpleNamespace(decision=SimpleNamespace(version=v)))
                  for v in ("grader-a", "grader-b"))
    assert decision_of([one, one]) == "grader-a"
    with pytest.raises(ValueError, match="different decisions"):
        decision_of([one, other])

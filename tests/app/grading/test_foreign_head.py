"""The foreign head: questions from outside the bank, graded with no labelled examples."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.grading import Graders, GradingItem, grade, prepare
from app.grading.decision import FEATURES as DECISION_FEATURES
from app.grading.decision import load_decision
from app.grading.examples import MIN_EXAMPLES
from app.grading.foreign import FOREIGN_PATH, INPUTS, ForeignHead, applies, load_foreign
from app.grading.rubric import attach_neighbours
from grading_lab import readings
from grading_lab.asag import ASAG_DIR
from grading_lab.examples_cv import DEV_PATH, INLINE_PATH, concat, simulate, simulate_inline, split_rows
from grading_lab.foreign_fit import CREDIT_FROM, HEAD_VERSION, by_module, figures, fit_head
from grading_lab.heldout import heldout_judge
from grading_lab.judge_train import JUDGE_DIR
from ingest.identity import file_sha256
from tests.fakes import FakeEncoder

QUESTION = GradingItem(
    question="Why does a puddle disappear on a sunny day?",
    reference_answers=["The sun's heat makes the water evaporate: it turns into water vapour in the air."],
)


def test_the_head_is_for_questions_outside_the_bank_without_enough_examples(fake: FakeEncoder) -> None:
    inline = prepare(QUESTION, fake)
    assert applies(inline)
    bank = [prepare(replace(QUESTION, key="a#1"), fake), prepare(replace(QUESTION, key="a#2"), fake)]
    attach_neighbours(bank)
    assert not applies(bank[0])  # a bank question is graded by the decision alone
    labelled = [(f"answer {i}", "correct" if i % 2 else "incorrect") for i in range(MIN_EXAMPLES)]
    assert not applies(prepare(replace(QUESTION, examples=labelled), fake))  # the example head's case
    few = [("the water dries up", "correct"), ("it sinks into the ground", "incorrect")]
    assert applies(prepare(replace(QUESTION, examples=few), fake))


def test_the_committed_head_matches_the_data_it_was_fitted_on() -> None:
    manifest = json.loads(FOREIGN_PATH.read_text(encoding="utf-8"))
    assert manifest["features"] == list(INPUTS) and manifest["version"] == HEAD_VERSION
    # The head reads the served decision's probabilities again: a refitted decision calls for a refitted head.
    assert manifest["decision"] == load_decision().version
    for name in ("beetle_train.jsonl", "scientsbank_train.jsonl"):
        assert manifest["data"][name] == file_sha256(ASAG_DIR / name)
    assert manifest["data"]["inline_answers.jsonl"] == file_sha256(INLINE_PATH)
    assert manifest["data"]["dev.jsonl (graded, not fitted)"] == file_sha256(DEV_PATH)
    head = load_foreign()
    for lines in (head.correct, head.credit):
        for line in (*(style.line for style in lines.styles), lines.pooled):
            assert line.weights.shape == (len(INPUTS),)
    # P(correct or partial) per style of the sets whose labels tell partial from incorrect
    assert [style.name for style in head.credit.styles] == ["beetle_heldout", "inline_answers"]
    assert [style.name for style in head.correct.styles] == ["scientsbank", "beetle_heldout", "inline_answers"]
    for style in head.correct.styles:
        assert np.linalg.norm(style.centroid) == pytest.approx(1.0, abs=1e-4)
    assert set(manifest["figures"]["grouped_cv"]) == {"scientsbank", "beetle_heldout", "inline_answers"}
    # The dev set, whose answers the decision was fitted on, is graded by the head, not fitted on.
    assert set(manifest["figures"]["unfitted"]) == {"dev_inline", "dev_inline_3way", "dev_inline_decision_alone"}


def test_a_head_file_of_another_layout_or_other_inputs_is_refused() -> None:
    """A file with one P(correct) line for every style (foreign-9 and before) or one P(correct or partial) line
    (foreign-11 and before), or fitted on other inputs, asks for the fit again rather than grading with weights
    read the wrong way."""
    manifest = json.loads(FOREIGN_PATH.read_text(encoding="utf-8"))
    assert ForeignHead.from_dict(manifest).version == HEAD_VERSION
    single_line = {**manifest, "correct": manifest["correct"]["pooled"]}
    single_credit = {**manifest, "credit": manifest["credit"]["pooled"]}
    other_inputs = {**manifest, "features": manifest["features"][:-1]}
    for damaged in (single_line, single_credit, other_inputs):
        with pytest.raises(ValueError, match="fitted on other inputs; run `python -m grading_lab"):
            ForeignHead.from_dict(damaged)


def test_a_question_takes_the_line_of_the_style_it_is_near_and_the_pooled_line_when_near_none() -> None:
    lines = load_foreign().correct
    for n, style in enumerate(lines.styles):
        weights = lines.weights(style.centroid)
        assert weights.sum() == pytest.approx(1.0) and int(np.argmax(weights)) == n and weights[n] > 0.9
    # a vector unlike every style's questions (orthogonal to all three centroids): the pooled line
    centroids = np.stack([style.centroid for style in lines.styles])
    far = np.random.default_rng(0).normal(size=centroids.shape[1])
    far -= centroids.T @ np.linalg.lstsq(centroids.T, far, rcond=None)[0]
    far /= np.linalg.norm(far)
    assert int(np.argmax(lines.weights(far))) == len(lines.styles)
    # a vector of another encoder: the pooled line alone
    assert lines.weights(np.ones(7)).tolist() == [0.0] * len(lines.styles) + [1.0]


@pytest.mark.slow
def test_the_styles_lines_differ_where_the_sets_want_different_lines(real_encoder) -> None:  # type: ignore[no-untyped-def]
    """The same evidence is weighed by each style's own line: a SciEntsBank-like question and one of this
    product's field (near the inline answers' questions) differ in P(correct) (the pooled head drew one line
    for all three and fitted none of them well)."""
    head = load_foreign()
    x = np.zeros(len(DECISION_FEATURES))
    probs = np.array([0.3, 0.5, 0.2])
    science = real_encoder.encode(["How did you separate the salt from the water in the mock rocks?"])[0]
    bank = real_encoder.encode(["What does the term 'pipeline bubble' refer to in pipeline parallelism?"])[0]
    assert int(np.argmax(head.correct.weights(science))) == 0 and int(np.argmax(head.correct.weights(bank))) == 2
    assert abs(head.probabilities(probs, x, science)[0] - head.probabilities(probs, x, bank)[0]) > 0.01


def test_the_fit_refuses_a_judge_that_saw_the_held_out_questions(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit, match="not made like the shipped one"):
        heldout_judge(0, JUDGE_DIR)
    # no judge in the folder: its committed recording is replayed, and with none either, the fit stops
    assert isinstance(heldout_judge(0, tmp_path), readings.ReplayJudge)
    monkeypatch.setattr(readings, "READINGS_DIR", tmp_path / "no-recordings")
    with pytest.raises(SystemExit, match="no held-out judge"):
        heldout_judge(0, tmp_path)


def test_by_module_holds_out_a_sciEntsBank_module_together() -> None:
    assert by_module("scientsbank", "EM_45b") == by_module("scientsbank", "EM_21a") == "EM"
    assert by_module("beetle_heldout", "BULB_C_VOLTAGE") == "BULB_C_VOLTAGE"


PUDDLE = QUESTION
BULB = GradingItem(
    question="Why does a bulb go out when the switch is opened?",
    reference_answers=["Opening the switch breaks the circuit so no current can flow through the bulb."],
)
PLANT = GradingItem(
    question="What does a plant need sunlight for?",
    reference_answers=["Plants use the energy of sunlight to make their food (sugar) by photosynthesis."],
)
WRONG = [  # wrong answers that share the question's subject: the decision alone calls them partial
    (PUDDLE, "the water soaks into the ground"),
    (PUDDLE, "the sun does not make it evaporate, it drains away"),
    (BULB, "the circuit stays closed and current flows"),
    (PLANT, "it uses sunlight to breathe"),
]


@pytest.mark.slow
def test_an_inline_question_is_graded_with_the_head(real_encoder) -> None:  # type: ignore[no-untyped-def]
    rubric = prepare(PUDDLE, real_encoder)
    answer = "the heat turns the water into vapour which goes into the air"
    served = grade(rubric, answer, real_encoder)
    alone = grade(rubric, answer, real_encoder, graders=Graders(no_foreign=True))
    assert served.grader_version.endswith(f"+{HEAD_VERSION}") and HEAD_VERSION not in alone.grader_version


@pytest.mark.slow
@pytest.mark.xfail(reason="known weak spot (docs/GRADING.md): the foreign head, fitted over the judges trained "
                          "without final full stops, reads the first of these as incorrect", strict=True)
def test_a_right_answer_to_an_inline_question_is_correct(real_encoder) -> None:  # type: ignore[no-untyped-def]
    answer = "the heat turns the water into vapour which goes into the air"
    assert grade(prepare(PUDDLE, real_encoder), answer, real_encoder).verdict == "correct"
    assert grade(prepare(BULB, real_encoder), "the circuit is broken so current stops", real_encoder).verdict == \
        "correct"


@pytest.mark.slow
@pytest.mark.parametrize(("item", "answer"), WRONG, ids=[a for _, a in WRONG])
def test_a_wrong_account_of_a_foreign_question_is_incorrect(real_encoder, item: GradingItem, answer: str) -> None:  # type: ignore[no-untyped-def]
    assert grade(prepare(item, real_encoder), answer, real_encoder).verdict == "incorrect"


@pytest.mark.slow
@pytest.mark.xfail(reason="known weak spot (docs/GRADING.md): right answers to foreign questions in other words "
                          "than the accepted answer's are still often read as partial, or as wrong", strict=True)
@pytest.mark.parametrize(("item", "answer"), [
    (BULB, "there's a gap so electricity can't flow"),
], ids=["gap"])
def test_a_right_answer_in_other_words_to_a_foreign_question_is_correct(real_encoder, item: GradingItem,  # type: ignore[no-untyped-def]
                                                                        answer: str) -> None:
    assert grade(prepare(item, real_encoder), answer, real_encoder).verdict == "correct"


@pytest.mark.slow
@pytest.mark.parametrize(("item", "answer"), [
    (PUDDLE, "the water evaporates because of the heat of the sun"),
    (PLANT, "to make food through photosynthesis"),
], ids=["evaporates", "photosynthesis"])
def test_right_answers_in_other_words_that_the_styles_lines_grade_correct(real_encoder, item: GradingItem,  # type: ignore[no-untyped-def]
                                                                         answer: str) -> None:
    """Once read as partial by the one line drawn for every style together (foreign-9); SciEntsBank's own
    line takes them as right."""
    assert grade(prepare(item, real_encoder), answer, real_encoder).verdict == "correct"


@pytest.mark.slow
def test_the_fit_and_its_figures_run_end_to_end_on_a_slice(real_encoder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rows = split_rows("scientsbank")
    questions = sorted({r["question_id"] for r in rows})[:4]
    sci = simulate(
        "scientsbank", real_encoder, with_examples=False, rows=[r for r in rows if r["question_id"] in questions]
    )
    beetle_rows = split_rows("beetle")
    first = sorted({r["question_id"] for r in beetle_rows})[:3]
    parts = [simulate("beetle", real_encoder, with_examples=False,
                      rows=[r for r in beetle_rows if r["question_id"] == q]) for q in first]
    beetle = concat(parts, "beetle")  # as the fit joins Beetle's folds, each read by its own judge
    assert beetle.groups == [g for p in parts for g in p.groups]
    assert beetle.verdicts(None) == [v for p in parts for v in p.verdicts(None)]
    head = fit_head([sci, beetle])
    assert [style.name for style in head.correct.styles] == ["scientsbank", "beetle"]
    assert all(np.isfinite(style.line.weights).all() for style in head.correct.styles)
    assert head.credit == head.correct  # no partial labels
    p = head.probabilities(np.array([0.2, 0.5, 0.3]), np.zeros(len(DECISION_FEATURES)),
                           head.correct.styles[0].centroid)
    assert p.sum() == pytest.approx(1.0) and (p >= 0).all()
    figs = figures([sci, beetle])
    assert set(figs["grouped_cv"]) == {"scientsbank", "beetle"}
    assert figs["answers"]["scientsbank"]["all"] == len(sci.groups)
    # With answers to inline questions labelled 3-way, P(correct or partial) is fitted on them alone (CREDIT_FROM)
    lines = INLINE_PATH.read_text(encoding="utf-8").splitlines()
    questions = sorted({json.loads(line)["qid"] for line in lines})[:3]
    (tmp_path / "inline_answers.jsonl").write_text(
        "\n".join(line for line in lines if json.loads(line)["qid"] in questions) + "\n", encoding="utf-8")
    inline = simulate_inline(real_encoder, tmp_path / "inline_answers.jsonl")
    assert inline.corpus in CREDIT_FROM and set(inline.groups) == set(questions) and "partial" in inline.labels
    assert all(rubric.neighbours is None for rubric, _, _ in inline.cases.values())  # as the inline form grades
    head = fit_head([sci, beetle, inline])
    assert [style.name for style in head.correct.styles] == ["scientsbank", "beetle", inline.corpus]
    assert [style.name for style in head.credit.styles] == [inline.corpus] and head.credit != head.correct
    figs = figures([sci, inline], unfitted=[beetle])
    assert set(figs["unfitted"]) == {"beetle", "beetle_3way", "beetle_decision_alone"}

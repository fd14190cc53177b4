"""Slow tests with the real model: dev-set figures must not fall, real paraphrases must pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.grading import GradingItem, grade, prepare, prepare_many
from app.grading.rubric import attach_neighbours
from grading_lab.evaluation import DATA_DIR, evaluate, summary

BASELINE = Path(__file__).resolve().parents[3] / "grading_lab" / "dev_baseline.json"
DEV = DATA_DIR / "eval" / "dev.jsonl"
TOLERANCE = 0.03

pytestmark = pytest.mark.usefixtures("as_served")  # bank questions read by both judges, as served


@pytest.mark.slow
@pytest.mark.skipif(not DEV.exists(), reason="no dev set")
def test_dev_figures_do_not_fall(real_encoder) -> None:  # type: ignore[no-untyped-def]
    recorded = json.loads(BASELINE.read_text())
    report = evaluate(DEV, real_encoder)
    now = summary(report)
    for key in ("macro_f1_3", "macro_f1_2"):
        assert now[key] >= recorded[key] - TOLERANCE, (key, now[key], recorded[key])
    # Well above plain cosine with after-the-fact thresholds (0.26 and 0.18 here; 0.26 both on the
    # blind set, docs/GRADING.md).
    assert now["macro_f1_3"] >= now["baseline_macro_f1_3"] + 0.2
    assert now["macro_f1_2"] >= now["baseline_macro_f1_2"] + 0.15


@pytest.mark.slow
def test_real_model_separates_terse_correct_from_swapped(real_encoder) -> None:  # type: ignore[no-untyped-def]
    item = GradingItem(
        question="What is the difference between data parallelism and model parallelism?",
        reference_answers=["Data parallelism replicates the model and splits data; model parallelism "
                           "splits the model across devices"],
    )
    rubric = prepare(item, real_encoder)
    good = grade(rubric, "DP: same model on every GPU, different data. MP: the model itself is split "
                 "over GPUs.", real_encoder)
    swapped = grade(rubric, "data parallelism splits the model; model parallelism splits the data",
                    real_encoder)
    assert good.verdict == "correct"
    assert swapped.verdict == "incorrect" and "roles_swapped" in swapped.flags


@pytest.mark.slow
@pytest.mark.parametrize("answer", [
    pytest.param("Sourdough needs a long, slow fermentation to develop its flavour.", marks=pytest.mark.xfail(
        reason="known weak spot (docs/GRADING.md): partial on the staleness question, which shares 'slow' with "
               "it; the pair judge reads one shared word as a partial answer", strict=True)),
    "The capital of France is Paris."])
def test_off_subject_answers_get_no_credit_on_any_bank_question(real_encoder, answer: str) -> None:  # type: ignore[no-untyped-def]
    from grading_lab.evaluation import bank_items

    items = bank_items()
    rubrics = prepare_many(list(items.values()), real_encoder)
    attach_neighbours(rubrics)  # bank questions, as served
    verdicts = {key: grade(rubric, answer, real_encoder).verdict for key, rubric in zip(items, rubrics, strict=True)}
    assert {k: v for k, v in verdicts.items() if v != "incorrect"} == {}


@pytest.fixture(scope="module")
def reduce_scatter(real_encoder):  # type: ignore[no-untyped-def]
    """The reduce-scatter question's item and rubric."""
    from grading_lab.evaluation import bank_items

    items = list(bank_items().values())
    rubrics = prepare_many(items, real_encoder)
    attach_neighbours(rubrics)  # a bank question, as served
    (n,) = [n for n, i in enumerate(items) if i.question.startswith("What is reduce-scatter")]
    return items[n], rubrics[n]


@pytest.mark.slow
def test_a_correct_answer_near_a_wrong_option_is_not_its_misconception(real_encoder, reduce_scatter) -> None:  # type: ignore[no-untyped-def]
    """The model puts "each rank keeps one reduced chunk" nearer "reduce-scatter broadcasts the full
    gradient to all ranks" than the accepted answer (shared words: rank, reduce, gradient). It is not
    that misconception: one is named only when the pair judge reads the answer as the option's claim."""
    _, rubric = reduce_scatter
    right = grade(rubric, "each rank keeps one reduced chunk of the summed tensor", real_encoder)
    assert right.matched_misconception is None


@pytest.mark.slow
def test_a_short_right_answer_near_a_wrong_option_gets_credit(real_encoder, reduce_scatter) -> None:  # type: ignore[no-untyped-def]
    _, rubric = reduce_scatter
    assert grade(rubric, "each rank keeps one reduced chunk of the summed tensor", real_encoder).verdict != "incorrect"


@pytest.mark.slow
@pytest.mark.parametrize("wrong", [
    pytest.param("every rank gets the full summed gradient", marks=pytest.mark.xfail(
        reason="known weak spot (docs/GRADING.md): the judges trained without final full stops read this "
               "restated wrong option as partial", strict=True)),
    # the wrong option's own terms, in its order: that option (choice._same_terms), whatever the judges read
    "it broadcasts the whole gradient to every rank",
])
def test_wrong_options_restated_are_incorrect_and_named_only_as_that_option(real_encoder, reduce_scatter,  # type: ignore[no-untyped-def]
                                                                            wrong: str) -> None:
    item, rubric = reduce_scatter
    result = grade(rubric, wrong, real_encoder)
    assert result.verdict == "incorrect"
    assert result.matched_misconception in (None, item.wrong_answers[0])

"""The bank decision: a bank question's answer is weighed with the late judge's reading beside the pair
judge's; questions from outside the bank, and questions the example head grades, are not."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from app.grading import GradeResult, Graders, GradingItem, grade, prepare
from app.grading.decision import (
    AGREEMENT_FEATURES,
    BANK_DECISION_PATH,
    BANK_FEATURES,
    BEYOND_CAP,
    DECISION_PATH,
    FEATURES,
    LATE_FEATURES,
    VERDICTS,
    Decision,
    load_bank_decision,
    load_decision,
)
from app.grading.examples import MIN_EXAMPLES
from app.grading.grader import BANK_GRADER, DECISION_GRADER, WRONG_FLAGS, bank_input, decide
from app.grading.judge import evidence
from app.grading.judges import default_judge, offline_late_judge
from app.grading.rubric import Rubric, attach_neighbours
from app.grading.scoring import load_model
from grading_lab.evaluation import bank_items
from tests.fakes import FakeEncoder

QUESTION = GradingItem(
    question="What does all-gather do?",
    reference_answers=["Every rank ends up with every rank's chunk: the full tensor on all ranks."],
    wrong_answers=["It sums the tensors and keeps the sum on rank 0"],
)
OTHER = GradingItem(
    question="What does reduce-scatter do?",
    reference_answers=["It sums the tensors across ranks and leaves each rank one shard of the sum."],
)


class StubLateJudge:
    """Fixed probabilities, and the pairs it was asked to read (the real one is tested through the
    grader in test_hard_cases.py and through the served API in tests/test_e2e.py)."""

    version = "late-stub"

    def __init__(self, probs: Sequence[float] = (0.7, 0.2, 0.1)) -> None:
        self.manifest: dict[str, Any] = {}
        self.probs = np.asarray(probs, dtype=np.float32)
        self.read: list[tuple[str, str, str]] = []

    def probabilities(self, triples: Sequence[tuple[str, str, str]]) -> np.ndarray:
        self.read.extend(triples)
        return np.tile(self.probs, (len(triples), 1))


def _bank(fake: FakeEncoder, item: GradingItem = QUESTION) -> Rubric:
    rubrics = [prepare(replace(item, key="f#1"), fake), prepare(replace(OTHER, key="f#2"), fake)]
    attach_neighbours(rubrics)
    return rubrics[0]


def test_the_committed_bank_decision_reads_the_decisions_inputs_and_the_late_judges() -> None:
    bank = load_bank_decision()
    assert bank.features == BANK_FEATURES == (*FEATURES, *LATE_FEATURES, "roles_confirmed", "beyond_question",
                                              *AGREEMENT_FEATURES)
    assert bank.weights.shape == (3, len(BANK_FEATURES))
    manifest = json.loads(BANK_DECISION_PATH.read_text(encoding="utf-8"))
    assert "late-judge" in manifest["version"] and "pair-judge" in manifest["version"]
    assert manifest["grouped_cv"]["n"] > 1000  # its figures are grouped cross-validation, recorded with it


def test_the_committed_decisions_are_fitted_for_this_grader_and_its_judges(served_late_judge: Any) -> None:
    """A change to what a decision weighs or to the rules after it bumps the grader's part of the version, and
    the decision must then be refitted for it; so must a retrained judge."""
    pair, late = default_judge().version, served_late_judge.version
    assert load_decision().version == f"{DECISION_GRADER}+{pair}"
    assert load_bank_decision().version == f"{BANK_GRADER}+{pair}+{late}"


def test_a_decision_file_is_refused_for_the_wrong_features(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="not a bank decision"):
        load_bank_decision(DECISION_PATH)
    d = json.loads(BANK_DECISION_PATH.read_text(encoding="utf-8"))
    with pytest.raises(ValueError, match="other features"):
        Decision.from_dict({**d, "features": [*FEATURES, "something_else"]})
    with pytest.raises(ValueError, match="do not match"):
        Decision.from_dict({**d, "features": list(FEATURES)})  # bank weights under the decision's names
    assert Decision.from_dict(load_bank_decision().to_dict()).features == BANK_FEATURES


def test_a_bank_questions_answer_is_read_by_both_judges_and_weighed_by_the_bank_decision(fake: FakeEncoder) -> None:
    late = StubLateJudge()
    rubric = _bank(fake)
    result = grade(rubric, "each rank gets the whole tensor, every chunk from every rank", fake,
                   graders=Graders(late=late))
    assert result.grader_version == load_bank_decision().version
    assert late.read and all(q == QUESTION.question for q, _, _ in late.read)
    assert late.read[0][1] == QUESTION.reference_answers[0]


def test_the_late_judges_reading_moves_the_verdict(fake: FakeEncoder) -> None:
    rubric = _bank(fake)
    answer = "every rank ends up with the full tensor"
    sure_right = grade(rubric, answer, fake, graders=Graders(late=StubLateJudge((0.98, 0.01, 0.01))))
    sure_wrong = grade(rubric, answer, fake, graders=Graders(late=StubLateJudge((0.01, 0.01, 0.98))))
    assert sure_right.score > sure_wrong.score


def test_without_a_late_judge_a_bank_question_is_weighed_by_the_decision_alone(fake: FakeEncoder) -> None:
    rubric = _bank(fake)
    late = StubLateJudge()
    for graders in (Graders(), Graders(late=late, no_late=True), Graders(late=late, rules=True)):
        result = grade(rubric, "every rank ends up with the full tensor", fake, graders=graders)
        assert "late" not in result.grader_version
    assert not late.read


def test_questions_a_head_grades_are_not_read_by_the_late_judge(fake: FakeEncoder) -> None:
    late = StubLateJudge()
    inline = prepare(QUESTION, fake)  # from outside the bank: the foreign head's
    result = grade(inline, "every rank ends up with the full tensor", fake, graders=Graders(late=late))
    assert result.grader_version.startswith(load_decision().version) and "foreign" in result.grader_version
    labelled = [(f"every rank gets chunk {i}", "correct" if i % 2 else "incorrect") for i in range(MIN_EXAMPLES)]
    with_examples = _bank(fake, replace(QUESTION, examples=labelled))  # the example head's, even in the bank
    result = grade(with_examples, "every rank ends up with the full tensor", fake, graders=Graders(late=late))
    assert "examples" in result.grader_version
    assert not late.read


@pytest.mark.slow
def test_offline_grading_reads_the_committed_late_judge_on_the_int8_export(
        onnx_encoder_dir: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """`tutor eval` and the decision's fit read the late judge with an int8 encoder of their own, from
    the index's export; without one they say what to run."""
    from app.config import Settings
    from app.grading.pairjudge import JudgeArtifactError
    from tests.conftest import with_onnx

    empty = Settings(data_dir=tmp_path / "empty")
    with pytest.raises(JudgeArtifactError, match="tutor models export"):
        offline_late_judge(empty)
    with_onnx(tmp_path / "data" / "index", onnx_encoder_dir)
    monkeypatch.setenv("TUTOR_DATA_DIR", str(tmp_path / "data"))
    judge = offline_late_judge(Settings())
    item = bank_items()[("000_78b4b506bc754b1f.txt", 1)]  # a bank question: the late judge reads those only
    read = [(item.question, item.reference_answers[0], answer) for answer in (
        "Micro-batches let neighbouring stages work on different slices of the batch at once, so the pipeline "
        "stays busy", "a batch that gets shipped to the cpu so it can do the preprocessing")]
    probs = judge.probabilities(read)
    assert probs.shape == (2, 3) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    # The right answer is read as more right than the wrong one; late-judge-2 reads this paraphrase as
    # wrong all the same (P(correct) 0.14; docs/GRADING_LOG.md, "Final full stops"), and the grader, with the
    # pair judge, grades it correct.
    assert probs[0, 0] > 0.1 and probs[1, 0] < 0.05


def test_an_answer_both_judges_read_as_wrong_is_not_graded_correct(fake: FakeEncoder,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """However close its words are to the accepted answer: "all-gather leaves each rank with only its own
    chunk" shares nearly all of them (tests/app/grading/test_hard_cases.py grades it with the real judges)."""
    import app.grading.grader as grader

    rubric = _bank(fake)
    answer = "Every rank ends up with every rank's chunk, the full tensor on all of the ranks."
    leaning_wrong = (0.3, 0.05, 0.65)
    graders = Graders(judge=StubLateJudge(leaning_wrong), late=StubLateJudge(leaning_wrong))
    monkeypatch.setattr(grader, "BOTH_JUDGES_WRONG", 9.0)  # the rule off: the similarity evidence wins
    assert grade(rubric, answer, fake, graders=graders).verdict == "correct"
    monkeypatch.undo()
    assert grade(rubric, answer, fake, graders=graders).verdict == "incorrect"
    one_reads_it_right = Graders(judge=StubLateJudge((0.6, 0.1, 0.3)), late=StubLateJudge(leaning_wrong))
    assert grade(rubric, answer, fake, graders=one_reads_it_right).verdict == "correct"


TWO_SIDED = GradingItem(
    question="What is the difference between data parallelism and model parallelism?",
    reference_answers=["Data parallelism replicates the model and splits the data; model parallelism splits the "
                       "model across devices."],
    roles=[{"names": ["data parallelism"], "cues": ["replicates", "splits the data"]},
           {"names": ["model parallelism"], "cues": ["splits the model"]}],
)


def test_an_answer_giving_the_roles_their_own_words_is_not_settled_by_the_judges_alone(
        fake: FakeEncoder, monkeypatch: pytest.MonkeyPatch) -> None:
    """The judges do not read which subject goes with which claim (both read this question's own accepted
    answer as wrong: docs/GRADING.md, "Known weak spots"); an answer that gives each side its own words
    keeps the decision's verdict. One that gives a side the other's words does not."""
    import app.grading.grader as grader

    leaning_wrong = (0.3, 0.05, 0.65)
    graders = Graders(judge=StubLateJudge(leaning_wrong), late=StubLateJudge(leaning_wrong))
    right = "Data parallelism replicates the model and splits the data; model parallelism splits the model across GPUs"
    with_roles, without = _bank(fake, TWO_SIDED), _bank(fake, replace(TWO_SIDED, roles=[]))
    monkeypatch.setattr(grader, "BOTH_JUDGES_WRONG", 9.0)  # the rule off: the decision's own verdict
    assert grade(with_roles, right, fake, graders=graders).verdict == "correct"
    monkeypatch.undo()
    assert grade(with_roles, right, fake, graders=graders).verdict == "correct"
    assert grade(without, right, fake, graders=graders).verdict == "incorrect"  # no roles to read: the rule holds
    swapped = "Model parallelism replicates the model and splits the data; data parallelism splits the model"
    assert grade(with_roles, swapped, fake, graders=graders).verdict == "incorrect"


@pytest.mark.parametrize(("answer", "beyond"), [
    ("all-gather is the collective that does the gathering", 0),  # the question's words again
    ("it depends on the setup, each way has its pros and cons", 0),  # true of anything
    ("every rank ends up with the full tensor", 4),  # ends up with, every rank, the full tensor
    ("each rank gets every chunk", 2),
])
def test_the_bank_decision_reads_what_an_answer_says_beyond_the_question(fake: FakeEncoder, answer: str,
                                                                            beyond: int) -> None:
    rubric = _bank(fake)
    ev = evidence(rubric, answer, fake.encode([answer])[0], [], load_model())
    assert ev.beyond_question == beyond
    x = bank_input(np.zeros(len(FEATURES)), replace(ev, late=np.zeros((1, 3))))
    at = BANK_FEATURES.index("beyond_question")
    assert x.shape == (len(BANK_FEATURES),) and x[at] == min(beyond, BEYOND_CAP) / BEYOND_CAP


def test_the_bank_decision_reads_how_far_the_two_judges_agree(fake: FakeEncoder) -> None:
    """The products of the two judges' probabilities, class by class: large only where both read the
    answer alike."""
    rubric = _bank(fake)
    answer = "every rank ends up with the full tensor"
    ev = evidence(rubric, answer, fake.encode([answer])[0], [], load_model())
    x = np.zeros(len(FEATURES))
    x[FEATURES.index("judge_correct"):FEATURES.index("judge_incorrect") + 1] = np.log([0.8, 0.1, 0.1])
    both = slice(BANK_FEATURES.index("both_correct"), BANK_FEATURES.index("both_incorrect") + 1)
    alike = bank_input(x, replace(ev, late=np.array([[0.9, 0.05, 0.05]])))[both]
    apart = bank_input(x, replace(ev, late=np.array([[0.05, 0.05, 0.9]])))[both]
    assert alike == pytest.approx([0.72, 0.005, 0.005])
    assert apart == pytest.approx([0.04, 0.005, 0.09])


def _always(verdict: str) -> Decision:
    """A bank decision that weighs nothing and always leans to one verdict: what the rules after it do
    shows alone."""
    bias = np.full(3, -2.0)
    bias[VERDICTS.index(verdict)] = 2.0
    n = len(BANK_FEATURES)
    return Decision(np.zeros(n), np.ones(n), np.zeros((3, n)), bias, f"always-{verdict}", BANK_FEATURES)


@pytest.mark.parametrize(("answer", "late", "verdict"), [
    ("it depends on the setup, each way has its pros and cons", (0.02, 0.3, 0.68), "incorrect"),
    ("all-gather is the collective that does the gathering", (0.02, 0.3, 0.68), "incorrect"),
    ("each rank gets every chunk", (0.02, 0.3, 0.68), "partial"),  # it says something: the decision's verdict
    # one judge reads it as partial: the judges' mean P(incorrect) decides (0.68 and 0.38; 0.68 and 0.28)
    ("it depends on the setup, each way has its pros and cons", (0.02, 0.6, 0.38), "incorrect"),
    ("it depends on the setup, each way has its pros and cons", (0.02, 0.7, 0.28), "partial"),
    # it names a term of its own: incorrect all the same, but it answers, so it is no evasion
    ("all-gather is just a TCP broadcast", (0.02, 0.3, 0.68), "incorrect"),
])
def test_an_answer_the_judges_read_as_wrong_that_says_nothing_beyond_the_question_is_not_partly_right(
        fake: FakeEncoder, answer: str, late: tuple[float, float, float], verdict: str) -> None:
    graders = Graders(judge=StubLateJudge((0.02, 0.3, 0.68)), late=StubLateJudge(late),
                      bank_decision=_always("partial"))
    result = grade(_bank(fake), answer, fake, graders=graders)
    assert result.verdict == verdict
    if verdict == "incorrect":
        assert result.score == 0.0
        evasion = "TCP" not in answer
        assert ("evasive" in result.flags) == evasion
        assert result.feedback.startswith("That doesn't answer the question: nothing in it goes beyond") == evasion


@pytest.mark.parametrize(("answer", "leaning", "verdict"), [
    # the writer says they do not know, and nothing goes beyond the question: an evasion, whatever the judges
    # and the decision read
    ("all-gather is one of the collectives, I always get them mixed up", "partial", "incorrect"),
    ("all-gather is one of those collectives, can't remember the details", "correct", "incorrect"),
    ("all-gather is a collective, check the docs", "partial", "incorrect"),
    # a hedged answer that says something beyond the question is graded on what it says
    ("not sure I remember it right, but every rank ends up with the full tensor", "correct", "correct"),
    ("every rank gets every chunk, I forget the rest", "partial", "partial"),
    # a mild hedge is how right answers are written: not one of these
    ("all-gather is one of those collectives, I think", "partial", "partial"),
    # a guess that names a term of its own is graded incorrect too, but it is no evasion: it is told what
    # it misses, not that it says nothing
    ("all-gather uses NVSHMEM I think, can't remember the details", "partial", "incorrect"),
])
def test_an_answer_that_admits_not_knowing_and_says_nothing_beyond_the_question_is_an_evasion(
        fake: FakeEncoder, answer: str, leaning: str, verdict: str) -> None:
    graders = Graders(judge=StubLateJudge((0.3, 0.6, 0.1)), late=StubLateJudge((0.3, 0.6, 0.1)),
                      bank_decision=_always(leaning))
    result = grade(_bank(fake), answer, fake, graders=graders)
    assert result.verdict == verdict
    evasion = verdict == "incorrect" and "NVSHMEM" not in answer
    assert ("evasive" in result.flags) == evasion
    if verdict == "incorrect":
        assert result.score == 0.0
        assert result.feedback.startswith("That doesn't answer the question: nothing in it goes beyond") == evasion


def test_an_answer_that_states_every_side_in_its_own_words_is_correct_whatever_the_judges_read(
        fake: FakeEncoder) -> None:
    """Both judges read this question's right answers as wrong (docs/GRADING_LOG.md, "Two judges"); an answer
    that gives each authored side its own words and no side another's is right. One side alone, a swap,
    or a question without authored roles keep the decision's verdict."""
    leaning_wrong = (0.02, 0.05, 0.93)
    graders = Graders(judge=StubLateJudge(leaning_wrong), late=StubLateJudge(leaning_wrong),
                      bank_decision=_always("incorrect"))
    rubric = _bank(fake, TWO_SIDED)
    both = "data parallelism replicates the whole model on each GPU; model parallelism splits the model's layers"
    result = grade(rubric, both, fake, graders=graders)
    assert (result.verdict, result.score, result.feedback) == ("correct", 1.0, "Correct.")
    assert result.confidence >= 0.9
    for answer in ("data parallelism replicates the whole model on each GPU",  # one side
                   "data parallelism splits the model; model parallelism replicates it"):  # a swap
        assert grade(rubric, answer, fake, graders=graders).verdict == "incorrect"
    assert grade(_bank(fake, replace(TWO_SIDED, roles=[])), both, fake, graders=graders).verdict == "incorrect"


def test_a_swap_the_clause_check_reads_is_dropped_where_the_authored_roles_confirm_the_answer(
        fake: FakeEncoder) -> None:
    """The clause check guesses a swap from the accepted answer's wording ("the whole model" is model
    parallelism's subject there); the authored roles read data parallelism given its own words. The
    answer, about one side, keeps the decision's verdict instead of being made incorrect as a reversal."""
    leaning_wrong = (0.02, 0.45, 0.53)
    graders = Graders(judge=StubLateJudge(leaning_wrong), late=StubLateJudge(leaning_wrong),
                      bank_decision=_always("partial"))
    answer = "data parallelism replicates the whole model on each GPU"
    result = grade(_bank(fake, TWO_SIDED), answer, fake, graders=graders)
    assert (result.verdict, result.flags) == ("partial", [])
    without_roles = grade(_bank(fake, replace(TWO_SIDED, roles=[])), answer, fake, graders=graders)
    assert without_roles.verdict == "incorrect" and "roles_swapped" in without_roles.flags


def test_the_rules_after_the_decision_read_what_the_rules_before_them_left(fake: FakeEncoder) -> None:
    """An answer that gives every authored side its own words is made correct only when no rule before
    has settled it: here both judges read it as the nominated wrong option's claim, so the misconception
    is named and stands."""
    rubric = _bank(fake, TWO_SIDED)
    answer = "data parallelism replicates the whole model on each GPU; model parallelism splits the model's layers"
    ev = evidence(rubric, answer, fake.encode([answer])[0], [], load_model())
    wrong = "Model parallelism replicates the model and splits the data"  # as if the similarity evidence nominated it
    on_ref, on_wrong = np.array([[0.05, 0.1, 0.85]]), np.array([[0.8, 0.1, 0.1]])
    ev = replace(ev, wrong=wrong, roles_stated=True, late=np.concatenate([on_ref, on_wrong]))
    result = decide(rubric, answer, ev, on_ref, on_wrong, load_decision(), bank=_always("partial"))
    assert (result.verdict, result.matched_misconception) == ("incorrect", wrong)
    stated = decide(rubric, answer, replace(ev, wrong=None, late=on_ref), on_ref, np.zeros((0, 3)), load_decision(),
                    bank=_always("partial"))
    assert (stated.verdict, stated.score) == ("correct", 1.0)


def _decided(fake: FakeEncoder, answer: str, verdict: str, on_ref: Sequence[float],
             on_wrong: Sequence[float] | None = None, **changes: Any) -> GradeResult:
    """`answer` decided by a bank decision that always leans to `verdict`, both judges reading it as given
    (against the accepted answer; against the nominated wrong option, if any), with `changes` to its evidence."""
    rubric = _bank(fake)
    ev = evidence(rubric, answer, fake.encode([answer])[0], [], load_model())
    refs = np.array([on_ref])
    wrongs = np.array([on_wrong]) if on_wrong is not None else np.zeros((0, 3))
    ev = replace(ev, **{"flags": [], "wrong": None, **changes}, late=np.concatenate([refs, wrongs]))
    return decide(rubric, answer, ev, refs, wrongs, load_decision(), bank=_always(verdict))


def test_a_misconception_the_judge_cannot_tell_from_the_accepted_answer_is_not_named(fake: FakeEncoder) -> None:
    """The judges read the answer as the wrong option's claim only a little more surely than as the accepted
    answer's: the answer is incorrect, as before, but the learner is not told which misconception it holds
    (a right answer in other words was once told it held "randomly assigns overlapping subsets")."""
    answer = "it sums the tensors from every rank and keeps the total on rank 0"
    wrong = QUESTION.wrong_answers[0]
    tie = _decided(fake, answer, "partial", (0.45, 0.47, 0.08), (0.45, 0.49, 0.06), wrong=wrong)
    assert (tie.verdict, tie.matched_misconception) == ("incorrect", None)
    assert "misconception" not in tie.feedback
    clear = _decided(fake, answer, "partial", (0.05, 0.1, 0.85), (0.8, 0.15, 0.05), wrong=wrong)
    assert (clear.verdict, clear.matched_misconception) == ("incorrect", wrong)
    assert f'misconception: "{wrong}"' in clear.feedback


def test_a_correct_verdict_carries_no_flag_that_says_the_answer_is_wrong(fake: FakeEncoder) -> None:
    """The clause check guessed a swap and the answer sits a little nearer another question's accepted answer,
    but the judges read it as right: a caller shown `correct` is not also shown `roles_swapped`."""
    guessed = {"flags": ["roles_swapped", "other_question"], "other_question": OTHER.question, "other_margin": 0.1}
    answer = "every rank ends up holding the whole tensor"
    correct = _decided(fake, answer, "correct", (0.9, 0.05, 0.05), **guessed)
    assert correct.verdict == "correct" and not set(correct.flags) & set(WRONG_FLAGS), correct.flags
    partial = _decided(fake, answer, "partial", (0.9, 0.05, 0.05), **guessed)
    assert partial.verdict == "partial" and {"roles_swapped", "other_question"} <= set(partial.flags)


def test_only_a_wrong_answer_is_told_it_answers_a_different_question(fake: FakeEncoder) -> None:
    """Partial credit says the answer is partly right for this question; its feedback does not say it answers
    another one."""
    nearer_other = {"flags": ["other_question"], "other_question": OTHER.question, "other_margin": 0.1}
    answer = "each rank keeps one shard"
    partial = _decided(fake, answer, "partial", (0.1, 0.6, 0.3), **nearer_other)
    assert partial.verdict == "partial" and "different question" not in partial.feedback, partial.feedback
    wrong = _decided(fake, answer, "incorrect", (0.1, 0.2, 0.7), **nearer_other)
    assert wrong.verdict == "incorrect" and f'different question ("{OTHER.question}")' in wrong.feedback


def test_an_answer_is_not_told_it_answers_its_own_question_asked_again(fake: FakeEncoder) -> None:
    """Two quiz documents may ask the same question in other words: an answer nearer the other one's accepted
    answer is flagged (the decision weighs that as before) but not told it answers a different question."""
    again = replace(OTHER, question="What exactly does all-gather do?")
    rubrics = [prepare(replace(QUESTION, key="f#1"), fake), prepare(replace(again, key="g#1"), fake),
               prepare(replace(OTHER, key="f#2"), fake)]
    attach_neighbours(rubrics)
    neighbours = rubrics[0].neighbours
    assert neighbours is not None
    assert neighbours.restated("f#1", "g#1") and not neighbours.restated("f#1", "f#2")
    assert not neighbours.restated("f#1", "f#1") and not neighbours.restated(None, "g#1")
    answer = "It sums the tensors across ranks and leaves each rank one shard of the sum."
    asked_again = evidence(rubrics[0], answer, fake.encode([answer])[0], [], load_model())
    assert "other_question" in asked_again.flags and asked_again.other_question is None
    elsewhere = evidence(_bank(fake), answer, fake.encode([answer])[0], [], load_model())
    assert "other_question" in elsewhere.flags and elsewhere.other_question == OTHER.question

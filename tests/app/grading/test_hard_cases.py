"""Answers of the hard kinds, graded by the real model and the real judges as a careful expert would.

The first group are answers that an earlier grader got wrong, tried as a new user would; the
second, one new answer of each kind, written for this test and found in no training file (the
bank's contrast pairs, the ASAG splits) and in neither labelled set; the third, right answers probed
beside a reported one, and terse right answers that the keyword-list check once read as bare lists.
"""

from __future__ import annotations

import pytest

from app.grading import GradeResult, Graders, Rubric, grade_many, prepare_many
from app.grading.judge import SAYS_OPPOSITE
from app.grading.judges import Judge
from app.grading.rubric import attach_neighbours
from grading_lab.evaluation import bank_items, bank_rubrics
from ingest.embedder import SentenceTransformerEncoder

pytestmark = pytest.mark.slow

F000, F001, F002, F003 = ("000_78b4b506bc754b1f.txt", "001_d277a1055194c29d.txt", "002_1f1c560eb3b82a3f.txt",
                          "003_28df717c268ee6dd.txt")

# Verdicts the grader still gets wrong (docs/GRADING.md, "Known weak spots", "DistributedSampler").
# Strict: the test fails as soon as one of them is graded right.
JUDGE_MISSES = {
    "it gives each rank a disjoint subset of the indices based on its rank and the world size":
        "partial: the training answers label the split by rank without set_epoch partial, as the seed's accepted "
        "answer asks for both (its 'disjoint' denies the overlap the wrong option 'randomly assigns overlapping "
        "subsets' asserts, so that option is no longer nominated; it once made the answer incorrect)",
    "every rank reads the whole dataset; don't forget set_epoch":
        "the judges read a wrong claim beside the accepted answer's set_epoch as right (correct, 0.75; the claim "
        "alone is graded partial); while the negation check read the reminder as a denial it was incorrect, "
        "for the wrong reason",
}


def _case(file: str, number: int, answer: str, expected: str) -> object:
    marks = [pytest.mark.xfail(reason=JUDGE_MISSES[answer], strict=True)] if answer in JUDGE_MISSES else []
    return pytest.param(file, number, answer, expected, marks=marks)


REPORTED = [
    # (file, question, answer, expected verdict)
    (F003, 10, "all-gather leaves each rank with only its own chunk; nobody gets the full tensor", "incorrect"),
    (F003, 6, "sync SGD: workers push updates whenever they finish; async SGD: everybody waits and averages each step",
     "incorrect"),
    (F003, 11, "pipeline parallelism puts consecutive groups of layers on different GPUs and streams micro-batches "
               "through them", "incorrect"),
    (F003, 4, "It runs all the forward micro-batches first and then all the backward ones", "incorrect"),
    (F002, 5, "I am not sure, something about GPUs", "incorrect"),
    (F003, 13, "bf16 has fewer exponent bits than fp16 so it overflows more easily", "incorrect"),
    (F003, 5, "it gives each rank a disjoint subset of the indices based on its rank and the world size", "correct"),
]

NEW = [
    # one of each kind: partial, swapped roles, negation, another question's answer, misconception,
    # keyword list, terse, reworded wrong option, verbose, typo
    (F003, 9, "reduce-scatter sums the gradients across ranks and each rank keeps just one slice of the result",
     "partial"),
    (F003, 7, "DataParallel runs one process per GPU, while DDP uses threads in a single process and is limited by "
              "the GIL", "incorrect"),
    (F003, 20, "broadcast never sends the source rank's tensor to the other ranks; every rank keeps its own values",
     "incorrect"),
    (F003, 15, "MFU is the ratio of the model FLOPs per second you achieve to the GPU's peak FLOPs", "incorrect"),
    (F002, 2, "it saves model checkpoints to disk regularly so training can resume after a crash", "incorrect"),
    (F003, 14, "barrier, ranks, sync, deadlock, NCCL", "incorrect"),
    (F003, 20, "src rank's tensor copied to everyone, e.g. initial weights", "correct"),
    (F003, 3, "on modern InfiniBand clusters gloo is just as fast as nccl, there's no real difference", "incorrect"),
    (F003, 24, "In asynchronous training a worker may compute its gradient on parameters that are already several "
               "updates old, which is called staleness, and the stale gradient can push the model in an outdated "
               "direction. Bounded staleness, as in the stale synchronous parallel model, lets fast workers run ahead "
               "of the slowest one by at most a fixed number of iterations, after which they wait, so the error from "
               "stale gradients stays bounded while most of the speed of asynchrony is kept.", "correct"),
    (F001, 4, "lets the netwrok card (infiniband) read and write gpu memory directy, no copy thru host ram or cpu",
     "correct"),
    # terse, with the roles right (from the written answers d..g, which no shipped model trains on): once told
    # it held the swapped misconception
    (F003, 1, "DP copies the model and splits data; MP splits the model.", "correct"),
    # a near copy of the accepted answer (data/eval/near_copies.jsonl), which both judges read as wrong
    (F003, 1, "Data parallelism replicates the model and splits data; model parallelism splits the model across "
              "GPUs.", "correct"),
    # the same in other words, which both judges read as wrong too: each side is given its own words
    (F003, 1, "Data parallelism gives every GPU a full copy of the model and splits the batch across them; model "
              "parallelism splits the model itself across GPUs.", "correct"),
    # an evasion true of any two things, with no word beyond the question's: once graded partial
    (F003, 1, "they're two different strategies, each with its pros and cons", "incorrect"),
    # one side, in its own words: once graded incorrect as a reversal by the clause check
    (F003, 1, "data parallelism copies the model to all GPUs and each one gets different data", "partial"),
]


# Right answers to the DistributedSampler question with both its parts, probed beside the reported one. The pair
# judge reads the first as the wrong option "automatically calls set_epoch each epoch internally" (P(incorrect)
# 0.91, the late judge 0.58); it was graded incorrect while the rule for answers both judges read as wrong
# fired at 0.5 each.
PROBED = [
    (F003, 5, "it gives each rank a disjoint subset of the indices based on its rank and the world size, and "
              "set_epoch reshuffles each epoch", "correct"),
    (F003, 5, "each rank takes a disjoint subset of the indices based on its rank and the world size; you call "
              "set_epoch every epoch to reshuffle", "correct"),
    # right answers with a reminder, once graded incorrect as denying what they remind of
    (F003, 5, "each rank gets its own stride of the indices; don't forget set_epoch every epoch or the shuffle "
              "repeats", "correct"),
    (F003, 5, "every rank reads its own strided slice of the dataset indices, and you must not forget set_epoch "
              "each epoch so the shuffle changes", "correct"),
    # and a wrong one
    (F003, 5, "every rank reads the whole dataset; don't forget set_epoch", "incorrect"),
    # terse claims that the keyword-list check once read as bare lists of terms
    (F003, 1, "data parallel replicates model, splits batch; model parallel splits model", "correct"),
    (F003, 7, "DDP multiprocess vs DP multithreaded GIL-bound single process", "correct"),
]

# Evasions whose "not" or "doesn't" denies nothing the accepted answer says (once told they said its opposite).
HEDGED = [
    (F003, 6, "it depends on the cluster, sometimes one is better and sometimes it isn't", "incorrect"),
    (F003, 3, "it depends, sometimes NCCL is faster and sometimes it isn't", "incorrect"),
    (F003, 3, "I don't know, maybe something about GPUs talking to each other", "incorrect"),
    # the writer says they do not know, and nothing goes beyond the question: once graded partial
    (F003, 13, "one of them is more stable, I forget which one", "incorrect"),
    (F003, 19, "it's a DDP flag, check the docs", "incorrect"),
    (F002, 3, "it combines parallelism in some way, I always mix these up", "incorrect"),
]

# The right option's name or its short form alone: once graded partial, and told "Missing: Unified Communication X".
NAMED = [
    (F000, 3, "DDP", "correct"),
    (F000, 3, "DistributedDataParallel", "correct"),
    (F001, 5, "ucx", "correct"),
    (F001, 5, "Unified Communication X", "correct"),
    # a hedge and the name: graded as the name (once partial, and incorrect)
    (F000, 3, "not sure, DistributedDataParallel?", "correct"),
    (F000, 3, "no idea, maybe DistributedDataParallel", "correct"),
    (F001, 5, "idk, probably UCX", "correct"),
    # the name with a guess after it, and both names together
    (F000, 3, "DDP i think", "correct"),
    (F001, 5, "Unified Communication X (UCX)", "correct"),
    # a short accepted answer's terms, without what the question already says ("Tensor parallelism for inference")
    (F001, 2, "tensor parallelism", "correct"),
]

# Wrong answers that name a term of their own and nothing of the accepted answer: incorrect, but they answer
# the question, so they are not told they say nothing beyond it (once flagged as evasions).
TERMED = [
    (F003, 1, "model parallelism is only for RNNs and LSTMs", "incorrect"),
]

GRADED = REPORTED + NEW + PROBED + HEDGED + NAMED + TERMED  # graded for their verdicts


# Graded for what their feedback says: wrong, with every key idea's words present.
FEEDBACK = [
    (F001, 2, "tensor parallelism, where each GPU has a full copy of the model and serves a different request",
     "incorrect"),
]


@pytest.fixture(scope="module")
def graded(served_late_judge: Judge) -> dict[tuple[str, int, str], GradeResult]:
    """Every case graded in one batch, against rubrics built as serving builds them, and read by both
    judges as served."""
    encoder = SentenceTransformerEncoder()
    items = bank_items()
    keys = sorted(items)
    rubrics: dict[tuple[str, int], Rubric] = dict(
        zip(keys, prepare_many([items[k] for k in keys], encoder), strict=True))
    attach_neighbours(list(rubrics.values()))
    cases = GRADED + FEEDBACK
    results = grade_many([rubrics[(f, n)] for f, n, _, _ in cases], [a for _, _, a, _ in cases], encoder,
                         graders=Graders(late=served_late_judge))
    return {(f, n, a): r for (f, n, a, _), r in zip(cases, results, strict=True)}


@pytest.mark.parametrize(("file", "number", "answer", "expected"), [_case(*c) for c in GRADED])
def test_graded_as_an_expert_would(graded: dict[tuple[str, int, str], GradeResult], file: str, number: int,
                                   answer: str, expected: str) -> None:
    result = graded[(file, number, answer)]
    assert result.verdict == expected, (result.verdict, result.feedback, result.flags)


@pytest.mark.parametrize(("file", "number", "answer", "expected"),
                         [c for c in GRADED if c[3] == "correct"])
def test_a_correct_answer_is_never_told_it_holds_a_misconception(
        graded: dict[tuple[str, int, str], GradeResult], file: str, number: int, answer: str, expected: str) -> None:
    result = graded[(file, number, answer)]
    assert result.matched_misconception is None
    assert "misconception" not in result.feedback


def test_an_answer_that_denies_what_a_wrong_option_disputes_is_not_read_as_that_option(
        graded: dict[tuple[str, int, str], GradeResult]) -> None:
    """Its "disjoint" denies the overlap that "randomly assigns overlapping subsets" asserts against the accepted
    answer's "non-overlapping": the option is not nominated for sharing its "subset", and the answer is not
    incorrect (`checks.denies_disputed`; it was, the bank decision weighing the nomination)."""
    result = graded[(F003, 5, REPORTED[6][2])]
    assert "misconception" not in result.flags
    assert result.verdict != "incorrect", (result.verdict, result.feedback)


def test_nor_is_it_told_so_where_the_decision_alone_grades() -> None:
    """Without the late judge (the PyTorch fallback; questions a head grades), the decision and the pair judge
    alone: the DistributedSampler answer is incorrect there too, but the pair judge reads it as the wrong
    option's claim only a hair more surely than as the accepted answer's (0.945 against 0.942), too near to
    name the misconception."""
    encoder = SentenceTransformerEncoder()
    rubrics = bank_rubrics(encoder)
    right = [c for c in GRADED if c[3] == "correct"]
    results = grade_many([rubrics[(f, n)] for f, n, _, _ in right], [a for _, _, a, _ in right], encoder,
                         graders=Graders(no_late=True))
    for (_, _, answer, _), result in zip(right, results, strict=True):
        assert result.matched_misconception is None, answer
        assert "misconception" not in result.feedback, (answer, result.feedback)


def test_an_answer_to_another_question_is_told_which(graded: dict[tuple[str, int, str], GradeResult]) -> None:
    result = graded[(F003, 11, REPORTED[2][2])]
    assert result.verdict == "incorrect"
    assert "different question" in result.feedback, result.feedback


@pytest.mark.xfail(reason="known weak spot (docs/GRADING.md): through the inline form, with no neighbouring questions "
                          "or wrong options, the pair judge reads this negation in other words as right", strict=True)
def test_a_negation_in_other_words_is_incorrect_through_the_inline_form() -> None:
    from app.grading import GradingItem, grade, prepare

    encoder = SentenceTransformerEncoder()
    item = GradingItem(question="What does all-gather do?",
                       reference_answers=["every rank ends up with every rank's chunk: the full tensor on all ranks"])
    result = grade(prepare(item, encoder), "all-gather leaves each rank with only its own chunk; nobody gets the "
                   "full tensor", encoder)
    assert result.verdict == "incorrect", (result.verdict, result.feedback)


@pytest.mark.parametrize(("file", "number", "answer", "denial"), [
    (F003, 20, NEW[2][2], "broadcast never sends the source rank's tensor to the other ranks"),
    (F003, 10, REPORTED[0][2], "nobody gets the full tensor"),
])
def test_a_denial_is_told_it_says_the_opposite_and_where(graded: dict[tuple[str, int, str], GradeResult], file: str,
                                                         number: int, answer: str, denial: str) -> None:
    result = graded[(file, number, answer)]
    assert result.verdict == "incorrect"
    assert SAYS_OPPOSITE in result.feedback and f'see "{denial}"' in result.feedback, result.feedback


def test_an_idea_the_answer_denies_is_not_counted_as_covered(graded: dict[tuple[str, int, str], GradeResult]) -> None:
    """It has the idea's words, "source rank's tensor", under a "never": the idea is missing, not covered."""
    result = graded[(F003, 20, NEW[2][2])]
    assert "broadcast copies a tensor from a source rank" in result.missing_ideas, result.missing_ideas
    assert "broadcast copies a tensor from a source rank" not in result.covered_ideas


@pytest.mark.parametrize(("file", "number", "answer"),
                         [(F002, 5, REPORTED[4][2]), *((f, n, a) for f, n, a, _ in HEDGED)])
def test_a_hedge_or_an_evasion_is_not_told_it_says_the_opposite(
        graded: dict[tuple[str, int, str], GradeResult], file: str, number: int, answer: str) -> None:
    """Its "not" or "doesn't" is a hedge, not a denial of the accepted answer."""
    result = graded[(file, number, answer)]
    assert result.verdict == "incorrect"
    assert SAYS_OPPOSITE not in result.feedback, result.feedback


@pytest.mark.parametrize(("file", "number", "answer"), [(f, n, a) for f, n, a, _ in TERMED])
def test_a_wrong_answer_that_names_a_term_of_its_own_is_no_evasion(
        graded: dict[tuple[str, int, str], GradeResult], file: str, number: int, answer: str) -> None:
    result = graded[(file, number, answer)]
    assert result.verdict == "incorrect" and result.score == 0.0  # a rule after the decision settled it
    assert "evasive" not in result.flags
    assert "doesn't answer the question" not in result.feedback, result.feedback


def test_a_swap_in_other_words_says_which_side_it_reversed(graded: dict[tuple[str, int, str], GradeResult]) -> None:
    result = graded[(F003, 6, REPORTED[1][2])]
    assert result.verdict == "incorrect"
    assert "roles_swapped" in result.flags
    assert "reversed which one does what" in result.feedback, result.feedback
    assert "sync SGD" in result.feedback and "async SGD" in result.feedback, result.feedback


def test_a_wrong_answer_with_nothing_missing_is_shown_the_accepted_answer(
        graded: dict[tuple[str, int, str], GradeResult]) -> None:
    """No bare "Not correct.": with no idea missing, the feedback quotes what to compare the answer with."""
    file, number, answer, expected = FEEDBACK[0]
    result = graded[(file, number, answer)]
    assert result.verdict == expected
    assert result.missing_ideas == []
    assert result.matched_answer is not None
    assert "accepted answer" in result.feedback and result.matched_answer in result.feedback, result.feedback

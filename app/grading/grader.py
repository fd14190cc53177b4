"""Grade answers against rubrics: cheap shortcuts first, then one batched encode, then judgement."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from app.grading.checks import (
    admits_not_knowing,
    hedged_claim,
    is_evasive,
    is_keyword_list,
    strip_empty_edges,
    strip_injection,
    strip_lead_in,
    without_guess,
)
from app.grading.choice import exact_match, is_bare_letter
from app.grading.decision import (
    BEYOND_CAP,
    FEATURES,
    VERDICTS,
    Decision,
    feature_vector,
    late_vector,
    load_bank_decision,
    load_decision,
)
from app.grading.examples import ExampleHead, example_features, load_head, usable
from app.grading.foreign import ForeignHead, applies, load_foreign
from app.grading.heads import head_verdict
from app.grading.judge import Evidence, caught, decision_feedback, evidence, judge, result_fields
from app.grading.judges import Judge, default_judge, default_late_judge
from app.grading.rubric import GRADER_VERSION, Rubric
from app.grading.scoring import GeneralModel, load_model, signals
from app.grading.text import content_stems, without_final_stops
from ingest.embedder import Encoder


@dataclass
class GradeResult:
    """A verdict with its score, confidence and the evidence behind it."""

    verdict: str
    score: float
    confidence: float
    matched_answer: str | None = None
    matched_misconception: str | None = None
    covered_ideas: list[str] = field(default_factory=list)
    missing_ideas: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    feedback: str = ""
    grader_version: str = GRADER_VERSION

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict of every field."""
        return asdict(self)


@dataclass
class _Pending:
    """An answer after the text-only checks: either already graded or the text left to encode."""

    text: str
    flags: list[str]
    result: GradeResult | None = None


def _exact(rubric: Rubric, text: str, flags: list[str]) -> GradeResult | None:
    match = exact_match(text, rubric.item)
    if match is None:
        return None
    flags = [*flags, "exact_option"]
    if match.correct:
        return GradeResult("correct", 1.0, 1.0, matched_answer=match.text, flags=flags,
                           covered_ideas=[i for ideas in rubric.ideas[:1] for i in ideas],
                           feedback="Correct: that is the accepted answer.")
    return GradeResult("incorrect", 0.0, 1.0, matched_misconception=match.text, flags=flags,
                       missing_ideas=list(rubric.ideas[0]) if rubric.ideas else [],
                       feedback=f"Not quite: that is a known wrong answer ({match.text}).")


def _reject(rubric: Rubric, flags: list[str], feedback: str) -> GradeResult:
    return GradeResult("incorrect", 0.0, 0.95, flags=flags, feedback=feedback,
                       missing_ideas=list(rubric.ideas[0]) if rubric.ideas else [])


def _precheck(rubric: Rubric, answer: str, choice: str | None) -> _Pending:
    """Everything decidable without the encoder: choices, empty, evasive, injection-only."""
    if choice is not None:
        hit = _exact(rubric, choice, [])
        if hit is not None:
            return _Pending(choice, [], hit)
        answer = answer.strip() or choice
    text, injected = strip_injection(answer or "")
    flags = ["injection"] if injected else []
    text = strip_lead_in(text).strip()
    if not text:
        flags.append("empty")
        return _Pending(text, flags, _reject(rubric, flags, "There is no answer to grade here."))
    guessless = without_guess(text)
    hit = _exact(rubric, text, flags) or (_exact(rubric, guessless, flags) if guessless != text else None)
    if hit is not None:
        return _Pending(text, flags, hit)
    evasive, plain = is_evasive(text, rubric.goes_beyond), text
    text = strip_empty_edges(text, rubric.knows)
    if text != plain:  # what is left of an answer without its edges is checked again
        if (hit := _exact(rubric, text, flags)) is not None:
            return _Pending(text, flags, hit)
        evasive = evasive or is_evasive(text, rubric.goes_beyond)
    if evasive or (is_bare_letter(text) and not rubric.item.options):
        flags.append("evasive")
        return _Pending(text, flags, _reject(
            rubric, flags, "That doesn't answer the question; have a go in your own words."))
    claim = hedged_claim(plain, rubric.goes_beyond)
    if claim is not None:  # a hedge and a short claim ("not sure, maybe DDP?"): graded as the claim alone
        flags.append("hedged")
        text = claim
        if (hit := _exact(rubric, text, flags)) is not None:
            return _Pending(text, flags, hit)
    elif admits_not_knowing(plain):
        flags.append("hedged")
    if is_keyword_list(text, rubric.item.reference_answers[0]):
        flags.append("keyword_list")
    # The rest reads the answer without its final full stops: a stop says nothing about what an answer
    # means, and the judges were trained without them (grading_lab/judge_train.py: Recipe.no_stops).
    return _Pending(without_final_stops(text), flags)


def _finish(rubric: Rubric, pending: _Pending, vec: np.ndarray, model: GeneralModel) -> GradeResult:
    return GradeResult(**judge(rubric, pending.text, vec, pending.flags, model))


# The grader's own part of the `grader_version` each decision's verdicts carry (the judges' versions follow
# it): what the decision weighs and the rules after it. A change to either bumps it, and the decision is
# refitted for it (`python -m grading_lab.decision_fit [--bank] --write` writes the version into its file).
DECISION_GRADER = "grader-2.17"  # decision.json: the decision over the pair judge
BANK_GRADER = "grader-2.17"  # bank_decision.json: the bank decision over both judges, and RULES


# A swap of two roles or a negation that the checks find is incorrect unless the pair judge reads the
# answer as right (P(correct) >= this): the labelling rules make both always incorrect, and the
# judge alone reads some of them as partial (grouped CV in grading_lab/decision_fit.py: neutral
# overall, 45 of the 50 training answers it settles are incorrect).
REVERSAL_FLAGS = ("roles_swapped", "negation_mismatch")
# Flags that say what is wrong with an answer: a reversal, or another question's answer. A `correct` verdict
# does not carry them: the judges and the decision read past what the checks guessed.
WRONG_FLAGS = (*REVERSAL_FLAGS, "other_question")
REVERSAL_JUDGE_RIGHT = 0.5
# An answer that both judges read as incorrect (P(incorrect) >= this against the accepted answer) is not
# `correct`, however close its words: the bank decision once called "all-gather leaves each rank with
# only its own chunk" correct on the similarity evidence (the pair judge read it 0.90 incorrect, the
# late judge 0.72). At 0.5 it also overruled right answers the decision called correct and one judge read
# as only just wrong ("..., and set_epoch reshuffles each epoch": 0.91 and 0.58). Grouped CV in
# grading_lab/decision_fit.py --bank, seven fold seeds: 0.8337 / 0.9397 at 0.5, 0.8345 / 0.9407 at 0.6,
# higher at all seven (docs/GRADING_LOG.md, "The both-wrong rule at 0.6").
BOTH_JUDGES_WRONG = 0.6
# An answer with no word beyond the question's that the decision calls partial is incorrect where the two
# judges' mean P(incorrect) is at least this (grouped CV in grading_lab/decision_fit.py --bank: 0.8319 with
# both judges at 0.5 or more each, 0.8337 with their mean, higher at all seven fold seeds;
# docs/GRADING_LOG.md, "The judges' mean for evasions").
EVASION_JUDGES_WRONG = 0.5
MISCONCEPTION_FLOOR = 0.5  # the judge's P(correct) + P(partial) against a wrong option that names it
# The learner is told which misconception the answer holds only where the pair judge's reading of it as that
# wrong option's claim (P(correct) + P(partial)) exceeds its reading as the accepted answer's by more than this.
# Nearer than that the judge cannot tell the two claims apart, and the answers named there on the labelled
# files were mostly partial answers and evasions (`python -m grading_lab.feedback_probe`; docs/GRADING_LOG.md,
# "What the grader tells learners"). The verdict does not change.
MISCONCEPTION_NAMING_MARGIN = 0.05
# Checks that are cheap and sure: an answer they flag is incorrect whatever the decision weighs
# (a bare list of terms; an evasion or the question restated; nothing in common with the question's
# material).
SURE_FLAGS = frozenset({"keyword_list", "evasive", "off_topic"})
# An answer flagged as answering another bank question is settled as incorrect only when it is at
# least this much nearer (cosine) to that question's accepted answer than to this one's. A smaller
# margin is one input of the decision: vague and partial answers, and right answers in other words,
# often sit a little nearer a neighbouring question's answer (grouped CV in grading_lab/decision_fit.py).
OTHER_SURE_MARGIN = 0.4

Judged = tuple[Evidence, np.ndarray, np.ndarray]  # evidence; judge on accepted answers; on wrong options


@dataclass
class Graders:
    """What the learned decision needs beside the encoder: the similarity model, the pair judge, the
    decision's weights, the example head (for questions with labelled examples; `no_examples=True`
    grades without it) and the foreign head (for questions from outside the bank; `no_foreign=True`
    grades without it); for bank questions that no head grades, the late judge and the bank decision
    that weighs its readings too (`late`: by default the process's, `default_late_judge`; `no_late=True`
    grades them by the decision alone). `rules=True` grades by the previous rule stack instead (for
    comparison)."""

    model: GeneralModel | None = None
    judge: Judge | None = None
    decision: Decision | None = None
    examples: ExampleHead | None = None
    foreign: ForeignHead | None = None
    rules: bool = False
    no_examples: bool = False
    no_foreign: bool = False
    late: Judge | None = None
    bank_decision: Decision | None = None
    no_late: bool = False

    def example_head(self) -> ExampleHead | None:
        """The example head these graders use, if any."""
        return None if self.no_examples else self.examples or load_head()

    def foreign_head(self) -> ForeignHead | None:
        """The foreign head these graders use, if any."""
        return None if self.no_foreign else self.foreign or load_foreign()

    def late_judge(self) -> Judge | None:
        """The late judge these graders read bank questions' answers with, if any."""
        return None if self.no_late or self.rules else self.late or default_late_judge()

    def bank(self) -> Decision | None:
        """The bank decision, when these graders have a late judge."""
        return None if self.late_judge() is None else self.bank_decision or load_bank_decision()

    def reads_late(self, rubric: Rubric) -> bool:
        """Whether an answer to this question is weighed by the bank decision: a bank question (it has
        neighbours) that the example head does not grade, with a late judge at hand."""
        if rubric.neighbours is None or self.late_judge() is None:
            return False
        return self.example_head() is None or not usable(rubric)


def _judged(rubrics: list[Rubric], texts: list[str], evs: list[Evidence],
            judge_model: Judge) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per answer, the judge's probabilities against its nearest accepted answer and, when the
    similarity evidence points at a wrong option, against that option.

    One pass per answer, two for a suspected misconception: a pass costs several encodes of the
    answer (its input is the accepted answer, the question and the answer; `bench/bench_api.py`), so
    it reads only the pairs the decision uses. The judge reads each pair in its own run (int8
    activations are scaled over a run), so an answer's verdict does not depend on who else was graded
    at the same moment.
    """
    out = []
    for rubric, text, ev in zip(rubrics, texts, evs, strict=True):
        probs = judge_model.probabilities(_pairs(rubric, text, ev))
        out.append((probs[:1], probs[1:]))
    return out


def _pairs(rubric: Rubric, text: str, ev: Evidence) -> list[tuple[str, str, str]]:
    """The (question, text, answer) triples a judge reads for an answer: its nearest accepted answer,
    then the wrong option the similarity evidence nominates, if any."""
    item = rubric.item
    triples = [(item.question, item.reference_answers[ev.sig.ref.best], text)]
    if ev.wrong is not None:
        triples.append((item.question, ev.wrong, text))
    return triples


def vetoed(ev: Evidence) -> bool:
    """Whether a sure check settles the answer as incorrect, whatever the decision weighs."""
    if ev.adopted is not None:
        return False
    return any(f in SURE_FLAGS for f in ev.flags) or (
        "other_question" in ev.flags and ev.other_margin >= OTHER_SURE_MARGIN)


def _on_wrong(on_wrongs: np.ndarray) -> float:
    """How surely the judge reads the answer as stating (at least part of) the nominated wrong option's
    claim: its P(correct) + P(partial) against that option (0 without one)."""
    return float(on_wrongs[0, 0] + on_wrongs[0, 1]) if len(on_wrongs) else 0.0


def _nearer_wrong(on_ref: np.ndarray, on_wrongs: np.ndarray, margin: float = 0.0) -> bool:
    """Whether a judge's readings (against the accepted answer; against the nominated wrong option) take
    the answer as the wrong option's claim more surely than as the accepted answer's (by more than `margin`)."""
    return _on_wrong(on_wrongs) > float(on_ref[0] + on_ref[1]) + margin


def decision_input(ev: Evidence, on_refs: np.ndarray, on_wrongs: np.ndarray) -> np.ndarray:
    """The learned decision's features for one answer (grading_lab/decision_fit.py fits on these)."""
    sig = ev.sig
    return feature_vector(ev.z_correct, ev.z_partial, on_refs[0], _on_wrong(on_wrongs), set(ev.flags), ev.one_side,
                          ev.unsupported, ev.other_margin, sig.ref.features, max(sig.example_sims, default=0.0),
                          sig.sim_explanation, sig.on_topic)


_PAIR_READING = slice(FEATURES.index("judge_correct"), FEATURES.index("judge_incorrect") + 1)  # in `x`


def bank_input(x: np.ndarray, ev: Evidence) -> np.ndarray:
    """The bank decision's features for an answer the late judge read: its decision input `x`
    (`decision_input`), then the late judge's reading, whether the answer confirms the roles, how much
    it says beyond the question's words, and how far the two judges agree."""
    if ev.late is None:
        raise ValueError("the bank decision needs the late judge's reading of the answer")
    late = late_vector(ev.late[0], _on_wrong(ev.late[1:]))
    both = np.exp(x[_PAIR_READING] + late[:3])  # the product of the two judges' probabilities, floored as the logs are
    return np.concatenate([x, late, [float(ev.roles_confirmed), min(ev.beyond_question, BEYOND_CAP) / BEYOND_CAP],
                           both])


def with_head(rubric: Rubric, ev: Evidence, x: np.ndarray, probs: np.ndarray, examples: ExampleHead | None,
              foreign: ForeignHead | None) -> tuple[np.ndarray, str] | None:
    """The decision's probabilities with P(correct) replaced by a head's, and that head's version: the
    example head's for a question with enough labelled examples, the foreign head's for a question from
    outside the bank without them; None when neither applies (a bank question without examples)."""
    if ev.adopted is not None:
        return None
    if examples is not None and usable(rubric):
        feats = example_features(rubric, ev.sig.example_sims, ev.sig.stems, ev.sig.example_words)
        return examples.probabilities(probs, feats, rubric.question_vec), examples.version
    if foreign is not None and applies(rubric):
        return foreign.probabilities(probs, x, rubric.question_vec), foreign.version
    return None


@dataclass
class _Reading:
    """One answer as the rules after the decision read it (`RULES`), and the verdict as they leave it."""

    ev: Evidence
    judge_ref: np.ndarray  # the pair judge's reading against the accepted answer
    on_wrongs: np.ndarray  # and against the nominated wrong option, if any
    # The late judge's reading against the accepted answer, where the bank decision weighs the answer (the
    # rules that read both judges act there alone); else None.
    late_ref: np.ndarray | None
    headed: bool  # a head read the decision's probabilities again (steps 8 and 9 of docs/GRADING.md)
    verdict: str
    sure: bool  # a check or a rule settled the verdict, whatever the decision weighed
    flags: list[str]
    wrong: str | None = None  # the wrong option named as the answer's misconception
    stated: bool = False  # the authored roles made the answer correct

    @cached_property
    def judges_wrong(self) -> tuple[float, float] | None:
        """The two judges' P(incorrect) against the accepted answer, where the rules that read both may act:
        the bank decision weighed the answer, no labelled example decided it, and it does not give the
        question's authored roles their own words (the judges do not read which subject goes with which
        claim; docs/GRADING.md, "Known weak spots")."""
        if self.late_ref is None or self.ev.adopted is not None or self.ev.roles_confirmed:
            return None
        return float(self.judge_ref[2]), float(self.late_ref[2])


def _head_needs_support(r: _Reading) -> None:
    """A head's partial credit needs something to rest on. The decision alone weighs `unsupported` as one
    of its inputs; vetoing its partial verdicts as well cost partial answers more than it caught evasions
    (grouped CV in grading_lab/decision_fit.py: 3-way 0.800 with the veto, 0.810 without; partial 0.665
    against 0.714, evasive 0.707 against 0.672)."""
    if r.headed and r.verdict == "partial" and r.ev.unsupported:
        r.verdict, r.sure = "incorrect", True
        r.flags.append("off_topic")


def _both_judges_wrong(r: _Reading) -> None:
    """An answer both judges read as wrong is not correct: the similarity evidence alone does not make it
    right."""
    wrong = r.judges_wrong
    if wrong is not None and r.verdict == "correct" and min(wrong) >= BOTH_JUDGES_WRONG:
        r.verdict, r.sure = "incorrect", True


def _evasion(r: _Reading) -> None:
    """An answer a rule below made incorrect for saying nothing beyond the question is flagged an evasion,
    and told it does not answer the question, only when it names no technical term of its own: one that
    does ("plain TCP sockets", "FP8 is just INT8 quantization") answers, wrongly, and is told what it
    misses instead (docs/GRADING_LOG.md, "Evasions that name a term of their own")."""
    if not r.ev.own_terms:
        r.flags.append("evasive")


def _nothing_beyond_the_question(r: _Reading) -> None:
    """Nor is an answer partly right when no word of it goes beyond the question's own towards the accepted
    answers or the explanation and the judges read it as wrong on the whole (their mean P(incorrect)):
    partial credit would rest on nothing ("they're two different strategies, each with its pros and cons";
    docs/GRADING_LOG.md, "Two judges")."""
    wrong = r.judges_wrong
    if (wrong is not None and r.verdict == "partial" and r.ev.beyond_question == 0
            and sum(wrong) / 2 >= EVASION_JUDGES_WRONG):
        r.verdict, r.sure = "incorrect", True
        _evasion(r)


def _admits_not_knowing(r: _Reading) -> None:
    """An answer whose writer says they do not know ("one of the nvidia features, can't recall which one",
    "the pytorch one, I forget the exact class name": the `hedged` flag, checks.admits_not_knowing) and
    that uses no word beyond the question's own towards the accepted answers or the explanation is an
    evasion, whatever the judges read: they read many such answers as the subject's answer with a part
    missing. A hedged answer that says something beyond the question is graded on what it says
    (docs/GRADING_LOG.md, "Answers that admit not knowing")."""
    if (r.verdict != "incorrect" and "hedged" in r.flags and r.ev.beyond_question == 0 and r.ev.adopted is None):
        r.verdict, r.sure = "incorrect", True
        _evasion(r)


def _roles_clear_clause_swap(r: _Reading) -> None:
    """The clause check read a swap where the question's authored roles read every side the answer names
    with its own words and none with another's: the authored reading is the question's own, the clause
    check a guess from the accepted answer's wording ("data parallelism copies the model to all GPUs and
    each one gets different data"; docs/GRADING_LOG.md, "Two judges"). The flag goes, and its feedback."""
    if r.late_ref is not None and r.ev.roles_confirmed and "roles_swapped" in r.flags:
        r.flags.remove("roles_swapped")


def _reversal(r: _Reading) -> None:
    """A swap of two roles or a negation that the checks find is incorrect unless the pair judge reads the
    answer as right (REVERSAL_JUDGE_RIGHT)."""
    if (r.verdict != "incorrect" and r.ev.adopted is None and float(r.judge_ref[0]) < REVERSAL_JUDGE_RIGHT
            and any(f in r.flags for f in REVERSAL_FLAGS)):
        r.verdict, r.sure = "incorrect", True


def _authored_swap(r: _Reading) -> None:
    """A swap of the question's authored roles is incorrect whatever the judge reads: the judge does not
    read which subject goes with which clause (docs/GRADING.md, "Known weak spots")."""
    if r.ev.role_swap is not None and r.ev.adopted is None:
        r.verdict, r.sure = "incorrect", True
        if "roles_swapped" not in r.flags:
            r.flags.append("roles_swapped")


def _misconception(r: _Reading) -> None:
    """An answer that the judge reads as a nominated wrong option's claim (P >= MISCONCEPTION_FLOOR), and more
    surely than as the accepted answer's, and so does the late judge where it read the answer, is incorrect,
    however much of the accepted answer's subject it shares; the similarity evidence alone only nominates the
    option. The misconception is named to the learner only where the pair judge tells the two claims apart
    (MISCONCEPTION_NAMING_MARGIN)."""
    ev = r.ev
    if (r.verdict != "correct" and ev.wrong is not None and _on_wrong(r.on_wrongs) >= MISCONCEPTION_FLOOR
            and _nearer_wrong(r.judge_ref, r.on_wrongs)
            and (ev.late is None or len(ev.late) < 2 or _nearer_wrong(ev.late[0], ev.late[1:]))):
        r.verdict, r.sure = "incorrect", True
        if _nearer_wrong(r.judge_ref, r.on_wrongs, MISCONCEPTION_NAMING_MARGIN):
            r.wrong = ev.wrong


def _roles_stated(r: _Reading) -> None:
    """On a bank question the bank decision weighs: an answer that gives every authored side its own words
    and no side another's states the relation the question asks about, which the judges do not read (both
    read some such questions' right answers as wrong; docs/GRADING_LOG.md, "Two judges"). It is correct unless a
    sure check, a rule above or a named misconception made it incorrect."""
    if (r.late_ref is not None and r.ev.roles_stated and r.ev.adopted is None and r.wrong is None
            and not r.sure and r.verdict != "correct"):
        r.verdict, r.stated = "correct", True


# The rules after the decision, in the order they act: each reads what the ones before it left.
RULES = (_head_needs_support, _both_judges_wrong, _nothing_beyond_the_question, _admits_not_knowing,
         _roles_clear_clause_swap, _reversal, _authored_swap, _misconception, _roles_stated)


def decide(rubric: Rubric, text: str, ev: Evidence, on_refs: np.ndarray, on_wrongs: np.ndarray,
           decision: Decision, head: ExampleHead | None = None, foreign: ForeignHead | None = None,
           bank: Decision | None = None) -> GradeResult:
    """The verdict of the learned decision (read again by the example head or the foreign head, when
    given and the question calls for one), or of the bank decision (`bank`) for an answer the late judge
    read, then of the rules after it (`RULES`), with the evidence it rests on."""
    x = decision_input(ev, on_refs, on_wrongs)
    sure = vetoed(ev)
    late_ref = ev.late[0] if bank is not None and ev.late is not None else None
    if bank is not None and late_ref is not None:
        probs, version, adjusted = bank.probabilities(bank_input(x, ev)), bank.version, None
    else:
        probs, version = decision.probabilities(x), decision.version
        adjusted = None if sure else with_head(rubric, ev, x, probs, head, foreign)
    if adjusted is not None:
        probs, head_version = adjusted
        version = f"{version}+{head_version}"
        verdict = head_verdict(probs)
    else:
        verdict = ev.adopted or ("incorrect" if sure else VERDICTS[int(np.argmax(probs))])
    r = _Reading(ev, on_refs[0], on_wrongs, late_ref, adjusted is not None, verdict, sure, list(ev.flags))
    for rule in RULES:
        rule(r)
    flags = [f for f in r.flags if f != "misconception" and not (r.verdict == "correct" and f in WRONG_FLAGS)]
    flags += ["misconception"] if r.wrong else []
    p_c, p_p = float(probs[0]), float(probs[1])
    confidence = float(probs[VERDICTS.index(r.verdict)]) if ev.adopted is None else 0.95
    if r.sure:  # a sure check's verdict, scored as the checks before the encode score theirs
        p_c, p_p, confidence = 0.0, 0.0, max(confidence, 0.9)
    if r.stated:  # the role check's verdict, scored as a sure check scores its own
        p_c, p_p, confidence = 1.0, 0.0, max(confidence, 0.9)
    reference = rubric.item.reference_answers[ev.sig.ref.best]
    fields = result_fields(rubric, ev, text, r.verdict, p_c + 0.5 * p_p, confidence, flags, version, r.wrong)
    fields["feedback"] = decision_feedback(r.verdict, fields["flags"], ev, r.wrong, fields["missing_ideas"], text,
                                           reference)
    return GradeResult(**fields)


def decided(rubric: Rubric, answer: str, vec: np.ndarray) -> bool:
    """Whether the checks alone settle this answer's verdict (the general model is not asked)."""
    pending = _precheck(rubric, answer, None)
    if pending.result is not None or "keyword_list" in pending.flags:
        return True
    sig = signals(rubric, vec, pending.text, content_stems(pending.text), read_words=False)
    return caught(rubric, pending.text, sig)


def grade(rubric: Rubric, answer: str, encoder: Encoder, *, choice: str | None = None,
          graders: Graders | None = None) -> GradeResult:
    """Grade one answer with at most one encoder call (none for exact options or rejections)."""
    return grade_many([rubric], [answer], encoder, choices=[choice], graders=graders)[0]


@dataclass
class Plan:
    """Answers after the text-only checks: `texts` still need vectors, then `finish` grades them all.

    Splitting the encode out lets a caller get the vectors however suits it (a blocking call, or
    an awaited future from the micro-batcher) with the same grading on either side.
    """

    rubrics: list[Rubric]
    pendings: list[_Pending]
    todo: list[int]

    @property
    def texts(self) -> list[str]:
        """The answers to encode, in order."""
        return [self.pendings[i].text for i in self.todo]

    def evidence(self, vecs: np.ndarray, graders: Graders | None = None) -> list[Judged]:
        """For each answer of `texts`: the checks' evidence, and the judge's probabilities against the
        accepted answers and the wrong options."""
        graders = graders or Graders()
        model = graders.model or load_model()
        rubrics = [self.rubrics[i] for i in self.todo]
        texts = self.texts
        evs = [evidence(r, t, v, self.pendings[i].flags, model)
               for r, t, v, i in zip(rubrics, texts, vecs, self.todo, strict=True)]
        judged = _judged(rubrics, texts, evs, graders.judge or default_judge())
        late = graders.late_judge()
        if late is not None:
            # The bank decision's second reading: the same pairs through the late judge, whose answer
            # states are one more output of the encode above (app/grading/latejudge.py).
            evs = [replace(ev, late=late.probabilities(_pairs(r, t, ev))) if graders.reads_late(r) else ev
                   for r, t, ev in zip(rubrics, texts, evs, strict=True)]
        return [(ev, on_refs, on_wrongs) for ev, (on_refs, on_wrongs) in zip(evs, judged, strict=True)]

    def finish(self, vecs: np.ndarray, graders: Graders | None = None) -> list[GradeResult]:
        """Every answer's result, given the vectors of `texts`."""
        if len(vecs) != len(self.todo):
            raise ValueError(f"expected {len(self.todo)} vectors, got {len(vecs)}")
        graders = graders or Graders()
        version = GRADER_VERSION if graders.rules else (graders.decision or load_decision()).version
        # What the checks settled before the encode is this version's verdict too.
        results: list[GradeResult | None] = [
            replace(p.result, grader_version=version) if p.result is not None else None for p in self.pendings
        ]
        if self.todo:
            model = graders.model or load_model()
            if graders.rules:
                for vec, i in zip(vecs, self.todo, strict=True):
                    results[i] = _finish(self.rubrics[i], self.pendings[i], vec, model)
            else:
                decision = graders.decision or load_decision()
                head, foreign, bank = graders.example_head(), graders.foreign_head(), graders.bank()
                for i, text, (ev, on_refs, on_wrongs) in zip(self.todo, self.texts, self.evidence(vecs, graders),
                                                              strict=True):
                    results[i] = decide(self.rubrics[i], text, ev, on_refs, on_wrongs, decision, head, foreign,
                                        bank)
        return [r for r in results if r is not None]


def plan_many(rubrics: list[Rubric], answers: list[str], choices: list[str | None] | None = None) -> Plan:
    """Run the checks that need no encoder on each (rubric, answer[, choice]) pair."""
    if len(rubrics) != len(answers) or (choices is not None and len(choices) != len(answers)):
        raise ValueError("grading needs one rubric (and one choice, if any) per answer")
    picks = choices if choices is not None else [None] * len(answers)
    pendings = [_precheck(r, a, c) for r, a, c in zip(rubrics, answers, picks, strict=True)]
    return Plan(rubrics, pendings, [i for i, p in enumerate(pendings) if p.result is None])


def grade_many(rubrics: list[Rubric], answers: list[str], encoder: Encoder, *,
               choices: list[str | None] | None = None, graders: Graders | None = None) -> list[GradeResult]:
    """Grade answers (paired with rubrics, and choices when given) using one batched encoder call."""
    plan = plan_many(rubrics, answers, choices)
    texts = plan.texts
    vecs = encoder.encode(texts) if texts else np.zeros((0, encoder.dim), dtype=np.float32)
    return plan.finish(vecs, graders)

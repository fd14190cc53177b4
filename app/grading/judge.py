"""Combine the signals into a verdict: general model, per-question offsets, examples, hard checks."""

from __future__ import annotations

import math
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.grading.align import idea_covered
from app.grading.checks import denied_stems, denies_disputed, denying_clause, own_terms, restates_question
from app.grading.roles import RoleReading, RoleSwap, read_roles, roles_swapped, subjects_missing
from app.grading.rubric import GRADER_VERSION, Rubric
from app.grading.scoring import GeneralModel, Signals, signals
from app.grading.text import content_stems, has_match

EXAMPLE_FLOOR = 0.75  # labelled examples less similar than this are ignored
EXAMPLE_WEIGHT = 4.0  # logit shift from a very close labelled example
EXAMPLE_ADOPT = 0.95  # a near-duplicate of a labelled example takes its label
UNSURE = 0.65  # confidence below which the verdict is flagged unsure
WRONG_MARGIN = 0.1  # how much nearer a wrong option must be than the accepted answer
WRONG_WORDS = 0.25  # and the share of the wrong option's (weighted) words the answer must use
OFF_TOPIC = 0.2  # an answer this far (cosine) from the references and the question is off topic
# An answer this much nearer (cosine) to another question's accepted answer than to this one's, and
# at least OTHER_FLOOR near it, is flagged as answering that question (the feedback names it).
OTHER_MARGIN = 0.1
# What the feedback says of such an answer: what the grader measured, not that the learner answered that
# question. Most answers flagged so are wrong answers to this one (misconceptions, negations, evasions) whose
# words lie nearer another question's answer (docs/GRADING_LOG.md, "What the grader tells learners").
ANSWERS_OTHER = "is closer to the answer of a different question"
SAYS_OPPOSITE = "says the opposite of the accepted answer"  # and of an answer that denies its claim
OTHER_FLOOR = 0.5
_BLOCKING = ("evasive", "roles_swapped", "negation_mismatch", "keyword_list", "off_topic",
             "misconception")


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


def _example_evidence(rubric: Rubric, sig: Signals) -> tuple[float, float, str | None]:
    """Logit shifts for (correct, partial) from similar labelled examples, and an adopted label."""
    ev_c = ev_p = 0.0
    adopted: str | None = None
    best = -1.0
    for sim, (_, label) in zip(sig.example_sims, rubric.item.examples, strict=True):
        if sim < EXAMPLE_FLOOR:
            continue
        w = ((sim - EXAMPLE_FLOOR) / (1 - EXAMPLE_FLOOR)) ** 2
        ev_c += w * (1.0 if label == "correct" else -1.0)
        ev_p += w * (1.0 if label in ("correct", "partial") else -1.0)
        if sim >= EXAMPLE_ADOPT and sim > best:
            adopted, best = label, sim
    return EXAMPLE_WEIGHT * ev_c, EXAMPLE_WEIGHT * ev_p, adopted


def _misconception(rubric: Rubric, sig: Signals, answer_stems: AbstractSet[str], skip: int = -1) -> str | None:
    """The wrong answer this answer is clearly closer to than to any accepted answer, if any.

    Needs a margin and the wrong option's own words: a short partial answer shares the topic
    with every option, so nearness alone is not enough; the answer must state the wrong claim.
    A wrong option whose own words (those no accepted answer uses) the answer does not use at all
    is not the answer's claim, however near the model puts them ("each rank keeps one reduced
    chunk" was matched to "reduce-scatter broadcasts the full gradient to all ranks" on the
    shared "rank", "reduce" and "gradient"; dev-set figures unchanged).
    """
    if sig.wrong is None or not sig.wrong.sims:
        return None
    sim_ref, cov_ref = float(sig.ref.features[0]), float(sig.ref.features[1])
    best, best_margin = -1, 0.0
    for j, (sim, cov) in enumerate(zip(sig.wrong.sims, sig.wrong.coverages, strict=True)):
        if j == skip:
            continue
        nearer = sim - sim_ref - WRONG_MARGIN if cov >= WRONG_WORDS else -1.0
        margin = max(nearer, (cov - cov_ref - 0.25) if sim >= sim_ref else -1.0)
        if margin > best_margin and _states_claim(rubric, j, answer_stems):
            best, best_margin = j, margin
    return rubric.item.wrong_answers[best] if best >= 0 else None


def _states_claim(rubric: Rubric, wrong: int, answer_stems: AbstractSet[str]) -> bool:
    """Whether the answer uses a word of the wrong option that no accepted answer uses (or it has none)."""
    own = rubric.wrong_own_stems[wrong]
    return not own or any(has_match(s, answer_stems) for s in own)


def _flags(rubric: Rubric, text: str, sig: Signals, n_answer: int) -> list[str]:
    flags = []
    if sig.negation:
        flags.append("negation_mismatch")
    if roles_swapped(text, rubric.item.reference_answers, rubric.clauses):
        flags.append("roles_swapped")
    sim, cov = float(sig.ref.features[0]), float(sig.ref.features[1])
    if max(sim, sig.sim_question) < OFF_TOPIC and cov < 0.2 and sig.on_topic < 0.34:
        flags.append("off_topic")
    if n_answer <= 2 and len(rubric.ref_stems[sig.ref.best].stems) >= 5:
        flags.append("too_short")
    if restates_question(text, rubric.item.question, cov):
        flags.append("evasive")
    return flags


def caught(rubric: Rubric, text: str, sig: Signals, skip_wrong: int = -1) -> bool:
    """Whether the hard checks alone reject an answer (used to calibrate on known negatives)."""
    stems = content_stems(text)
    if _misconception(rubric, sig, sig.stems, skip_wrong) is not None:
        return True
    return any(f in _BLOCKING for f in _flags(rubric, text, sig, len(stems)))


UNSUPPORTED_SIM = 0.25  # below this, and with at most one weak word of an accepted answer,
UNSUPPORTED_COVERAGE = 0.1  # the answer is about something else: no partial credit
# An answer that uses no word of the question's material (question, accepted answers and
# explanation) and is either this far from the question or only this close to an accepted
# answer is off the subject, even when the model finds it vaguely close ("Sourdough needs a long,
# slow fermentation" scored 0.29 against "a slice of the mini-batch that flows through the
# pipeline stages"). Costs on the dev set: 3-way macro-F1 0.810 -> 0.806 (PyTorch), 0.817 -> 0.811
# (int8), from vague answers labelled partial that share no word with the question's material.
OFF_SUBJECT_QUESTION_SIM = 0.15
OFF_SUBJECT_ANSWER_SIM = 0.35


def _unsupported(sig: Signals) -> bool:
    """Partial credit needs some support: a word of an accepted answer, or real closeness to one."""
    weak_words = max(sig.ref.coverages, default=0.0) <= UNSUPPORTED_COVERAGE
    best = max(sig.ref.sims, default=0.0)
    off_subject = sig.on_topic == 0 and (sig.sim_question < OFF_SUBJECT_QUESTION_SIM or best < OFF_SUBJECT_ANSWER_SIM)
    return weak_words and (best < UNSUPPORTED_SIM or off_subject)


@dataclass
class Evidence:
    """Everything the checks and the similarity model say about one answer, before a verdict."""

    sig: Signals
    z_correct: float  # the similarity model's logits, with the question's offsets and example evidence
    z_partial: float
    flags: list[str]
    wrong: str | None  # the wrong option the answer states, if any
    adopted: str | None  # the label of a near-identical labelled example, if any
    one_side: bool  # a two-sided reference answered about only some of its subjects
    unsupported: bool  # partial credit would have nothing to rest on
    other_margin: float  # how much nearer another question's accepted answer is than this one's
    other_question: str | None  # that question, when the answer is flagged as answering it and it is not this one
    role_swap: RoleSwap | None = None  # a swap of the question's authored roles (data/roles.yaml)
    roles_confirmed: bool = False  # the answer gives the authored roles their own words, and none another's
    # How many of the answer's stems are words of the accepted answers or the explanation that the question
    # does not hold (Rubric.beyond_question): none for an answer that restates the question or speaks vaguely.
    beyond_question: int = 0
    # The late judge's probabilities for the pairs the pair judge read (accepted answer, then the wrong
    # option if any), on a bank question that no head grades; else None.
    late: np.ndarray | None = None
    # The answer gives every authored side its own words and no side another's (roles.cues_stated).
    roles_stated: bool = False
    # The technical terms it names that the question does not hold (checks.own_terms): an answer that names
    # one says something, if not the accepted answer's words ("plain TCP sockets").
    own_terms: tuple[str, ...] = ()


def evidence(rubric: Rubric, text: str, vec: np.ndarray, flags: list[str], model: GeneralModel) -> Evidence:
    """The checks and the similarity model's logits for an answer whose vector is known."""
    stems = content_stems(text)
    sig = signals(rubric, vec, text, stems)
    z_ref, z_p_raw = model.logits(sig.ref.features)
    ev_c, ev_p, adopted = _example_evidence(rubric, sig)
    flags = [*flags, *_flags(rubric, text, sig, len(stems))]
    # A bare list of terms states no roles, whatever order its terms come in.
    roles = None if "keyword_list" in flags else rubric.roles
    wrong = _misconception(rubric, sig, sig.stems)
    reading = read_roles(text, roles) if roles else RoleReading()
    role_swap, confirmed = reading.swap, reading.confirmed
    if wrong is not None and confirmed and wrong in rubric.swapping_options:
        # The wrong option swaps the question's authored roles and the answer gives them rightly: it is
        # not stating that option's claim, however near its words are ("DP copies the model and splits
        # data; MP splits the model" against "data parallelism splits the model; model parallelism
        # splits the data").
        wrong = None
    if wrong is not None and denies_disputed(text, wrong, rubric.item.reference_answers):
        wrong = None
    if wrong is not None:
        flags.append("misconception")
    neighbours = rubric.neighbours
    other_sim, other, other_key = (neighbours.nearest_other(vec, rubric.item.key) if neighbours is not None
                                   else (0.0, None, None))
    margin = other_sim - max(sig.ref.sims, default=0.0) if other is not None else 0.0
    answers_other = margin >= OTHER_MARGIN and other_sim >= OTHER_FLOOR
    if answers_other:
        flags.append("other_question")
    # The feedback names the other question, unless it is this one asked again in another quiz document.
    restated = answers_other and neighbours is not None and neighbours.restated(rubric.item.key, other_key)
    named_other = other if answers_other and not restated else None
    return Evidence(sig, z_ref + rubric.offset_correct + ev_c, z_p_raw + rubric.offset_partial + ev_p, flags, wrong,
                    adopted, subjects_missing(text, rubric.clauses), _unsupported(sig), margin,
                    named_other, role_swap, confirmed,
                    sum(1 for s in sig.stems if has_match(s, rubric.beyond_question)), roles_stated=reading.stated,
                    own_terms=tuple(own_terms(text, rubric.asked)))


def judge(rubric: Rubric, text: str, vec: np.ndarray, flags: list[str],
          model: GeneralModel) -> dict[str, Any]:
    """The fields of a GradeResult by the rule stack (grader-1.4: thresholds and vetoes in order)."""
    ev = evidence(rubric, text, vec, flags, model)
    flags = list(ev.flags)
    p_c = _sigmoid(ev.z_correct)
    p_p = p_c + (1 - p_c) * _sigmoid(ev.z_partial)  # P(at least partial) from the conditional head
    blocked = ev.adopted is None and any(f in _BLOCKING for f in flags)
    if ev.adopted is not None:
        verdict = ev.adopted
    elif blocked:
        verdict = "incorrect"
    else:
        verdict = "correct" if ev.z_correct >= 0 else "partial" if ev.z_partial >= 0 else "incorrect"
        if verdict == "correct" and ev.one_side:
            verdict = "partial"  # only one side of a two-sided answer
        if verdict == "partial" and ev.unsupported:
            verdict = "incorrect"
            flags.append("off_topic")
    score = 0.5 * (p_c + p_p)
    confidence = {"correct": p_c, "partial": min(p_p, 1 - p_c),
                  "incorrect": 1 - p_p}[verdict]
    if blocked:
        score, confidence = min(score, 0.25), max(confidence, 0.75)
    return result_fields(rubric, ev, text, verdict, score, confidence, flags, GRADER_VERSION, ev.wrong)


def result_fields(rubric: Rubric, ev: Evidence, text: str, verdict: str, score: float, confidence: float,
                  flags: list[str], version: str, wrong: str | None) -> dict[str, Any]:
    """A GradeResult's fields: the verdict with the ideas covered and missing, and feedback.

    An idea is covered when most of its words are in the answer and, unless the verdict is `correct`, the
    answer denies none of them where the accepted answer asserts them (`checks.denied_stems`): "processes
    never use it to find each other" has the words of "all ranks can find each other" and is not told it got
    that idea; it is missing."""
    confidence = float(min(1.0, max(0.0, confidence)))
    if confidence < UNSURE:
        flags = [*flags, "unsure"]
    ideas = rubric.ideas[ev.sig.ref.best] if rubric.ideas else []
    # A right answer denies nothing it is credited with ("no graph traversal overhead" for "disables ...
    # traversal overhead" is the same claim): only an answer not graded correct is read for denials.
    denied = (denied_stems(text, rubric.item.reference_answers[ev.sig.ref.best])
              if ideas and verdict != "correct" else set())
    covered = [i for i in ideas if idea_covered(i, ev.sig.stems, rubric.item.question)
               and not any(has_match(s, denied) for s in content_stems(i))]
    missing = [i for i in ideas if i not in covered]
    public_flags = [f for f in flags if f != "misconception"]
    return {
        "verdict": verdict,
        "score": round(float(score), 4),
        "confidence": round(confidence, 4),
        "matched_answer": rubric.item.reference_answers[ev.sig.ref.best],
        "matched_misconception": wrong,
        "covered_ideas": covered,
        "missing_ideas": missing,
        "flags": public_flags,
        "feedback": feedback(verdict, public_flags, wrong, missing),
        "grader_version": version,
    }


def feedback(verdict: str, flags: list[str], wrong: str | None, missing: list[str]) -> str:
    """One or two plain sentences for the learner."""
    if wrong is not None:
        return f"This matches a common misconception: \"{wrong}\". Compare it with the accepted answer."
    if "roles_swapped" in flags:
        return "You have the right terms but the roles are swapped: check which one does what."
    if "negation_mismatch" in flags:
        return "Your answer negates the key point; re-read what the accepted answer claims."
    if "keyword_list" in flags:
        return "A list of terms isn't an explanation; say how they answer the question."
    if "off_topic" in flags:
        return "This doesn't seem to address the question that was asked."
    if verdict == "correct":
        return "Correct." + (" Unsure about the wording, though." if "unsure" in flags else "")
    hint = f" Missing: {missing[0]}." if missing else ""
    if verdict == "partial":
        return "Partly right, but incomplete." + hint
    return "Not correct." + hint


NEGATORS = re.compile(
    r"\b(not|no|never|none|nothing|neither|nor|without|cannot|can't|doesn't|don't|isn't|aren't|won't|"
    r"wouldn't|didn't|hasn't|haven't|only its own|nobody)\b", re.IGNORECASE)


def decision_feedback(verdict: str, flags: list[str], ev: Evidence, wrong: str | None, missing: list[str],
                      answer: str, reference: str) -> str:
    """Feedback that says what is wrong, quoting what it rests on: the other question the answer
    answers, the wrong option it states, the words that reverse or deny the accepted answer."""
    if verdict == "correct":
        return "Correct." + (" Unsure about the wording, though." if "unsure" in flags else "")
    # A rule made it an evasion because nothing in it goes beyond the question's words: that, and not a
    # nearer question's answer, is what the learner needs to hear ("it splits the data somehow, not sure how"),
    # unless it states a wrong option's claim. Its "not" is a hedge ("I don't know"), no denial.
    if "evasive" in flags and verdict == "incorrect" and wrong is None:
        return ("That doesn't answer the question: nothing in it goes beyond what the question says. "
                "Have a go in your own words.")
    if ev.other_question is not None and verdict == "incorrect":  # a partial verdict gives the answer credit here
        return f'This {ANSWERS_OTHER} ("{ev.other_question}") than to this one\'s.'
    if wrong is not None:
        return f'This matches a common misconception: "{wrong}". Compare it with the accepted answer.'
    if ev.role_swap is not None and verdict == "incorrect":
        swap = ev.role_swap
        return (f'You have reversed which one does what: "{swap.cue}" goes with {swap.belongs_to}, not '
                f'{swap.said_of}. The accepted answer says: "{reference}".')
    if "roles_swapped" in flags:
        return f'You have reversed which one does what; the accepted answer says: "{reference}".'
    denial = denying_clause(answer, reference) if verdict == "incorrect" and not NEGATORS.search(reference) else None
    if denial is not None:
        return f'This {SAYS_OPPOSITE} ("{reference}"): see "{denial.strip()}".'
    if "negation_mismatch" in flags:
        return f'Your answer denies the key point; the accepted answer says: "{reference}".'
    if not missing and not any(f in flags for f in ("evasive", "keyword_list", "off_topic")):
        # Every key idea's words are there, yet it is not right: name what to compare it with
        # rather than a bare "Not correct." that leaves the learner nothing to go on.
        lead = "Partly right" if verdict == "partial" else "Not correct as written"
        return f'{lead}: compare how you put it with the accepted answer: "{reference}".'
    return feedback(verdict, flags, None, missing)

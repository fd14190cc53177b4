"""Grade answers against rubrics: cheap shortcuts first, then one batched encode, then judgement."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from app.grading.checks import is_evasive, is_keyword_list, strip_injection
from app.grading.choice import exact_match, is_bare_letter
from app.grading.judge import caught, judge
from app.grading.rubric import GRADER_VERSION, Rubric
from app.grading.scoring import GeneralModel, load_model, signals
from app.grading.text import content_stems
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
    text = text.strip()
    if not text:
        flags.append("empty")
        return _Pending(text, flags, _reject(rubric, flags, "There is no answer to grade here."))
    hit = _exact(rubric, text, flags)
    if hit is not None:
        return _Pending(text, flags, hit)
    if is_evasive(text) or (is_bare_letter(text) and not rubric.item.options):
        flags.append("evasive")
        return _Pending(text, flags, _reject(
            rubric, flags, "That doesn't answer the question; have a go in your own words."))
    if is_keyword_list(text, rubric.item.reference_answers[0]):
        flags.append("keyword_list")
    return _Pending(text, flags)


def _finish(rubric: Rubric, pending: _Pending, vec: np.ndarray, model: GeneralModel) -> GradeResult:
    return GradeResult(**judge(rubric, pending.text, vec, pending.flags, model))


def decided(rubric: Rubric, answer: str, vec: np.ndarray) -> bool:
    """Whether the checks alone settle this answer's verdict (the general model is not asked)."""
    pending = _precheck(rubric, answer, None)
    if pending.result is not None or "keyword_list" in pending.flags:
        return True
    return caught(rubric, pending.text, signals(rubric, vec, pending.text, content_stems(pending.text)))


def grade(rubric: Rubric, answer: str, encoder: Encoder, *, choice: str | None = None,
          model: GeneralModel | None = None) -> GradeResult:
    """Grade one answer with at most one encoder call (none for exact options or rejections)."""
    pending = _precheck(rubric, answer, choice)
    if pending.result is not None:
        return pending.result
    vec = encoder.encode([pending.text])[0]
    return _finish(rubric, pending, vec, model or load_model())


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

    def finish(self, vecs: np.ndarray, model: GeneralModel | None = None) -> list[GradeResult]:
        """Every answer's result, given the vectors of `texts`."""
        if len(vecs) != len(self.todo):
            raise ValueError(f"expected {len(self.todo)} vectors, got {len(vecs)}")
        results: list[GradeResult | None] = [p.result for p in self.pendings]
        if self.todo:
            model = model or load_model()
            for vec, i in zip(vecs, self.todo, strict=True):
                results[i] = _finish(self.rubrics[i], self.pendings[i], vec, model)
        return [r for r in results if r is not None]


def plan_many(rubrics: list[Rubric], answers: list[str], choices: list[str | None] | None = None) -> Plan:
    """Run the checks that need no encoder on each (rubric, answer[, choice]) pair."""
    if len(rubrics) != len(answers) or (choices is not None and len(choices) != len(answers)):
        raise ValueError("grading needs one rubric (and one choice, if any) per answer")
    picks = choices if choices is not None else [None] * len(answers)
    pendings = [_precheck(r, a, c) for r, a, c in zip(rubrics, answers, picks, strict=True)]
    return Plan(rubrics, pendings, [i for i, p in enumerate(pendings) if p.result is None])


def grade_many(rubrics: list[Rubric], answers: list[str], encoder: Encoder, *,
               choices: list[str | None] | None = None, model: GeneralModel | None = None) -> list[GradeResult]:
    """Grade answers (paired with rubrics, and choices when given) using one batched encoder call."""
    plan = plan_many(rubrics, answers, choices)
    texts = plan.texts
    vecs = encoder.encode(texts) if texts else np.zeros((0, encoder.dim), dtype=np.float32)
    return plan.finish(vecs, model)

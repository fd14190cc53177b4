"""Grade answers against rubrics: cheap shortcuts first, then one batched encode, then judgement."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from app.grading.align import segments
from app.grading.checks import is_evasive, is_keyword_list, strip_injection
from app.grading.choice import exact_match, is_bare_letter
from app.grading.judge import judge
from app.grading.rubric import GRADER_VERSION, Rubric
from app.grading.scoring import GeneralModel, load_model
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


def _finish(rubric: Rubric, pending: _Pending, vecs: np.ndarray, model: GeneralModel) -> GradeResult:
    """vecs: the answer's vector followed by its phrases' vectors."""
    verdict = judge(rubric, pending.text, vecs[0], pending.flags, model, vecs[1:])
    return GradeResult(**verdict)


def answer_texts(text: str) -> list[str]:
    """What is encoded for one answer, in one batch: the answer, then its phrases."""
    return [text, *segments(text)]


def grade(rubric: Rubric, answer: str, encoder: Encoder, *, choice: str | None = None,
          model: GeneralModel | None = None) -> GradeResult:
    """Grade one answer with at most one encoder call (none for exact options or rejections)."""
    pending = _precheck(rubric, answer, choice)
    if pending.result is not None:
        return pending.result
    vecs = encoder.encode(answer_texts(pending.text))
    return _finish(rubric, pending, vecs, model or load_model())


def grade_many(rubrics: list[Rubric], answers: list[str], encoder: Encoder, *,
               model: GeneralModel | None = None) -> list[GradeResult]:
    """Grade answers (paired with rubrics) using one batched encoder call for all of them."""
    if len(rubrics) != len(answers):
        raise ValueError("grade_many needs one rubric per answer")
    model = model or load_model()
    pendings = [_precheck(r, a, None) for r, a in zip(rubrics, answers, strict=True)]
    todo = [i for i, p in enumerate(pendings) if p.result is None]
    texts: list[str] = []
    spans: list[tuple[int, int]] = []
    for i in todo:
        chunk = answer_texts(pendings[i].text)
        spans.append((len(texts), len(texts) + len(chunk)))
        texts.extend(chunk)
    vecs = encoder.encode(texts) if texts else np.zeros((0, encoder.dim), dtype=np.float32)
    results: list[GradeResult | None] = [p.result for p in pendings]
    for (lo, hi), i in zip(spans, todo, strict=True):
        results[i] = _finish(rubrics[i], pendings[i], vecs[lo:hi], model)
    return [r for r in results if r is not None]

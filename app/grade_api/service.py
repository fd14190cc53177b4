"""Grade answers for other applications; every graded answer is stored as an attempt."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.answers.rubrics import RubricBook
from app.answers.service import payload
from app.bank.repository import get_question
from app.errors import NotFoundError
from app.grade_api.schemas import GradeIn, RubricIn
from app.grading import GradeResult, GradingItem, Rubric, grade, grade_many, prepare_many
from app.ids import new_id
from app.models import ApiKey, StoredRubric
from ingest.embedder import Encoder
from ingest.index import LoadedIndex


def _item(body: RubricIn) -> GradingItem:
    return GradingItem(
        question=body.question,
        reference_answers=list(body.reference_answers),
        wrong_answers=list(body.wrong_answers),
        explanation=body.explanation,
        examples=[(e.answer, e.label) for e in body.examples],
    )


def register_rubric(session: Session, book: RubricBook, key: ApiKey, body: RubricIn) -> StoredRubric:
    """Precompute and store everything about a client's question (its texts go through the cache)."""
    encoder = book.encoder
    (rubric,) = prepare_many([_item(body)], encoder)
    row = StoredRubric(
        id=new_id("r"),
        api_key_id=key.id,
        question=body.question,
        reference_answers=list(body.reference_answers),
        wrong_answers=list(body.wrong_answers),
        examples=[e.model_dump() for e in body.examples],
        prepared=rubric.to_dict(),
        model_id=encoder.model_id,
        grader_version=rubric.version,
    )
    session.add(row)
    session.flush()
    return row


def load_rubric(session: Session, key: ApiKey, rubric_id: str) -> StoredRubric:
    """A stored rubric that belongs to the calling key, or 404."""
    row = session.get(StoredRubric, rubric_id)
    if row is None or row.api_key_id != key.id:
        raise NotFoundError(f"no rubric with id {rubric_id!r}", details={"id": rubric_id})
    return row


def generic_view(result: GradeResult, model_id: str) -> dict[str, Any]:
    """A verdict for a question that is not in the bank."""
    return {**result.to_dict(), "model": model_id}


class _Target:
    """What one request item is graded against."""

    def __init__(self, rubric: Rubric, question: Any = None, rubric_id: str | None = None) -> None:
        self.rubric, self.question, self.rubric_id = rubric, question, rubric_id


def _targets(
    session: Session, book: RubricBook, key: ApiKey, items: list[GradeIn], strict: bool
) -> list[_Target | NotFoundError]:
    """Resolve each item's rubric; inline questions are prepared together in one batch (texts cached)."""
    out: list[_Target | NotFoundError | None] = []
    inline: list[int] = []
    for i, item in enumerate(items):
        try:
            if item.question_id is not None:
                question = get_question(session, item.question_id)
                out.append(_Target(book.get(session, question), question=question))
            elif item.rubric_id is not None:
                row = load_rubric(session, key, item.rubric_id)
                out.append(_Target(Rubric.from_dict(row.prepared), rubric_id=row.id))
            else:
                out.append(None)
                inline.append(i)
        except NotFoundError as exc:
            if strict:
                raise
            out.append(exc)
    if inline:
        prepared = prepare_many([_item(items[i].inline()) for i in inline], book.encoder)
        for i, rubric in zip(inline, prepared, strict=True):
            out[i] = _Target(rubric)
    return [t for t in out if t is not None]


def grade_items(
    session: Session,
    grading: tuple[Encoder, LoadedIndex, RubricBook],
    key: ApiKey,
    items: list[GradeIn],
    *,
    strict: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Grade items with one batched encoder call for the answers; per-item errors stay per item unless strict.

    Returns the results and the attempt rows to store (the caller writes them with its usage count).
    """
    encoder, index, book = grading
    targets = _targets(session, book, key, items, strict)
    free = [i for i, t in enumerate(targets) if isinstance(t, _Target) and items[i].choice is None]
    results: dict[int, GradeResult] = {}
    batch = grade_many([targets[i].rubric for i in free], [items[i].answer for i in free], encoder)  # type: ignore[union-attr]
    results.update(zip(free, batch, strict=True))
    out: list[dict[str, Any]] = []
    attempts: list[dict[str, Any]] = []
    for i, target in enumerate(targets):
        if isinstance(target, NotFoundError):
            out.append({"error": {"code": target.code, "message": target.message, "details": target.details}})
            continue
        result = results.get(i) or grade(target.rubric, items[i].answer, encoder, choice=items[i].choice)
        if target.question is not None:
            view = payload(session, index, target.question, target.rubric, result, encoder.model_id)
        else:
            view = generic_view(result, encoder.model_id)
        attempt = {
            "id": new_id("a"),
            "question_id": target.question.id if target.question is not None else None,
            "rubric_id": target.rubric_id,
            "api_key_id": key.id,
            "answer": items[i].answer,
            "choice": items[i].choice,
            "verdict": result.verdict,
            "score": result.score,
            "confidence": result.confidence,
            "result": view,
            "grader_version": result.grader_version,
            "model_id": encoder.model_id,
        }
        attempts.append(attempt)
        out.append({**view, "attempt_id": attempt["id"]})
    return out, attempts

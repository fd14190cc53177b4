"""Queries over bank questions."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.errors import NotFoundError
from app.models import ACTIVE, Question


def list_questions(
    session: Session,
    *,
    topic: str | None = None,
    q: str | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> tuple[list[Question], int]:
    """Active questions in document order, filtered by topic and by text; with the total."""
    rows = list(
        session.scalars(
            select(Question).where(Question.status == ACTIVE).order_by(Question.document, Question.number, Question.id)
        )
    )
    # Topics are a JSON list: filtering in Python keeps SQLite and PostgreSQL identical.
    if topic:
        rows = [r for r in rows if topic in r.topics]
    if q:
        needle = q.casefold()
        rows = [r for r in rows if needle in r.text.casefold()]
    total = len(rows)
    end = None if limit is None else offset + limit
    return rows[offset:end], total


def get_question(session: Session, question_id: str, *, include_retired: bool = False) -> Question:
    """One question by id; retired ones only when asked for."""
    row = session.get(Question, question_id)
    if row is None or (row.status != ACTIVE and not include_retired):
        raise NotFoundError(f"no question with id {question_id!r}", details={"id": question_id})
    return row


def get_many(session: Session, ids: list[str]) -> dict[str, Question]:
    """Questions by id (active or not), for search results and citations."""
    if not ids:
        return {}
    return {r.id: r for r in session.scalars(select(Question).where(Question.id.in_(ids)))}


def topic_counts(session: Session) -> Counter[str]:
    """How many active questions carry each topic."""
    counts: Counter[str] = Counter()
    for topics in session.scalars(select(Question.topics).where(Question.status == ACTIVE)):
        counts.update(topics)
    return counts


def count_active(session: Session) -> int:
    """Number of questions being served."""
    return int(session.scalar(select(func.count()).select_from(Question).where(Question.status == ACTIVE)) or 0)

"""File, list and resolve appeals; accepted ones become labelled examples for the question."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.errors import ConflictError, NotFoundError
from app.ids import new_id
from app.learners.scheduler import review
from app.models import Appeal, Attempt, Card, LabelledExample, utcnow

CLAIMS = ("correct", "partial")


def _reschedule(session: Session, attempt: Attempt, claimed: str) -> bool:
    """Redo the attempt's review with the claimed verdict, if it is still the card's latest review."""
    if attempt.learner_id is None or attempt.question_id is None:
        return False
    card = session.get(Card, (attempt.learner_id, attempt.question_id), with_for_update=True)
    if card is None:
        return False
    later = session.scalars(
        select(Attempt.id).where(
            Attempt.learner_id == attempt.learner_id,
            Attempt.question_id == attempt.question_id,
            Attempt.created_at > attempt.created_at,
        )
    ).first()
    if later is not None:
        return False  # a later review already moved the card on; keep it
    state, due, rating = review(attempt.card_before, claimed, attempt.created_at)
    card.state, card.due, card.last_rating, card.updated_at = state, due, rating, utcnow()
    return True


def file_appeal(
    session: Session, *, attempt_id: str, claimed: str, comment: str | None, learner_id: str | None,
    api_key_id: str | None = None, author: bool = False,
) -> dict[str, Any]:
    """Record the owner's claim, re-schedule the card as they asked, keep both verdicts.

    Only the attempt's owner may appeal it: the learner who made it (`learner_id`), or for a grading
    API attempt the key that made it (`api_key_id`); an `author` key may appeal any. Anyone else is
    told the attempt does not exist, as for an id that does not.
    """
    attempt = session.get(Attempt, attempt_id)
    owner = attempt is not None and (
        author
        or (attempt.learner_id is not None and attempt.learner_id == learner_id)
        or (attempt.api_key_id is not None and attempt.api_key_id == api_key_id)
    )
    if attempt is None or not owner:
        raise NotFoundError(f"no attempt with id {attempt_id!r}", details={"id": attempt_id})
    if session.scalars(select(Appeal).where(Appeal.attempt_id == attempt_id)).first() is not None:
        raise ConflictError("this attempt has already been appealed", details={"attempt_id": attempt_id})
    if claimed == attempt.verdict:
        raise ConflictError(f"the attempt was already graded {claimed}", details={"attempt_id": attempt_id})
    appeal = Appeal(
        id=new_id("ap"),
        attempt_id=attempt.id,
        learner_id=attempt.learner_id,
        question_id=attempt.question_id,
        original_verdict=attempt.verdict,
        claimed_verdict=claimed,
        comment=comment,
        status="open",
    )
    session.add(appeal)
    rescheduled = _reschedule(session, attempt, claimed)
    session.flush()
    return {**appeal_view(appeal, attempt), "rescheduled": rescheduled}


def appeal_view(appeal: Appeal, attempt: Attempt | None) -> dict[str, Any]:
    """An appeal with the answer and both verdicts."""
    return {
        "id": appeal.id,
        "attempt_id": appeal.attempt_id,
        "question_id": appeal.question_id,
        "answer": attempt.answer if attempt else None,
        "original_verdict": appeal.original_verdict,
        "claimed_verdict": appeal.claimed_verdict,
        "comment": appeal.comment,
        "status": appeal.status,
        "created_at": appeal.created_at,
    }


def list_appeals(session: Session, status: str | None = "open") -> list[dict[str, Any]]:
    """Appeals, oldest first, with their answers."""
    query = select(Appeal).order_by(Appeal.created_at)
    if status:
        query = query.where(Appeal.status == status)
    return [appeal_view(a, session.get(Attempt, a.attempt_id)) for a in session.scalars(query)]


def resolve(session: Session, appeal_id: str, *, accept: bool) -> dict[str, Any]:
    """Accept (the answer becomes a labelled example for its question) or reject an appeal."""
    appeal = session.get(Appeal, appeal_id)
    if appeal is None:
        raise NotFoundError(f"no appeal with id {appeal_id!r}")
    if appeal.status != "open":
        raise ConflictError(f"appeal {appeal_id} is already {appeal.status}")
    attempt = session.get(Attempt, appeal.attempt_id)
    appeal.status, appeal.resolved_at = ("accepted" if accept else "rejected"), utcnow()
    if accept and attempt is not None and appeal.question_id:
        session.add(
            LabelledExample(
                question_id=appeal.question_id, answer=attempt.answer, label=appeal.claimed_verdict, source="appeal"
            )
        )
    session.flush()
    return appeal_view(appeal, attempt)
